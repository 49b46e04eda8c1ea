package scaffold

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testhandler"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// repoRoot is the module's root, from this package's directory.
const repoRoot = "../.."

// setup returns a root holding what Write reads (local.go and the
// samples), copied from the repository: a generator run on it never
// touches the real tree.
func setup(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	copyFile(t, filepath.Join(repoRoot, LocalFile), filepath.Join(root, LocalFile))
	entries, err := os.ReadDir(filepath.Join(repoRoot, "dev", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		copyFile(t, filepath.Join(repoRoot, "dev", "samples", e.Name()), filepath.Join(root, "dev", "samples", e.Name()))
	}
	return root
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// tree returns every file under root with its contents.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[strings.TrimPrefix(p, root)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var paid = Spec{Name: "paidinvoices", Kind: "stripe", Type: "invoice.paid"}

func TestRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"underscore", Spec{Name: "paid_invoices", Kind: "stripe", Type: "invoice.paid"}, "Go package name"},
		{"upper case", Spec{Name: "PaidInvoices", Kind: "stripe", Type: "invoice.paid"}, "Go package name"},
		{"leading digit", Spec{Name: "1paid", Kind: "stripe", Type: "invoice.paid"}, "Go package name"},
		{"too long", Spec{Name: strings.Repeat("a", 41), Kind: "stripe", Type: "invoice.paid"}, "at most 40"},
		{"path", Spec{Name: "../paid", Kind: "stripe", Type: "invoice.paid"}, "Go package name"},
		{"keyword", Spec{Name: "func", Kind: "stripe", Type: "invoice.paid"}, "taken"},
		{"core prefix", Spec{Name: "webhooks", Kind: "stripe", Type: "invoice.paid"}, "taken"},
		{"beside the packages", Spec{Name: "internal", Kind: "stripe", Type: "invoice.paid"}, "taken"},
		{"unknown kind", Spec{Name: "paid", Kind: "paypal", Type: "invoice.paid"}, `kind "paypal"`},
		{"no kind", Spec{Name: "paid", Type: "invoice.paid"}, `kind ""`},
		{"bad source", Spec{Name: "paid", Kind: "stripe", Source: "Billing EU", Type: "invoice.paid"}, "not a source name"},
		{"no type", Spec{Name: "paid", Kind: "stripe"}, "no event type"},
		{"quote in type", Spec{Name: "paid", Kind: "stripe", Type: `invoice"paid`}, "not an event type"},
		{"existing package", Spec{Name: "stripedunning", Kind: "stripe", Type: "invoice.paid"}, "exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := setup(t)
			if tc.spec.Name == "stripedunning" {
				copyFile(t, filepath.Join(repoRoot, "shared/handlers/stripedunning/dunning.go"), filepath.Join(root, "shared/handlers/stripedunning/dunning.go"))
			}
			before := tree(t, root)
			_, err := Write(root, tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Write(%+v) = %v, want an error with %q", tc.spec, err, tc.want)
			}
			if after := tree(t, root); len(after) != len(before) || after[LocalFile] != before[LocalFile] {
				t.Fatalf("a refused spec wrote files: %d before, %d after", len(before), len(after))
			}
		})
	}
}

// Every problem is reported at once.
func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	err := Spec{Name: "Bad", Kind: "nope"}.Validate()
	for _, want := range []string{`name "Bad"`, `kind "nope"`, "no event type"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

func TestWriteWritesThePackageAndItsTwoLines(t *testing.T) {
	t.Parallel()
	root := setup(t)
	before, _ := os.ReadFile(filepath.Join(root, LocalFile))
	res, err := Write(root, paid)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"shared/handlers/paidinvoices/paidinvoices.go", "shared/handlers/paidinvoices/paidinvoices_test.go",
		"shared/handlers/paidinvoices/migrations/00001_paidinvoices_events.sql", "shared/handlers/paidinvoices/testdata/event.json",
		LocalFile,
	}
	if strings.Join(res.Files, " ") != strings.Join(want, " ") {
		t.Fatalf("files = %v", res.Files)
	}
	after, _ := os.ReadFile(filepath.Join(root, LocalFile))
	added := addedLines(string(before), string(after))
	wantAdded := []string{
		`	"github.com/webhook-inbox/webhook-inbox/shared/handlers/paidinvoices"`,
		`	paidinvoices.Register(r, processor.Kind("stripe"))`,
		`	paidinvoices.Schema,`,
	}
	if strings.Join(added, "\n") != strings.Join(wantAdded, "\n") {
		t.Fatalf("local.go gained:\n%s", strings.Join(added, "\n"))
	}
	sql, _ := os.ReadFile(filepath.Join(root, want[2]))
	for _, s := range []string{"GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "UNIQUE (source, event_id)", "CREATE TABLE paidinvoices_events"} {
		if !bytes.Contains(sql, []byte(s)) {
			t.Errorf("the migration lacks %q", s)
		}
	}
	// Only the table is listed: no sequence in Grants.
	code, _ := os.ReadFile(filepath.Join(root, want[0]))
	if !bytes.Contains(code, []byte(`Grants: map[string][]string{"paidinvoices_events": {"SELECT", "INSERT"}}`)) || bytes.Contains(code, []byte("_seq")) {
		t.Errorf("Schema:\n%s", code)
	}
	// A second run refuses, and changes nothing.
	if _, err := Write(root, paid); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("second Write = %v", err)
	}
	if again, _ := os.ReadFile(filepath.Join(root, LocalFile)); !bytes.Equal(again, after) {
		t.Fatal("the refused second run changed local.go")
	}
}

// addedLines returns the lines of after that before lacks, in order
// (enough for files that only gain lines).
func addedLines(before, after string) []string {
	have := map[string]int{}
	for _, l := range strings.Split(before, "\n") {
		have[l]++
	}
	var out []string
	for _, l := range strings.Split(after, "\n") {
		if have[l] > 0 {
			have[l]--
			continue
		}
		out = append(out, l)
	}
	return out
}

// The user's lines and comments in local.go stay as they were; only the
// import and the two lines are added, wherever the user has put things.
func TestRegisterKeepsTheUsersLines(t *testing.T) {
	t.Parallel()
	src := `package handlers

// My own notes.
import (
	"github.com/webhook-inbox/webhook-inbox/shared/handlers/billing" // ours
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
)

func register(r *processor.Registry) {
	billing.Register(r, processor.Source("billing")) // the EU account too, one day
	// webhookdev new handler: registrations above this line.
	r.HandleFunc(processor.Kind("github"), "push", nil) // after the marker: stays after it
}

var schemas = []processor.HandlerSchema{
	billing.Schema,
	// webhookdev new handler: schemas above this line.
}
`
	out, err := Register([]byte(src), "orders", `processor.Source("shop")`)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer(
		"\t\"github.com/webhook-inbox/webhook-inbox/shared/processor\"\n",
		"\t\"github.com/webhook-inbox/webhook-inbox/shared/handlers/orders\"\n\t\"github.com/webhook-inbox/webhook-inbox/shared/processor\"\n",
		"\t// webhookdev new handler: registrations above this line.\n",
		"\torders.Register(r, processor.Source(\"shop\"))\n\t// webhookdev new handler: registrations above this line.\n",
		"\t// webhookdev new handler: schemas above this line.\n",
		"\torders.Schema,\n\t// webhookdev new handler: schemas above this line.\n",
	).Replace(src)
	if string(out) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}

	for _, tc := range []struct{ name, src, want string }{
		{"no registrations marker", strings.Replace(src, "// webhookdev new handler: registrations above this line.", "", 1), "registrations above this line"},
		{"no schemas marker", strings.Replace(src, "// webhookdev new handler: schemas above this line.", "// schemas", 1), "schemas above this line"},
		{"marker twice", strings.Replace(src, "billing.Schema,", "billing.Schema,\n// webhookdev new handler: schemas above this line.", 1), "not there once"},
		{"already imported", strings.Replace(src, "handlers/billing", "handlers/orders", 1), "already imports"},
		{"does not parse", "package handlers\nfunc {", "does not parse"},
	} {
		if _, err := Register([]byte(tc.src), "orders", `processor.Kind("square")`); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// Every kind has its shape, a sample in dev/samples with the shape's
// subject, and templates that give Go that parses: a new kind fails here
// until the generator knows it.
func TestEveryKindHasAShapeAndASample(t *testing.T) {
	t.Parallel()
	for _, kind := range source.Kinds() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			root := setup(t)
			res, err := Write(root, Spec{Name: "h" + kind, Kind: kind, Type: "x.y"})
			if err != nil {
				t.Fatalf("%s: %v (add its shape to kinds.go and dev/samples/%s.json)", kind, err, kind)
			}
			if len(res.Files) != 5 {
				t.Fatalf("files = %v", res.Files)
			}
		})
	}
	// --source routes by name.
	root := setup(t)
	if _, err := Write(root, Spec{Name: "billing", Kind: "stripe", Source: "stripe-eu", Type: "*"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(root, LocalFile))
	if !bytes.Contains(b, []byte(`billing.Register(r, processor.Source("stripe-eu"))`)) {
		t.Fatalf("local.go:\n%s", b)
	}
}

// The generator names the handler that already serves the new route (as
// the example stripedunning serves a first handler's usual route, invoice.paid
// for kind stripe).
func TestClashNamesTheRegisteredHandler(t *testing.T) {
	t.Parallel()
	reg := processor.NewRegistry()
	testhandler.Register(reg, processor.Kind("stripe"), "invoice.paid")
	if c := Clash(reg, paid); !strings.Contains(c, "testhandler.Record") {
		t.Fatalf("clash = %q", c)
	}
	if c := Clash(reg, Spec{Name: "x", Kind: "github", Type: "push"}); c != "" {
		t.Fatalf("clash on a free route = %q", c)
	}
}

// TestGeneratedHandlerBuildsAndPasses runs the generator into a copy of
// the module, as a user would (`webhookdev new handler paidinvoices
// --kind stripe --type invoice.paid`, README's first handler), then
// builds what links the handlers, vets the package and runs its test:
// the handler, run as the processor's role after the migration function's
// roles and grants, records the sample event with no grant but its Schema's.
func TestGeneratedHandlerBuildsAndPasses(t *testing.T) {
	tier.Heavy(t, "copies the module, builds it and runs the generated package's test")
	t.Parallel()
	root := copyModule(t)
	if _, err := Write(root, paid); err != nil {
		t.Fatal(err)
	}
	// -trimpath keeps the build cache's entries valid for the copy: without
	// it the packages' directory is part of their key, and everything would
	// compile again.
	gocmd(t, root, "build", "-trimpath", "./shared/...", "./functions/...", "./cmd/...")
	gocmd(t, root, "vet", "./shared/handlers/...")
	out := gocmd(t, root, "test", "-trimpath", "-count=1", "-v", "./shared/handlers/paidinvoices/")
	for _, test := range []string{"TestRecordsTheEvent", "TestRunsOnce", "TestNotDecodableIsDeadLettered"} {
		if !strings.Contains(out, "--- PASS: "+test) {
			t.Errorf("%s did not pass:\n%s", test, out)
		}
	}
}

// EnvSuiteInCopy runs TestGeneratedHandlerLeavesTheSuiteGreen (make test
// sets it for a step of its own, after the main run, so that the nested
// run does not compete with it for the machine).
const EnvSuiteInCopy = "WEBHOOK_INBOX_SUITE_IN_COPY"

// TestGeneratedHandlerLeavesTheSuiteGreen: a user's first handler package,
// generated into a copy of the module (a table with an identity column,
// registered in local.go), leaves every test that could see it green: the
// tests of every package whose test binary links shared/handlers (go list
// -test -deps), the heavy tier included, which migrate it into every test
// database, compile it into the Lambda binaries under the emulator and
// route through it. This package is left out: it would run itself.
func TestGeneratedHandlerLeavesTheSuiteGreen(t *testing.T) {
	tier.Heavy(t, "runs the tests of every package that links the handlers, in a copy of the module with a generated handler")
	if os.Getenv(EnvSuiteInCopy) != "1" {
		t.Skip(EnvSuiteInCopy + "=1 runs it (make test does, in a step of its own)")
	}
	root := copyModule(t, "docs")
	if _, err := Write(root, paid); err != nil {
		t.Fatal(err)
	}
	// Where the route is already served (by the example stripedunning, as
	// the repository ships), the user does what the generator says:
	// removes that package's registration from local.go, keeping its code
	// and its tables.
	reg := processor.NewRegistry()
	handlers.Register(reg)
	if h, ok := reg.Lookup("", paid.Kind, paid.Type); ok && Clash(reg, paid) != "" {
		fn := runtime.FuncForPC(reflect.ValueOf(h).Pointer()).Name() // .../shared/handlers/stripedunning.handlePaid
		pkg := path.Base(fn[:strings.LastIndex(fn, ".")])
		local := filepath.Join(root, LocalFile)
		b, err := os.ReadFile(local)
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for line := range strings.Lines(string(b)) {
			if !strings.Contains(line, pkg+".Register(") {
				kept = append(kept, line)
			}
		}
		if len(kept) == strings.Count(string(b), "\n") {
			t.Fatalf("%s serves %s %s, and no line of %s registers it", fn, paid.Kind, paid.Type, LocalFile)
		}
		if err := os.WriteFile(local, []byte(strings.Join(kept, "")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	list := gocmd(t, root, "list", "-test", "-f", "{{if .ForTest}}{{.ForTest}} {{join .Deps \" \"}}{{end}}", "./...")
	const handlersPkg = "github.com/webhook-inbox/webhook-inbox/shared/handlers"
	self := "github.com/webhook-inbox/webhook-inbox/internal/scaffold"
	var pkgs []string
	for line := range strings.Lines(list) {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] != self && slices.Contains(f[1:], handlersPkg) && !slices.Contains(pkgs, f[0]) {
			pkgs = append(pkgs, f[0])
		}
	}
	if !slices.Contains(pkgs, "github.com/webhook-inbox/webhook-inbox/shared/dbschema") || !slices.Contains(pkgs, "github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal") {
		t.Fatalf("the packages linking the handlers miss dbschema or lambdalocal: %v", pkgs)
	}
	out := gocmd(t, root, append([]string{"test", "-trimpath", "-count=1", "-timeout", "20m"}, pkgs...)...)
	t.Logf("%d packages green with the generated handler:\n%s", len(pkgs), out)
}

// copyModule copies the module's source (no .git, no local data, not the
// bench module) into a temporary directory.
func copyModule(t *testing.T, keep ...string) string {
	t.Helper()
	root := t.TempDir()
	src, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	skip := map[string]bool{".git": true, ".local": true, "bench": true, "docs": true, "node_modules": true}
	for _, k := range keep {
		delete(skip, k)
	}
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() && skip[rel] {
			return filepath.SkipDir
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		copyFile(t, p, filepath.Join(root, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func gocmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
