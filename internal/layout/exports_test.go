package layout_test

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/types/typeutil"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
)

// exportAllowlist names the exports of shared/ that tooling alone uses and
// that stay exported all the same, each with its reason. What belongs here
// is what a user of the code sets that no product file happens to: a
// dependency the style demands be injectable, or an API for the users who
// write handlers or send deliveries. A hook for a test does not.
var exportAllowlist = map[string]string{
	// The clocks the style demands be injectable (a test moves time
	// instead of sleeping), and the processor's jitter with them, so that
	// a backoff is checked exactly rather than within bounds.
	"shared/processor.Deps.Clock": "an injectable clock",
	"shared/receiver.Deps.Clock":  "an injectable clock",
	"shared/relay.Deps.Clock":     "an injectable clock",
	"shared/processor.Deps.Rand":  "an injectable source of randomness, like the clock",
	// The handler-author API (docs/processor.md): the example handlers
	// register with HandleFunc and source routes, a user's may not.
	"shared/processor.Registry.Handle":   "handler-author API (a Handler value rather than a func)",
	"shared/processor.Registry.Fallback": "handler-author API (the route of last resort)",
	// A kind's signer and sample maker live beside its verifier, in its
	// one file, so that what signs is what verifies (CONTRIBUTING: Adding
	// a provider kind); the senders are webhookdev send, make dev's
	// samples and the tests, which act as the providers do.
	"shared/source.Source.Sign":   "a kind's signer, beside its verifier (one kind in one file)",
	"shared/source.Source.Sample": "a kind's sample events, beside its verifier (one kind in one file)",
}

// applicationCode is the part of shared/ that is the application's, not
// webhook-inbox's: the handler packages (shared/handlers/...), which a user
// writes and whose exports (a table's reader for its tests, its status
// values) are theirs to shape. The rule holds the framework's packages.
const applicationCode = "shared/handlers"

// TestSharedExportsServeTheProduct fails when a shared/ package exports
// something that only tests, the bench or the development tooling use: a
// hook the Lambdas' code carries for its tests. Product code is what the
// Lambdas and webhookctl link, test files excluded; tooling is every test
// file, the bench module, webhookdev and the internal/ packages the product
// does not link.
func TestSharedExportsServeTheProduct(t *testing.T) {
	tier.Heavy(t, "loads the whole module, bench and tests included, with types")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	r := checkExports(t, shape{
		root:    root,
		module:  module,
		product: []string{"functions/...", "cmd/webhookctl"},
		bench:   "bench",
		exempt:  []string{applicationCode},
	})
	var bad []string
	for _, f := range r.bad {
		if _, ok := exportAllowlist[f.name]; ok {
			continue
		}
		bad = append(bad, f.String())
	}
	for name := range exportAllowlist {
		if !r.declared[name] {
			t.Errorf("exportAllowlist names %s, which shared/ no longer declares", name)
		}
	}
	for _, u := range r.unused {
		t.Logf("exported but used by nobody: %s", u)
	}
	if len(bad) > 0 {
		t.Errorf("%d exports of shared/ serve only tests, the bench or development tooling; "+
			"unexport them, move them to internal/testkit, or have the test use what a user uses:\n\t%s",
			len(bad), strings.Join(bad, "\n\t"))
	}
}

// TestTheExportCheckFindsHooks runs the check on testdata/hooked, a module
// made for it: its shared/thing exports a hook of each kind (a func only a
// test calls, a field only a test sets, a method only a tool calls) beside
// exports the product uses in ways easy to miss (a field it sets, one value
// of a constant block, a method fmt calls). Its package defaults the test's
// fields, which must not pass for the product setting them, and one field
// the product does set through its environment reader. A check that
// stopped reading test files, tools, assignments or interfaces, or that
// took a default for a setting, would pass the repository's test silently;
// it fails this one.
func TestTheExportCheckFindsHooks(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("testdata", "hooked"))
	if err != nil {
		t.Fatal(err)
	}
	r := checkExports(t, shape{root: root, module: "example.com/hooked", product: []string{"functions/..."}})

	// Each hook, with the files the report must name as its users.
	want := map[string]string{
		"shared/thing.ResetForTest": "shared/thing/thing_test.go",
		"shared/thing.Config.After": "shared/thing/thing_test.go", // if == nil, defaulted
		"shared/thing.Config.Limit": "shared/thing/thing_test.go", // if <= 0 ||, defaulted
		"shared/thing.Config.Label": "shared/thing/thing_test.go", // cmp.Or, defaulted
		"shared/thing.Thing.Dump":   "internal/tool/main.go",
	}
	got := map[string]string{}
	for _, f := range r.bad {
		got[f.name] = strings.Join(f.users, ", ")
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		users, ok := got[name]
		switch {
		case !ok:
			t.Errorf("missing: %s, used only by %s, is not reported", name, want[name])
		case users != want[name]:
			t.Errorf("%s is reported as used by %s, want %s", name, users, want[name])
		}
	}
	for _, f := range r.bad {
		if _, ok := want[f.name]; !ok {
			t.Errorf("extra: %s is reported, and is no hook", f)
		}
	}
	for _, f := range r.unused {
		t.Errorf("extra: %s is reported as used by nobody", f)
	}
	// Not reported proves nothing of an export the check never read.
	for _, name := range []string{
		"shared/thing.New",          // called by the product
		"shared/thing.Thing.Wait",   // called by the product, and by the test
		"shared/thing.Config.Name",  // set by the product
		"shared/thing.Config.Mode",  // set by the product
		"shared/thing.Config.Batch", // set by ConfigFromEnv, and defaulted
		"shared/thing.ModeFast",     // named by the product
		"shared/thing.ModeSafe",     // of ModeFast's block, named only by the test
		"shared/thing.ModeOff",      // of ModeFast's block, named by nobody
		"shared/thing.Thing.String", // fmt.Stringer, called by nobody by name
	} {
		if !r.declared[name] {
			t.Errorf("missing: %s is not among the exports the check read", name)
		}
	}
}

// shape is what the check needs to know of a module: the rest it reads.
type shape struct {
	root   string // the module's directory
	module string // its module path
	// product is the main packages the product ships, relative to module;
	// "dir/..." is every package under dir.
	product []string
	// bench is the directory, relative to root, of a module of its own
	// whose every file is tooling; "" for none.
	bench string
	// exempt is the packages of shared/, relative to module, outside the
	// rule, each with the packages under it.
	exempt []string
}

func (s shape) isProduct(path string) bool {
	rel, ok := strings.CutPrefix(path, s.module+"/")
	if !ok {
		return false
	}
	for _, p := range s.product {
		if dir, ok := strings.CutSuffix(p, "/..."); ok {
			if strings.HasPrefix(rel, dir+"/") {
				return true
			}
		} else if rel == p {
			return true
		}
	}
	return false
}

// ruled says whether the rule holds path: a package of shared/ outside
// the exemptions.
func (s shape) ruled(path string) bool {
	rel, ok := strings.CutPrefix(path, s.module+"/")
	if !ok || !strings.HasPrefix(rel, "shared/") {
		return false
	}
	return !slices.ContainsFunc(s.exempt, func(e string) bool {
		return rel == e || strings.HasPrefix(rel, e+"/")
	})
}

// finding is one export of shared/ that the product does not use.
type finding struct {
	name  string   // shared/pkg.Name, shared/pkg.Type.Method or shared/pkg.Type.Field
	at    string   // file:line, relative to the module root
	users []string // the tooling files that use it, sorted; none if nobody does
}

func (f finding) String() string {
	if len(f.users) == 0 {
		return fmt.Sprintf("%s (declared at %s)", f.name, f.at)
	}
	files := f.users
	if len(files) > 3 {
		files = append(slices.Clip(files[:3]), fmt.Sprintf("and %d more", len(files)-3))
	}
	return fmt.Sprintf("%s (declared at %s) used only by: %s", f.name, f.at, strings.Join(files, ", "))
}

// exportReport is what checkExports finds, in declaration order.
type exportReport struct {
	declared map[string]bool // every export the rule holds, by finding name
	bad      []finding       // used by tooling alone
	unused   []finding       // used by nobody
}

// checkExports loads the module at s.root with its tests (and the bench
// module, if any) and reports the exports of its ruled shared/ packages
// that what s.product links does not use.
func checkExports(t *testing.T, s shape) exportReport {
	t.Helper()
	x := newExports(s.root, s.module)
	mainPkgs := x.load(t, s.root, true, "./...")
	var benchPkgs []*packages.Package
	if s.bench != "" {
		benchPkgs = x.load(t, filepath.Join(s.root, s.bench), false, ".")
	}

	// The product is what its main packages link, through the module's
	// own packages (every one of them is a root of the load).
	byID := map[string]*packages.Package{}
	for _, p := range mainPkgs {
		byID[p.ID] = p
	}
	product := map[string]bool{}
	var link func(id string)
	link = func(id string) {
		p, ok := byID[id]
		if !ok || product[id] {
			return
		}
		product[id] = true
		for _, imp := range p.Imports {
			link(imp.ID)
		}
	}
	for _, p := range mainPkgs {
		// A package's test main (pkg.test) has an ID equal to its path too.
		if p.ID == p.PkgPath && !strings.HasSuffix(p.ID, ".test") && s.isProduct(p.PkgPath) {
			link(p.ID)
		}
	}

	for _, p := range mainPkgs {
		if p.ID == p.PkgPath && product[p.ID] {
			x.interfaces(p.Types, product)
			if s.ruled(p.PkgPath) {
				x.declare(p)
			}
		}
	}
	for _, p := range mainPkgs {
		switch {
		case strings.HasSuffix(p.ID, ".test"):
			// The generated test main: nothing of anyone's.
		case p.ID == p.PkgPath && product[p.ID]:
			x.scan(p, func(string) fileKind { return productFile })
		case p.ID == p.PkgPath:
			x.scan(p, func(string) fileKind { return toolingFile })
		default:
			// A test variant: its non-test files are the plain package's,
			// already read; only its test files are new.
			x.scan(p, func(file string) fileKind {
				if strings.HasSuffix(file, "_test.go") {
					return toolingFile
				}
				return skippedFile
			})
		}
	}
	for _, p := range benchPkgs {
		x.scan(p, func(string) fileKind { return toolingFile })
	}

	r := exportReport{declared: map[string]bool{}}
	for _, key := range x.order {
		d := x.decls[key]
		r.declared[d.name] = true
		if d.used || x.productUse[key] != "" || x.implements(d) || x.enumUsed(d) {
			continue
		}
		f := finding{name: d.name, at: d.at, users: slices.Sorted(maps.Keys(x.toolingUse[key]))}
		if len(f.users) == 0 {
			r.unused = append(r.unused, f)
		} else {
			r.bad = append(r.bad, f)
		}
	}
	return r
}

// fileKind is what a file's references count as.
type fileKind int

const (
	productFile fileKind = iota
	toolingFile
	skippedFile // read already, in another variant of its package
)

// decl is one exported identifier of a shared/ package.
type decl struct {
	name string // shared/pkg.Name, shared/pkg.Type.Method or shared/pkg.Type.Field
	at   string // file:line, relative to the module root
	// method, for a method: its name and signature, to match interfaces.
	method *types.Func
	// used is set for what counts as used whoever refers to it: a field
	// with a struct tag (read by reflection).
	used bool
	// block, for a constant of a parenthesized block, is the keys of the
	// block's exported constants.
	block *[]string
}

type exports struct {
	root   string
	module string
	fset   *token.FileSet
	decls  map[string]*decl
	order  []string
	// fields maps a struct field, in any load, to its key: a field's
	// object does not say which type holds it.
	fields     map[*types.Var]string
	productUse map[string]string
	toolingUse map[string]map[string]bool
	// ifaces holds every interface method as "Name(params)results", and
	// seen the packages whose interfaces are already in.
	ifaces map[string]bool
	seen   map[*types.Package]bool
}

func newExports(root, module string) *exports {
	x := &exports{
		root:       root,
		module:     module,
		fset:       token.NewFileSet(),
		decls:      map[string]*decl{},
		fields:     map[*types.Var]string{},
		productUse: map[string]string{},
		toolingUse: map[string]map[string]bool{},
		ifaces: map[string]bool{
			// The errors package's protocols, declared as anonymous
			// interfaces inside its functions.
			"Unwrap()error": true, "Unwrap()[]error": true, "Is(error)bool": true, "As(any)bool": true,
		},
		seen: map[*types.Package]bool{},
	}
	return x
}

func (x *exports) load(t *testing.T, dir string, tests bool, patterns ...string) []*packages.Package {
	t.Helper()
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedImports | packages.NeedTypes |
			packages.NeedTypesInfo | packages.NeedSyntax,
		Dir:   dir,
		Tests: tests,
		Fset:  x.fset,
		Env:   os.Environ(),
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		t.Fatalf("load %v in %s: %v", patterns, dir, err)
	}
	var errs []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
	})
	if len(errs) > 0 {
		t.Fatalf("load %v in %s:\n%s", patterns, dir, strings.Join(errs, "\n"))
	}
	for _, p := range pkgs {
		x.indexFields(p.Types)
	}
	return pkgs
}

// indexFields records the fields of every named struct type of pkg and of
// what it imports, under the key of their type.
func (x *exports) indexFields(pkg *types.Package) {
	if pkg == nil || x.seen[pkg] {
		return
	}
	x.seen[pkg] = true
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok {
			continue
		}
		if s, ok := tn.Type().Underlying().(*types.Struct); ok {
			for i := range s.NumFields() {
				f := s.Field(i)
				x.fields[f] = pkg.Path() + "." + name + "." + f.Name()
			}
		}
	}
	for _, imp := range pkg.Imports() {
		x.indexFields(imp)
	}
}

// interfaces records the methods of every interface type declared at the
// top of pkg and of what it imports, the standard library included; an
// interface of the module's tooling (a package product does not name) makes
// nothing of shared/ used.
func (x *exports) interfaces(pkg *types.Package, product map[string]bool) {
	done := map[*types.Package]bool{}
	var walk func(p *types.Package)
	walk = func(p *types.Package) {
		if p == nil || done[p] {
			return
		}
		done[p] = true
		if (p.Path() == x.module || strings.HasPrefix(p.Path(), x.module+"/")) && !product[p.Path()] {
			return
		}
		scope := p.Scope()
		for _, name := range scope.Names() {
			tn, ok := scope.Lookup(name).(*types.TypeName)
			if !ok {
				continue
			}
			if it, ok := tn.Type().Underlying().(*types.Interface); ok {
				for i := range it.NumMethods() {
					x.ifaces[methodSig(it.Method(i))] = true
				}
			}
		}
		for _, imp := range p.Imports() {
			walk(imp)
		}
	}
	walk(pkg)
}

// methodSig spells a method's name and signature without its receiver and
// parameter names, qualified by package path, so that the same method
// matches across the loads' separate type universes.
func methodSig(f *types.Func) string {
	sig := f.Signature()
	q := func(p *types.Package) string { return p.Path() }
	tuple := func(tu *types.Tuple, variadic bool) string {
		var parts []string
		for i := range tu.Len() {
			typ := tu.At(i).Type()
			if variadic && i == tu.Len()-1 {
				parts = append(parts, "..."+types.TypeString(typ.(*types.Slice).Elem(), q))
				continue
			}
			parts = append(parts, types.TypeString(typ, q))
		}
		return strings.Join(parts, ",")
	}
	s := f.Name() + "(" + tuple(sig.Params(), sig.Variadic()) + ")" + tuple(sig.Results(), false)
	return strings.ReplaceAll(s, "interface{}", "any")
}

func (x *exports) enumUsed(d *decl) bool {
	if d.block == nil {
		return false
	}
	return slices.ContainsFunc(*d.block, func(k string) bool { return x.productUse[k] != "" })
}

func (x *exports) implements(d *decl) bool {
	return d.method != nil && x.ifaces[methodSig(d.method)]
}

func (x *exports) rel(pos token.Pos) string {
	p := x.fset.Position(pos)
	name, err := filepath.Rel(x.root, p.Filename)
	if err != nil {
		name = p.Filename
	}
	return fmt.Sprintf("%s:%d", name, p.Line)
}

func (x *exports) add(key string, obj types.Object, d *decl) {
	if _, dup := x.decls[key]; dup {
		return
	}
	if d.block != nil {
		*d.block = append(*d.block, key)
	}
	d.name = strings.TrimPrefix(key, x.module+"/")
	d.at = x.rel(obj.Pos())
	x.decls[key] = d
	x.order = append(x.order, key)
}

// declare records the exported identifiers of p's hand-written, non-test
// files: package-level names, the exported methods of its types and the
// exported fields of its struct types.
func (x *exports) declare(p *packages.Package) {
	for _, f := range p.Syntax {
		if ast.IsGenerated(f) {
			continue
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				obj, _ := p.TypesInfo.Defs[d.Name].(*types.Func)
				if obj == nil || !obj.Exported() {
					continue
				}
				if key := objKey(obj); key != "" {
					dd := &decl{}
					if d.Recv != nil {
						dd.method = obj
					}
					x.add(key, obj, dd)
				}
			case *ast.GenDecl:
				// The constants of one parenthesized block are one
				// enumeration (the states, outcomes, kinds a column holds):
				// a value the product reads back from the database without
				// naming it is still one of the set.
				var block *[]string
				if d.Tok == token.CONST && d.Lparen.IsValid() {
					block = &[]string{}
				}
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if obj := p.TypesInfo.Defs[n]; obj != nil && obj.Exported() {
								x.add(objKey(obj), obj, &decl{block: block})
							}
						}
					case *ast.TypeSpec:
						obj := p.TypesInfo.Defs[s.Name]
						if obj == nil {
							continue
						}
						if obj.Exported() {
							x.add(objKey(obj), obj, &decl{})
						}
						st, ok := obj.Type().Underlying().(*types.Struct)
						if !ok {
							continue
						}
						for i := range st.NumFields() {
							fv := st.Field(i)
							if !fv.Exported() {
								continue
							}
							x.add(x.fields[fv], fv, &decl{used: st.Tag(i) != ""})
						}
					}
				}
			}
		}
	}
}

// objKey names a package-level object or a method; "" for anything else.
func objKey(obj types.Object) string {
	if obj.Pkg() == nil {
		return ""
	}
	if f, ok := obj.(*types.Func); ok {
		f = f.Origin()
		if recv := f.Signature().Recv(); recv != nil {
			t := recv.Type()
			if p, ok := t.(*types.Pointer); ok {
				t = p.Elem()
			}
			if n, ok := t.(*types.Named); ok {
				return f.Pkg().Path() + "." + n.Origin().Obj().Name() + "." + f.Name()
			}
			return ""
		}
	}
	if obj.Parent() != obj.Pkg().Scope() {
		return ""
	}
	return obj.Pkg().Path() + "." + obj.Name()
}

// scan records what p's files refer to in shared/, as product or tooling
// uses as kind says of each file.
func (x *exports) scan(p *packages.Package, kind func(file string) fileKind) {
	for _, f := range p.Syntax {
		file := x.fset.Position(f.Pos()).Filename
		k := kind(file)
		if k == skippedFile {
			continue
		}
		prod := k == productFile
		rel, err := filepath.Rel(x.root, file)
		if err != nil {
			rel = file
		}
		use := func(key string) {
			if key == "" {
				return
			}
			if _, ok := x.decls[key]; !ok {
				return
			}
			if prod {
				if x.productUse[key] == "" {
					x.productUse[key] = rel
				}
				return
			}
			if x.toolingUse[key] == nil {
				x.toolingUse[key] = map[string]bool{}
			}
			x.toolingUse[key][rel] = true
		}
		field := func(v *types.Var, set bool) {
			key := x.fields[v.Origin()]
			if key == "" {
				return
			}
			// A field read inside its own package by product code does not
			// make it a user's: only setting it, or reading it from outside,
			// does.
			if prod && !set && v.Pkg() != nil && v.Pkg().Path() == p.PkgPath {
				return
			}
			use(key)
		}
		// Composite-literal keys and assignment targets set a field; the
		// walk meets them before the identifiers under them. A target that
		// only defaults its field is in defaulted: such a write counts as
		// a read, so inside the field's own package it is not a product
		// use (a test hook its package falls back from is still a hook).
		set := map[*ast.Ident]bool{}
		defaulted := map[*ast.Ident]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				obj := p.TypesInfo.Uses[n]
				if obj == nil {
					return true
				}
				if v, ok := obj.(*types.Var); ok && v.IsField() {
					field(v, set[n] && !defaulted[n])
				} else {
					use(objKey(obj))
				}
			case *ast.SelectorExpr:
				// A promoted field or method reads every embedded field on
				// its way.
				s := p.TypesInfo.Selections[n]
				if s == nil {
					return true
				}
				t := s.Recv()
				for _, i := range s.Index()[:len(s.Index())-1] {
					if ptr, ok := t.Underlying().(*types.Pointer); ok {
						t = ptr.Elem()
					}
					st, ok := t.Underlying().(*types.Struct)
					if !ok {
						break
					}
					field(st.Field(i), false)
					t = st.Field(i).Type()
				}
			case *ast.CompositeLit:
				tv, ok := p.TypesInfo.Types[n]
				if !ok {
					return true
				}
				t := tv.Type.Underlying()
				if ptr, isPtr := t.(*types.Pointer); isPtr {
					t = ptr.Elem().Underlying()
				}
				st, ok := t.(*types.Struct)
				if !ok {
					return true
				}
				for i, e := range n.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						if id, ok := kv.Key.(*ast.Ident); ok {
							set[id] = true
						}
					} else if i < st.NumFields() {
						field(st.Field(i), true)
					}
				}
			case *ast.IfStmt:
				// if c.F == nil { c.F = fallback }: the body's writes to a
				// field the condition finds zero.
				zero := zeroTested(p.TypesInfo, n.Cond)
				for _, st := range n.Body.List {
					if as, ok := st.(*ast.AssignStmt); ok {
						for _, lhs := range as.Lhs {
							if s, ok := ast.Unparen(lhs).(*ast.SelectorExpr); ok && zero[types.ExprString(s)] {
								defaulted[s.Sel] = true
							}
						}
					}
				}
			case *ast.AssignStmt:
				for i, lhs := range n.Lhs {
					markSet(lhs, set)
					// c.F = cmp.Or(c.F, fallback): the user's value first.
					if len(n.Rhs) == len(n.Lhs) && orOf(p.TypesInfo, n.Rhs[i], lhs) {
						if s, ok := ast.Unparen(lhs).(*ast.SelectorExpr); ok {
							defaulted[s.Sel] = true
						}
					}
				}
			case *ast.IncDecStmt:
				markSet(n.X, set)
			case *ast.UnaryExpr:
				if n.Op == token.AND {
					markSet(n.X, set)
				}
			}
			return true
		})
	}
}

// markSet marks the field an assignment's target selects, if any.
func markSet(e ast.Expr, set map[*ast.Ident]bool) {
	for {
		switch v := e.(type) {
		case *ast.ParenExpr:
			e = v.X
			continue
		case *ast.SelectorExpr:
			set[v.Sel] = true
		case *ast.IndexExpr:
			e = v.X
			continue
		}
		return
	}
}

// zeroTested spells the field selectors that cond tests against their zero
// value (x.F == nil, == 0, == "", <= 0, len(x.F) == 0), alone or as one
// side of ||: the fields a write under it only defaults.
func zeroTested(info *types.Info, cond ast.Expr) map[string]bool {
	zero := map[string]bool{}
	isZero := func(e ast.Expr) bool {
		tv, ok := info.Types[e]
		if !ok {
			return false
		}
		if tv.IsNil() {
			return true
		}
		switch v := tv.Value; {
		case v == nil:
			return false
		case v.Kind() == constant.String:
			return constant.StringVal(v) == ""
		case v.Kind() == constant.Int || v.Kind() == constant.Float:
			return constant.Sign(v) == 0
		}
		return false
	}
	// field spells e if it selects a field, or len of one.
	field := func(e ast.Expr) (string, bool) {
		e = ast.Unparen(e)
		if call, ok := e.(*ast.CallExpr); ok && len(call.Args) == 1 {
			if b, ok := typeutil.Callee(info, call).(*types.Builtin); ok && b.Name() == "len" {
				e = ast.Unparen(call.Args[0])
			}
		}
		s, ok := e.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		if sel := info.Selections[s]; sel == nil || sel.Kind() != types.FieldVal {
			return "", false
		}
		return types.ExprString(s), true
	}
	var walk func(e ast.Expr)
	walk = func(e ast.Expr) {
		b, ok := ast.Unparen(e).(*ast.BinaryExpr)
		if !ok {
			return
		}
		switch b.Op {
		case token.LOR:
			walk(b.X)
			walk(b.Y)
		case token.EQL, token.LEQ:
			if name, ok := field(b.X); ok && isZero(b.Y) {
				zero[name] = true
			}
			if name, ok := field(b.Y); ok && isZero(b.X) && b.Op == token.EQL {
				zero[name] = true
			}
		}
	}
	walk(cond)
	return zero
}

// orOf says whether rhs is cmp.Or(lhs, ...): lhs kept unless it is zero.
func orOf(info *types.Info, rhs, lhs ast.Expr) bool {
	call, ok := ast.Unparen(rhs).(*ast.CallExpr)
	if !ok || len(call.Args) == 0 {
		return false
	}
	fn, ok := typeutil.Callee(info, call).(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Pkg().Path() != "cmp" || fn.Name() != "Or" {
		return false
	}
	return types.ExprString(ast.Unparen(call.Args[0])) == types.ExprString(ast.Unparen(lhs))
}
