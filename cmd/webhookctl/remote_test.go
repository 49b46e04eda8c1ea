package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/operatortest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// remoteOf serves the operator API over f's database and archive, with the
// settings the operator function would read from f's environment, and
// returns a fixture whose commands go through it as identity "operator" or
// "viewer": the same database, reached as a deployed stack is reached.
func (f *opsFixture) remoteOf(as string) (*opsFixture, *operatortest.Remote) {
	f.t.Helper()
	env := func(k string) string { return f.env[k] }
	cfg, err := operations.ConfigFromEnv(env)
	if err != nil {
		f.t.Fatal(err)
	}
	var blobs *blobstore.Store
	if f.s3 != nil {
		blobs = s3test.Open(f.t, *f.s3)
	}
	r := operatortest.Start(f.t, f.store, cfg.Archive, blobs)
	id := r.Operator
	if as == "viewer" {
		id = r.Viewer
	}
	remote := *f
	remote.env = r.Env(id)
	return &remote, r
}

// The words of an output that differ between any two runs: instants, how
// long ago they were, the archive's object keys (they name the time of
// the batch), the processors' instances.
var (
	instantRE  = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?`)
	durationRE = regexp.MustCompile(`\b(in )?(\d+(\.\d+)?(h|m|s|ms|µs|ns))+( ago)?\b`)
	keyRE      = regexp.MustCompile(`archive/[^"\s]+\.jsonl\.gz`)
	ageRE      = regexp.MustCompile(`"([a-z_]*age_seconds)":[0-9.e+-]+`)
	// A processor's name holds its instance's random id.
	instanceRE = regexp.MustCompile(`/[0-9a-f]{12}/`)
	// An object's compressed size depends on the times it holds.
	objectRE = regexp.MustCompile(`"object_bytes":\d+`)
	// A table's columns are as wide as those words.
	spacesRE = regexp.MustCompile(` {2,}`)
)

func normalize(s string) string {
	s = ageRE.ReplaceAllString(s, `"$1":0`)
	s = instanceRE.ReplaceAllString(s, "/<instance>/")
	s = objectRE.ReplaceAllString(s, `"object_bytes":0`)
	s = instantRE.ReplaceAllString(s, "<instant>")
	s = keyRE.ReplaceAllString(s, "<key>")
	s = durationRE.ReplaceAllString(s, "<span>")
	return spacesRE.ReplaceAllString(s, "  ")
}

// twins makes the same inbox twice (the same events, in the same order,
// so with the same ids): one reached directly, one through the operator
// API as the acting identity. The direct one declares the remote
// identity's principal as its operator, so that both record one name.
func twins(t *testing.T) (direct, remote *opsFixture, r *operatortest.Remote) {
	t.Helper()
	build := func() *opsFixture {
		f := newOpsFixture(t)
		f.withArchive()
		for i := range 3 {
			f.insert("stripe", fmt.Sprintf("evt_ok_%d", i), "ok")
		}
		f.insert("stripe", "evt_poison", "poison")
		f.insert("github", "gh_poison", "poison")
		f.insert("github", "gh_unhandled", "issues")
		f.insertBody("stripe", "evt_body", "ok", []byte(`{"id":"evt_body","type":"ok","data":{"amount":4200}}`))
		f.drain(nil)
		f.insert("stripe", "evt_pending", "ok")
		return f
	}
	direct = build()
	remote, r = build().remoteOf("operator")
	direct.env[EnvActor] = r.Operator.UserARN
	return direct, remote, r
}

// Every operator command prints the same through the operator API as
// directly (the same pages, counts and actions, on the same inbox), but
// for the name its actions are recorded under, which remotely is the
// caller's verified AWS principal.
func TestCommandsAreTheSameThroughTheOperatorAPI(t *testing.T) {
	t.Parallel()
	direct, remote, r := twins(t)
	body := filepath.Join(t.TempDir(), "body")
	script := [][]string{
		{"stats"}, {"stats", "--json", "--window", "1d"},
		{"events", "list"}, {"events", "list", "--json", "--source", "stripe", "--since", "1d"},
		{"events", "list", "--state", "dead", "--json"}, {"events", "list", "--state", "unhandled"}, {"events", "list", "--limit", "2", "--json"},
		{"events", "show", "7"}, {"events", "show", "stripe", "evt_body", "--json"}, {"events", "show", "4", "--no-body"},
		{"dead-letters", "list"}, {"dead-letters", "list", "--json", "--source", "github"},
		{"dead-letters", "requeue", "--source", "stripe"}, {"dead-letters", "requeue", "--source", "stripe", "--yes", "--reason", "INC-1", "--json"},
		{"replay", "--source", "stripe", "--outcome", "handled", "--dry-run", "--json"},
		{"replay", "--source", "stripe", "--outcome", "handled", "--yes", "--reason", "INC-2"},
		{"archive", "run", "--dry-run", "--json", "--min-age", "1ms"}, {"archive", "run", "--json", "--min-age", "1ms"},
		{"events", "show", "7", "--body-out", body},
		{"expunge", "stripe", "evt_body", "--dry-run", "--json"}, {"expunge", "stripe", "evt_body", "--yes", "--reason", "GDPR-1"},
		{"events", "show", "7", "--json"},
		{"sources", "pause", "stripe", "--dry-run"}, {"sources", "pause", "stripe", "--reason", "INC-5", "--json"},
		{"events", "list", "--state", "paused"}, {"sources", "pause", "stripe"},
		{"handlers", "pause", "kind github, any type", "--reason", "INC-6"}, {"sources", "resume", "stripe"},
		{"handlers", "resume", "kind github, any type", "--json"},
		{"dead-letters", "resolve", "--all", "--cause", "permanent_error"}, {"events", "discard", "--all", "--dry-run", "--json"},
		{"dead-letters", "resolve", "--all", "--yes", "--reason", "INC-3", "--json"},
		{"actions"}, {"actions", "--json", "--since", "1h"},
		{"events", "list", "--match", `{"data":{"amount":4200}}`, "--from", "2020-01-01"},
		{"events", "list", "--match", `{"type":"ok"}`, "--from", "2020-01-01", "--json"}, {"events", "list", "--header", "X-Customer=1"},
	}
	for _, args := range script {
		dOut, dErr, dRunErr := direct.run(args...)
		rOut, rErr, rRunErr := remote.run(args...)
		what := strings.Join(args, " ")
		if (dRunErr == nil) != (rRunErr == nil) {
			t.Fatalf("webhookctl %s: direct %v, remote %v\n%s\n%s", what, dRunErr, rRunErr, dErr, rErr)
		}
		if d, r := normalize(dOut), normalize(rOut); d != r {
			t.Errorf("webhookctl %s prints differently through the operator API:\n--- direct\n%s\n--- remote\n%s", what, d, r)
		}
	}
	if b, err := os.ReadFile(body); err != nil || string(b) != `{"id":"evt_body","type":"ok","data":{"amount":4200}}` {
		t.Errorf("--body-out through the operator API wrote %q, %v", b, err)
	}
	// The remote actions name the verified principal, never the
	// declared name.
	var acts struct {
		Actions []operations.Action `json:"actions"`
	}
	remote.runJSON(&acts, "actions")
	if len(acts.Actions) != 8 {
		t.Fatalf("actions = %+v", acts.Actions)
	}
	for _, a := range acts.Actions {
		if a.Actor != r.Operator.UserARN {
			t.Errorf("action %d recorded as %q, not the principal %s", a.ID, a.Actor, r.Operator.UserARN)
		}
	}
}

// The read-only identity reads and counts through the operator API; IAM
// refuses each of its actions, changing nothing; whoami says so.
func TestTheViewerMayNotAct(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.withArchive()
	f.insert("stripe", "evt_poison", "poison")
	f.insert("stripe", "evt_ok", "ok")
	f.drain(nil)
	viewer, r := f.remoteOf("viewer")
	var who operations.Identity
	viewer.runJSON(&who, "whoami")
	if who.Access != operations.AccessRead || !who.Verified || who.Operator != r.Viewer.UserARN {
		t.Fatalf("whoami = %+v", who)
	}
	if out := viewer.runOK("dead-letters", "requeue", "--all"); !strings.Contains(out, "1 events would be requeued") {
		t.Fatalf("the viewer's dry run: %s", out)
	}
	before := f.snapshot()
	for _, args := range [][]string{
		{"dead-letters", "requeue", "--all", "--yes"}, {"replay", "--all", "--yes"},
		{"expunge", "stripe", "evt_ok", "--yes"}, {"archive", "run", "--min-age", "1s"},
	} {
		_, _, err := viewer.run(args...)
		if err == nil || !strings.Contains(err.Error(), string(inbox.CauseForbidden)) || !strings.Contains(err.Error(), "OperatorActPolicy") {
			t.Errorf("webhookctl %s as the viewer: %v", strings.Join(args, " "), err)
		}
	}
	if got := changed(before, f.snapshot()); len(got) != 0 {
		t.Fatalf("the viewer's refused actions changed %v", got)
	}
	if n := f.count(`SELECT count(*) FROM webhook_operator_actions`); n != 0 {
		t.Fatalf("%d actions recorded", n)
	}
}

// migrate never goes through an operator API; two ways to name one are
// refused; a URL that is no operator API is refused before anything is
// sent.
func TestRemoteFlags(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	remote, r := f.remoteOf("operator")
	if _, _, err := remote.run("migrate", "status"); err == nil || !strings.Contains(err.Error(), "operator API") {
		t.Fatalf("migrate through the operator API: %v", err)
	}
	if _, _, err := remote.run("stats", "--stack", "prod"); err == nil || !strings.Contains(err.Error(), "one of --stack") {
		t.Fatalf("--stack and an operator URL: %v", err)
	}
	plain := *f
	plain.env = map[string]string{EnvOperatorURL: "http://example.com/", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "x", "AWS_REGION": "us-east-1"}
	if _, _, err := plain.run("stats"); err == nil || !strings.Contains(err.Error(), "HTTPS") {
		t.Fatalf("an operator API over plain HTTP off loopback: %v", err)
	}
	// The operator URL alone serves reads too.
	one := *f
	one.env = r.Env(r.Operator)
	delete(one.env, EnvOperatorReadURL)
	var who operations.Identity
	one.runJSON(&who, "whoami")
	if who.Access != operations.AccessAct {
		t.Fatalf("whoami through the acting URL alone = %+v", who)
	}
}

// --via-api reaches the running make dev through the operator API its
// stack file names, signed as its local operator.
func TestViaAPIUsesTheDevStacksOperatorAPI(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.insert("stripe", "evt_1", "ok")
	_, r := f.remoteOf("operator")
	dir := t.TempDir()
	st := checkout.Stack{PID: os.Getpid(), Env: map[string]string{"DATABASE_URL": f.env["DATABASE_URL"]}, Operator: &checkout.OperatorAPI{
		URL: r.ActURL, ReadURL: r.ReadURL, Region: "us-east-1",
		Identities: map[string]checkout.Credentials{"operator": {AccessKeyID: r.Operator.AccessKeyID, SecretAccessKey: r.Operator.SecretAccessKey,
			SessionToken: r.Operator.SessionToken, ARN: r.Operator.UserARN}},
	}}
	if err := checkout.WriteStack(filepath.Join(dir, checkout.StackFile), st); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runIn(t, dir, nil, "--via-api", "whoami", "--json")
	if err != nil {
		t.Fatalf("whoami --via-api: %v\n%s", err, stderr)
	}
	var who operations.Identity
	if err := json.Unmarshal([]byte(out), &who); err != nil || who.Operator != r.Operator.UserARN || !who.Verified {
		t.Fatalf("whoami --via-api = %s (%v)", out, err)
	}
	if strings.Contains(stderr, "using database") {
		t.Errorf("--via-api reached the database directly: %s", stderr)
	}
	out, _, err = runIn(t, dir, nil, "--via-api", "events", "list", "--json")
	var page operations.EventPage
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Events) != 1 {
		t.Fatalf("events list --via-api = %s, %v", out, err)
	}
	// Without an operator API in the stack file, it says so.
	st.Operator = nil
	if err := checkout.WriteStack(filepath.Join(dir, checkout.StackFile), st); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runIn(t, dir, nil, "--via-api", "stats"); err == nil || !strings.Contains(err.Error(), "serves no operator API") {
		t.Fatalf("--via-api without one: %v", err)
	}
}

// --stack NAME reads the stack's outputs (DescribeStacks, with the
// operator's AWS configuration) and goes through the operator API they
// name; a stack without them, or an identity that may not read them, is
// told what to do.
func TestStackNameFindsTheOperatorAPI(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.insert("stripe", "evt_1", "ok")
	_, r := f.remoteOf("operator")
	cf := &operatortest.CloudFormation{Stacks: map[string][]string{
		"inbox-test": {"OperatorReadUrl=" + r.ReadURL, "OperatorUrl=" + r.ActURL},
		"inbox-old":  nil,
	}}
	srv := httptest.NewServer(cf)
	t.Cleanup(srv.Close)
	laptop := *f
	// The operator's own configuration: credentials, region, and (here
	// only) where CloudFormation is.
	laptop.env = map[string]string{
		"AWS_ACCESS_KEY_ID": r.Operator.AccessKeyID, "AWS_SECRET_ACCESS_KEY": r.Operator.SecretAccessKey, "AWS_SESSION_TOKEN": r.Operator.SessionToken,
		"AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": srv.URL,
	}
	var who operations.Identity
	laptop.runJSON(&who, "--stack", "inbox-test", "whoami")
	if who.Operator != r.Operator.UserARN || who.Access != operations.AccessAct || !who.Verified {
		t.Fatalf("whoami --stack = %+v", who)
	}
	laptop.env[EnvStack] = "inbox-test"
	var page struct {
		Events []operations.Event `json:"events"`
	}
	laptop.runJSON(&page, "events", "list")
	if len(page.Events) != 1 || page.Events[0].EventID != "evt_1" {
		t.Fatalf("events list with %s = %+v", EnvStack, page)
	}
	if reqs := cf.Requests(); len(reqs) != 2 || !strings.Contains(reqs[0], "StackName=inbox-test") || !strings.Contains(reqs[0], "Credential="+r.Operator.AccessKeyID) {
		t.Fatalf("DescribeStacks requests: %q", reqs)
	}
	if _, _, err := laptop.run("--stack", "inbox-old", "stats"); err == nil || !strings.Contains(err.Error(), "update the stack") {
		t.Fatalf("a stack without the operator function: %v", err)
	}
	denied := httptest.NewServer(&operatortest.CloudFormation{Denied: true})
	t.Cleanup(denied.Close)
	laptop.env["AWS_ENDPOINT_URL"] = denied.URL
	if _, _, err := laptop.run("--stack", "inbox-test", "stats"); err == nil || !strings.Contains(err.Error(), "OperatorReadPolicy") {
		t.Fatalf("an identity that may not read the stack: %v", err)
	}
}

// webhookctl console through the operator API: the same console, on
// loopback, showing who acts as the verified principal; a viewer's is
// read-only, whatever the console's flags.
func TestConsoleThroughTheOperatorAPI(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.insert("stripe", "evt_console_remote", "invoice.paid")
	for _, as := range []string{"operator", "viewer"} {
		remote, r := f.remoteOf(as)
		addr, stop := remote.startConsole()
		jar, _ := cookiejar.New(nil)
		client := &http.Client{Jar: jar}
		resp, err := client.Get(addr)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		id := r.Operator
		want := "acting as " + id.UserARN + " (verified by AWS IAM)"
		if as == "viewer" {
			id = r.Viewer
			want = "read-only, signed in as " + id.UserARN + " (verified by AWS IAM)"
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), want) {
			t.Fatalf("the console as the %s: %d, want %q in:\n%s", as, resp.StatusCode, want, page)
		}
		base := strings.SplitN(addr, "/?", 2)[0]
		resp, err = client.Get(base + "/events")
		if err != nil {
			t.Fatal(err)
		}
		page, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "evt_console_remote") {
			t.Fatalf("the events page as the %s: %d\n%s", as, resp.StatusCode, page)
		}
		if err := stop(); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
}
