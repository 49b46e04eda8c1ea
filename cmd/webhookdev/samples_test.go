package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/internal/scaffold"
)

// sendLines returns the `webhookdev send` command lines of
// dev/samples/README.md, as arguments.
func sendLines(t *testing.T) [][]string {
	t.Helper()
	f, err := os.Open("dev/samples/README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "go run ./cmd/webhookdev send "); ok {
			out = append(out, append([]string{"send"}, strings.Fields(rest)...))
		}
	}
	return out
}

// TestEverySampleIsAccepted runs dev/samples/README.md's commands against
// the dev sources' receiver: each sample is accepted, and every source of
// dev/sources.json has its line, with a sample of its kind.
func TestEverySampleIsAccepted(t *testing.T) {
	srv, _ := devReceiver(t)
	sources, _, err := checkout.Sources(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	sent := map[string]bool{}
	for _, args := range sendLines(t) {
		out, err := run(t, nil, append(args, "--url", srv.URL)...)
		if err != nil || !strings.Contains(out, `"status":"accepted"`) {
			t.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		src, ok := sources.Lookup(args[1])
		if !ok {
			t.Errorf("%s: no such dev source", strings.Join(args, " "))
			continue
		}
		if want := filepath.Join("dev", "samples", scaffold.SampleFile(src.Kind)); args[2] != want {
			t.Errorf("%s: source %s is of kind %s, its sample is %s", strings.Join(args, " "), src.Name, src.Kind, want)
		}
		sent[src.Name] = true
	}
	for _, name := range sources.Names() {
		if !sent[name] {
			t.Errorf("dev/samples/README.md sends nothing to source %s", name)
		}
	}
}

// The README's story, ids included: a sample, its redelivery (a
// duplicate, which still uses up an id: the insert's ON CONFLICT DO
// NOTHING draws from the sequence before it finds the conflict), then a
// file of one's own, stored with id 3.
func TestReadmeIDs(t *testing.T) {
	srv, _ := devReceiver(t)
	sample := filepath.Join("dev", "samples", "stripe.json")
	want := []string{`{"status":"accepted","id":1}`, `{"status":"duplicate"}`}
	for _, w := range want {
		out, err := run(t, nil, "send", "stripe", sample, "--url", srv.URL)
		if err != nil || !strings.Contains(out, w) {
			t.Fatalf("send %s: %v\n%s, want %s", sample, err, out, w)
		}
	}
	mine := `{"id":"evt_mine_1","object":"event","type":"invoice.paid","created":1700000000,"data":{"object":{"id":"in_mine","object":"invoice","customer":"cus_mine"}}}`
	out, err := run(t, strings.NewReader(mine), "send", "stripe", "-", "--url", srv.URL)
	if err != nil || !strings.Contains(out, `{"status":"accepted","id":3}`) {
		t.Fatalf("send of one's own: %v\n%s", err, out)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`send stripe my-event.json +# \{"status":"accepted","id":3\}`).Match(readme) {
		t.Error(`README.md's send example does not say {"status":"accepted","id":3}`)
	}
}

// `new handler` refuses, writing nothing, what it cannot write; the
// command runs in the real repository here, so only refusals are tried
// (internal/scaffold's tests write into copies), under a name no package
// has, and the "exists" case under whichever handler package the
// application has: the test holds in a fork.
func TestNewHandlerRefusals(t *testing.T) {
	const name = "wirefusedhandler"
	if _, err := os.Stat(filepath.Join("shared", "handlers", name)); err == nil {
		t.Fatalf("shared/handlers/%s exists: the test needs a name no package has", name)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"wi_refused_handler", "--kind", "stripe", "--type", "invoice.paid"}, "Go package name"},
		{[]string{name, "--kind", "paypal", "--type", "invoice.paid"}, `kind "paypal"`},
		{[]string{name, "--type", "invoice.paid"}, "--kind or --source"},
		{[]string{name, "--kind", "stripe", "--source", "stripe", "--type", "invoice.paid"}, "not both"},
		{[]string{name, "--source", "nosuchsource", "--type", "invoice.paid"}, "no source named"},
	}
	entries, err := os.ReadDir(filepath.Join("shared", "handlers"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			cases = append(cases, struct {
				args []string
				want string
			}{[]string{e.Name(), "--kind", "stripe", "--type", "invoice.paid"}, "exists"})
			break
		}
	}
	for _, tc := range cases {
		before, err := os.ReadFile("shared/handlers/local.go")
		if err != nil {
			t.Fatal(err)
		}
		out, err := run(t, nil, append([]string{"new", "handler"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("new handler %s: %v, want an error with %q\n%s", strings.Join(tc.args, " "), err, tc.want, out)
		}
		if after, _ := os.ReadFile("shared/handlers/local.go"); string(after) != string(before) {
			t.Fatalf("new handler %s changed local.go", strings.Join(tc.args, " "))
		}
		if _, err := os.Stat(filepath.Join("shared", "handlers", name)); err == nil {
			t.Fatalf("a refused new handler wrote shared/handlers/%s", name)
		}
	}
}
