// Package scaffold writes a new handler package into the module, the way
// `webhookdev new handler` does: the package (Register, Schema, a
// handler that decodes the event and records it in its own table), its
// goose migration, its test (run as the processor's database role, on a
// copy of dev/samples/<kind>.json) and its two registration lines in
// shared/handlers/local.go, added at that file's markers without touching
// its other lines. It writes nothing unless it can write everything, and
// never overwrites: an existing package is refused.
package scaffold

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// Module is the path of the module the packages are written into.
const Module = "github.com/webhook-inbox/webhook-inbox"

// LocalFile is the application's registration file, relative to the
// module's root, and its two markers: the generator's lines go just above
// them.
const (
	LocalFile          = "shared/handlers/local.go"
	RegistrationMarker = "webhookdev new handler: registrations above this line."
	SchemasMarker      = "webhookdev new handler: schemas above this line."
)

//go:embed templates/*.tmpl
var templates embed.FS

// Spec is the handler to write.
type Spec struct {
	// Name is the package's name, and the prefix of its SQL names (its
	// table is <Name>_events, its goose version table
	// <Name>_goose_db_version).
	Name string
	// Kind is the source kind whose payload the handler reads.
	Kind string
	// Source, when set, routes the handler to that one source by name
	// (processor.Source) instead of to every source of Kind.
	Source string
	// Type is the event type it serves.
	Type string
}

// namePattern: a lower-case Go package name that is also a plain SQL
// identifier. No underscore (Go's package naming), no upper case (Postgres
// folds it), and short enough that <name>_goose_db_version fits in
// Postgres's 63 bytes.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9]{0,39}$`)

// reserved are names a handler package may not take: the directories
// beside the handler packages, and the core schema's prefix.
var reserved = []string{"handlers", "internal", "testdata", "main", "local"}

// sourceNamePattern is the sources document's (shared/source).
var sourceNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Validate reports what is wrong with s, every problem at once.
func (s Spec) Validate() error {
	var errs []error
	switch {
	case !namePattern.MatchString(s.Name):
		errs = append(errs, fmt.Errorf("name %q: a handler's name is a Go package name and the prefix of its tables' names: "+
			"a lower-case letter, then lower-case letters and digits, at most 40 (paidinvoices, not paid_invoices or PaidInvoices)", s.Name))
	case token.IsKeyword(s.Name) || slices.Contains(reserved, s.Name) || strings.HasPrefix(s.Name, "webhook"):
		errs = append(errs, fmt.Errorf("name %q is taken (a Go keyword, a directory beside the handler packages, or or the core schema's prefix, webhook)", s.Name))
	}
	if _, ok := shapes[s.Kind]; !ok || !slices.Contains(source.Kinds(), s.Kind) {
		errs = append(errs, fmt.Errorf("kind %q: not a source kind (%s)", s.Kind, strings.Join(source.Kinds(), ", ")))
	}
	if s.Source != "" && !sourceNamePattern.MatchString(s.Source) {
		errs = append(errs, fmt.Errorf("source %q: not a source name (lower-case letters, digits, - and _)", s.Source))
	}
	switch {
	case s.Type == "":
		errs = append(errs, errors.New("no event type: --type says which events the handler serves (invoice.paid, or * for every type)"))
	case len(s.Type) > 200 || strings.ContainsFunc(s.Type, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '"' || r == '\\' || r == '`' }):
		errs = append(errs, fmt.Errorf("type %q: not an event type (at most 200 characters, no quotes, backslashes or control characters)", s.Type))
	}
	return errors.Join(errs...)
}

// Result is what Write did.
type Result struct {
	// Dir is the package's directory, relative to the root.
	Dir string
	// Files are the files written, relative to the root, local.go last.
	Files []string
}

// data is what the templates see.
type data struct {
	Spec
	Table, TestSource, MatchGo, MatchDoc, MatchExample, SampleSubject string
	// SampleFile is the kind's sample in dev/samples, SampleName its copy
	// in the package's testdata.
	SampleFile, SampleName string
	Shape                  shape
	Imports                []string
}

// Write writes the handler package described by s into the module at
// root and registers it in local.go. It refuses, writing nothing, a spec
// that does not validate, a package that exists, and a local.go without
// its markers.
func Write(root string, s Spec) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	dir := filepath.Join("shared", "handlers", s.Name)
	if _, err := os.Lstat(filepath.Join(root, dir)); err == nil {
		return Result{}, fmt.Errorf("%s exists: a new handler never overwrites one (choose another name, or remove it first)", dir)
	} else if !errors.Is(err, os.ErrNotExist) {
		return Result{}, err
	}
	sh := shapes[s.Kind]
	sampleFile := SampleFile(s.Kind)
	sampleName := "event" + filepath.Ext(sampleFile)
	sample, err := os.ReadFile(filepath.Join(root, "dev", "samples", sampleFile))
	if err != nil {
		return Result{}, fmt.Errorf("the %s sample event, for the test: %w", s.Kind, err)
	}
	subject, err := sampleSubject(sh, sample)
	if err != nil {
		return Result{}, fmt.Errorf("dev/samples/%s: %w", sampleFile, err)
	}
	d := data{
		Spec: s, Table: s.Name + "_events", Shape: sh, Imports: sh.Imports, SampleSubject: subject,
		SampleFile: sampleFile, SampleName: sampleName,
		TestSource: s.Kind, MatchGo: fmt.Sprintf("processor.Kind(%q)", s.Kind), MatchDoc: "every " + s.Kind + " source",
	}
	d.MatchExample = "usually " + d.MatchGo
	if s.Source != "" {
		d.TestSource, d.MatchGo, d.MatchDoc = s.Source, fmt.Sprintf("processor.Source(%q)", s.Source), "the source "+s.Source
		d.MatchExample = "usually " + d.MatchGo + ` (a source of kind ` + s.Kind + `)`
	}

	files := []struct {
		path, tmpl string
		raw        []byte
	}{
		{path: filepath.Join(dir, s.Name+".go"), tmpl: "handler.go.tmpl"},
		{path: filepath.Join(dir, s.Name+"_test.go"), tmpl: "handler_test.go.tmpl"},
		{path: filepath.Join(dir, "migrations", "00001_"+d.Table+".sql"), tmpl: "migration.sql.tmpl"},
		{path: filepath.Join(dir, "testdata", sampleName), raw: sample},
	}
	for i, f := range files {
		if f.raw != nil {
			continue
		}
		b, err := render(f.tmpl, d)
		if err != nil {
			return Result{}, err
		}
		files[i].raw = b
	}
	localPath := filepath.Join(root, LocalFile)
	local, err := os.ReadFile(localPath)
	if err != nil {
		return Result{}, fmt.Errorf("the registration file: %w", err)
	}
	newLocal, err := Register(local, s.Name, d.MatchGo)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", LocalFile, err)
	}

	// Everything is ready: write it, and take the package back out if a
	// write fails, so that no half package is left to compile.
	res := Result{Dir: dir}
	fail := func(err error) (Result, error) {
		_ = os.RemoveAll(filepath.Join(root, dir))
		return Result{}, err
	}
	for _, f := range files {
		p := filepath.Join(root, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(p, f.raw, 0o644); err != nil {
			return fail(err)
		}
		res.Files = append(res.Files, f.path)
	}
	if err := os.WriteFile(localPath, newLocal, 0o644); err != nil {
		return fail(err)
	}
	res.Files = append(res.Files, LocalFile)
	return res, nil
}

// render executes a template and formats Go output with gofmt's rules.
func render(name string, d data) ([]byte, error) {
	t, err := template.ParseFS(templates, "templates/"+name)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	if !strings.HasSuffix(name, ".go.tmpl") {
		return buf.Bytes(), nil
	}
	out, err := format.Source(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("template %s: the Go it gives does not parse: %w", name, err)
	}
	return out, nil
}

// Register returns the registration file src with handler package name
// registered: its import, `name.Register(r, match)` above the
// registrations marker and `name.Schema,` above the schemas marker. Only
// those three lines are added; every other line stays as it was. A file
// without a marker, or that already imports the package, is an error
// saying what to add by hand.
func Register(src []byte, name, match string) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, LocalFile, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("does not parse: %w", err)
	}
	importPath := Module + "/shared/handlers/" + name
	byHand := fmt.Sprintf("add by hand: the import %q, %s.Register(r, %s) in register and %s.Schema in schemas", importPath, name, match, name)
	var importAt token.Pos
	for _, imp := range f.Imports {
		if imp.Path.Value == fmt.Sprintf("%q", importPath) {
			return nil, fmt.Errorf("already imports %s", importPath)
		}
	}
	for _, decl := range f.Decls {
		if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.IMPORT && g.Lparen.IsValid() {
			importAt = g.Rparen
			break
		}
	}
	if !importAt.IsValid() {
		return nil, errors.New("no parenthesised import block: " + byHand)
	}
	marker := func(text string) (int, error) {
		var found []int
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if strings.TrimSpace(strings.TrimPrefix(c.Text, "//")) == text {
					found = append(found, fset.Position(c.Slash).Offset)
				}
			}
		}
		if len(found) != 1 {
			return 0, fmt.Errorf("the marker %q is not there once (%d found): %s", "// "+text, len(found), byHand)
		}
		// The line's start: the new line goes above the marker's.
		return bytes.LastIndexByte(src[:found[0]], '\n') + 1, nil
	}
	regAt, err := marker(RegistrationMarker)
	if err != nil {
		return nil, err
	}
	tabAt, err := marker(SchemasMarker)
	if err != nil {
		return nil, err
	}
	inserts := []struct {
		at   int
		text string
	}{
		{fset.Position(importAt).Offset, fmt.Sprintf("\t%q\n", importPath)},
		{regAt, fmt.Sprintf("\t%s.Register(r, %s)\n", name, match)},
		{tabAt, fmt.Sprintf("\t%s.Schema,\n", name)},
	}
	slices.SortFunc(inserts, func(a, b struct {
		at   int
		text string
	}) int {
		return b.at - a.at // from the end, so earlier offsets stay valid
	})
	out := slices.Clone(src)
	for _, in := range inserts {
		out = slices.Insert(out, in.at, []byte(in.text)...)
	}
	formatted, err := format.Source(out)
	if err != nil {
		return nil, fmt.Errorf("with the new lines it does not parse (%w): %s", err, byHand)
	}
	return formatted, nil
}

// jsonPath returns the string (or number) at a dotted path of keys in a
// JSON document.
// sampleSubject reads the subject of a kind's sample: a form's parameter,
// or the value at a JSON path.
func sampleSubject(sh shape, sample []byte) (string, error) {
	if !sh.Form {
		return jsonPath(sample, sh.SubjectPath)
	}
	form, err := url.ParseQuery(strings.TrimSpace(string(sample)))
	if err != nil || form.Get(sh.SubjectPath) == "" {
		return "", fmt.Errorf("no %s parameter (%v)", sh.SubjectPath, err)
	}
	return form.Get(sh.SubjectPath), nil
}

// jsonPath reads the value at a dotted path; a key of digits indexes an
// array.
func jsonPath(doc []byte, path string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return "", fmt.Errorf("no %s", path)
			}
			v = x[i]
		default:
			return "", fmt.Errorf("no %s", path)
		}
	}
	switch x := v.(type) {
	case string:
		if x != "" {
			return x, nil
		}
	case json.Number:
		return x.String(), nil
	}
	return "", fmt.Errorf("no %s", path)
}

// Clash says which registered handler already serves the new handler's
// route, or would be shadowed by it, or "" when none does: reg holds the
// handlers registered now (handlers.Register). Registering a second
// handler for one route fails at start-up; the generator warns first.
func Clash(reg *processor.Registry, s Spec) string {
	src := s.Source
	h, ok := reg.Lookup(src, s.Kind, s.Type)
	if !ok {
		return ""
	}
	who := "a registered handler"
	if v := reflect.ValueOf(h); v.Kind() == reflect.Func {
		if fn := runtime.FuncForPC(v.Pointer()); fn != nil {
			who = fn.Name()
		}
	}
	route := fmt.Sprintf("%s events of type %s", s.Kind, s.Type)
	if src != "" {
		route = fmt.Sprintf("source %s's events of type %s", src, s.Type)
	}
	return fmt.Sprintf("%s are already served by %s: remove its registration from %s, or the two clash", route, who, LocalFile)
}

var modulePattern = regexp.MustCompile(`(?m)^module\s+` + regexp.QuoteMeta(Module) + `\s*$`)

// FindRoot returns the root of the module (the directory of its go.mod)
// that holds dir.
func FindRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			if modulePattern.Match(b) {
				return d, nil
			}
			return "", fmt.Errorf("%s is not webhook-inbox's go.mod: run webhookdev in the repository", filepath.Join(d, "go.mod"))
		}
		if filepath.Dir(d) == d {
			return "", errors.New("not in webhook-inbox's repository (no go.mod above " + dir + ")")
		}
	}
}
