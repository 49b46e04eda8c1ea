package processor_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// named is a handler that says who it is.
type named string

func (n named) Handle(context.Context, pgx.Tx, *processor.Event) error { return errors.New(string(n)) }

func who(h processor.Handler, ok bool) string {
	if !ok {
		return "none"
	}
	return h.Handle(context.Background(), nil, nil).Error()
}

func TestRegistryRoutesMostSpecificFirst(t *testing.T) {
	t.Parallel()
	r := processor.NewRegistry()
	r.Handle(processor.Source("billing"), "invoice.paid", named("source+type"))
	r.Handle(processor.Source("billing"), processor.AnyType, named("source"))
	r.Handle(processor.Kind("stripe"), "invoice.paid", named("kind+type"))
	r.Handle(processor.Kind("stripe"), processor.AnyType, named("kind"))

	for _, tc := range []struct{ source, kind, typ, want string }{
		{"billing", "stripe", "invoice.paid", "source+type"},
		{"billing", "stripe", "invoice.created", "source"},
		{"stripe", "stripe", "invoice.paid", "kind+type"},
		{"stripe", "stripe", "customer.created", "kind"},
		{"other", "standard", "invoice.paid", "none"},
		{"other", "", "invoice.paid", "none"}, // a source the processor does not know
	} {
		if got := who(r.Lookup(tc.source, tc.kind, tc.typ)); got != tc.want {
			t.Errorf("Lookup(%s, %s, %s) = %s, want %s", tc.source, tc.kind, tc.typ, got, tc.want)
		}
		// Resolve names the route Lookup took (its names match the handlers').
		rt, ok := r.Resolve(tc.source, tc.kind, tc.typ)
		name := map[string]string{
			"source billing, type invoice.paid": "source+type", "source billing, any type": "source",
			"kind stripe, type invoice.paid": "kind+type", "kind stripe, any type": "kind",
		}[rt.String()]
		if !ok {
			name = "none"
		}
		if name != tc.want {
			t.Errorf("Resolve(%s, %s, %s) = %s, want the route of %s", tc.source, tc.kind, tc.typ, rt, tc.want)
		}
	}
	r.Fallback(named("fallback"))
	if got := who(r.Lookup("other", "standard", "x")); got != "fallback" {
		t.Errorf("fallback: got %s", got)
	}
	// A kind named like a source does not match the source route.
	if got := who(r.Lookup("x", "billing", "invoice.paid")); got != "fallback" {
		t.Errorf("kind billing matched source billing: %s", got)
	}
}

// paidByExample and paidByUser stand for two handler packages' Register,
// both taking invoice.paid for every Stripe source.
func paidByExample(r *processor.Registry) {
	r.HandleFunc(processor.Kind("stripe"), "invoice.paid", func(context.Context, pgx.Tx, *processor.Event) error { return errors.New("example") })
}

func paidByUser(r *processor.Registry) {
	r.Handle(processor.Kind("stripe"), "invoice.paid", named("user"))
}

// A route registered twice is one line naming both registrations, with no
// panic; the route keeps its first handler, and nothing else is refused.
func TestRegistryDuplicateIsOneLineNamingBoth(t *testing.T) {
	t.Parallel()
	r := processor.NewRegistry()
	paidByExample(r)
	r.Handle(processor.Kind("stripe"), "invoice.created", named("created"))
	if err := r.Err(); err != nil {
		t.Fatalf("Err before any clash: %v", err)
	}
	paidByUser(r) // must not panic

	err := r.Err()
	if err == nil {
		t.Fatal("Err = nil after a duplicate route")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("not one line: %q", msg)
	}
	want := regexp.MustCompile(`^processor: route kind stripe, type invoice\.paid registered twice: ` +
		`by shared/processor_test\.paidByExample \(registry_test\.go:\d+\) and by shared/processor_test\.paidByUser \(registry_test\.go:\d+\)$`)
	if !want.MatchString(msg) {
		t.Errorf("Err = %q, want it to match %s", msg, want)
	}
	if got := who(r.Lookup("stripe", "stripe", "invoice.paid")); got != "example" {
		t.Errorf("the route's handler after the clash = %s, want the first (example)", got)
	}
	if got := who(r.Lookup("stripe", "stripe", "invoice.created")); got != "created" {
		t.Errorf("the other route = %s", got)
	}
}

func TestRegistryRefusesAmbiguity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string
		register   func(r *processor.Registry)
	}{
		{"empty match", "route with an empty match (by shared/processor_test.", func(r *processor.Registry) { r.Handle(processor.Match{}, "x", named("b")) }},
		{"empty type", "route source s with an empty event type", func(r *processor.Registry) { r.Handle(processor.Source("s"), "", named("b")) }},
		{"nil handler", "route source s, type x with a nil handler", func(r *processor.Registry) { r.Handle(processor.Source("s"), "x", nil) }},
		{"nil func", "route source s, type x with a nil handler", func(r *processor.Registry) { r.HandleFunc(processor.Source("s"), "x", nil) }},
		{"any type twice", "route kind stripe, any type registered twice", func(r *processor.Registry) {
			r.Handle(processor.Kind("stripe"), processor.AnyType, named("a"))
			r.Handle(processor.Kind("stripe"), processor.AnyType, named("b"))
		}},
		{"second fallback", "fallback registered twice: by shared/processor_test.", func(r *processor.Registry) {
			r.Fallback(named("f"))
			r.Fallback(named("g"))
		}},
		{"nil fallback", "fallback with a nil handler", func(r *processor.Registry) { r.Fallback(nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := processor.NewRegistry()
			tc.register(r) // never panics
			if err := r.Err(); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Err = %v, want one line with %q", err, tc.want)
			}
		})
	}
	// The same type for a source and for a kind is not ambiguous.
	r := processor.NewRegistry()
	r.Handle(processor.Kind("stripe"), "invoice.paid", named("a"))
	r.Handle(processor.Source("stripe"), "invoice.paid", named("c"))
	if err := r.Err(); err != nil {
		t.Errorf("source and kind routes for one type: %v", err)
	}
}

// Routes lists the registrations in the order Lookup tries them, each with
// where it was registered.
func TestRegistryRoutesInPrecedence(t *testing.T) {
	t.Parallel()
	r := processor.NewRegistry()
	r.Fallback(named("fallback"))
	r.Handle(processor.Kind("stripe"), processor.AnyType, named("k*"))
	r.Handle(processor.Kind("square"), "order.created", named("sq"))
	r.Handle(processor.Kind("stripe"), "invoice.paid", named("kp"))
	r.Handle(processor.Source("billing"), processor.AnyType, named("b*"))
	r.Handle(processor.Source("billing"), "invoice.paid", named("bp"))
	r.Handle(processor.Source("acme"), "z", named("az"))
	var got []string
	for _, rt := range r.Routes() {
		if !strings.HasPrefix(rt.Site, "shared/processor_test.TestRegistryRoutesInPrecedence (registry_test.go:") {
			t.Errorf("%s: site %q", rt, rt.Site)
		}
		got = append(got, rt.String())
	}
	want := []string{
		"source acme, type z", "source billing, type invoice.paid", "source billing, any type",
		"kind square, type order.created", "kind stripe, type invoice.paid", "kind stripe, any type",
		"fallback",
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("Routes =\n  %s\nwant\n  %s", strings.Join(got, "; "), strings.Join(want, "; "))
	}
}

// Shadows names, per source of a known kind, each kind route a route by
// the source's name takes the events of; AnyType overlaps included.
func TestRegistryShadows(t *testing.T) {
	t.Parallel()
	r := processor.NewRegistry()
	r.Handle(processor.Kind("stripe"), "invoice.paid", named("kp"))
	r.Handle(processor.Kind("stripe"), "invoice.created", named("kc"))
	r.Handle(processor.Kind("stripe"), processor.AnyType, named("k*"))
	r.Handle(processor.Source("billing"), "invoice.paid", named("bp"))  // shadows kp
	r.Handle(processor.Source("billing"), "charge.failed", named("bf")) // shadows k* for charge.failed
	r.Handle(processor.Source("shop"), processor.AnyType, named("s*"))  // shadows kp, kc and k*
	r.Handle(processor.Source("other"), "invoice.paid", named("op"))    // of another kind: no shadow
	kinds := map[string]string{"billing": "stripe", "shop": "stripe", "other": "square", "plain": "stripe"}
	var got []string
	for _, s := range r.Shadows(kinds) {
		got = append(got, s.Source+": "+s.By.String()+" > "+s.Kind.String())
	}
	want := []string{
		"billing: source billing, type invoice.paid > kind stripe, type invoice.paid",
		"billing: source billing, type charge.failed > kind stripe, any type",
		"shop: source shop, any type > kind stripe, type invoice.created",
		"shop: source shop, any type > kind stripe, type invoice.paid",
		"shop: source shop, any type > kind stripe, any type",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Shadows =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	line := r.Shadows(map[string]string{"billing": "stripe"})[0].String()
	if !regexp.MustCompile(`^route source billing, type invoice\.paid \(by shared/processor_test\.TestRegistryShadows \(registry_test\.go:\d+\)\) ` +
		`shadows route kind stripe, type invoice\.paid \(by shared/processor_test\.TestRegistryShadows \(registry_test\.go:\d+\)\) for the events of source billing$`).MatchString(line) {
		t.Errorf("Shadow line = %q", line)
	}
	if s := r.Shadows(nil); len(s) != 0 {
		t.Errorf("Shadows without the sources' kinds = %v", s)
	}
}

// processor.New refuses a registry with a duplicate route, naming both,
// and logs each shadowing when it knows the sources' kinds.
func TestNewRefusesDuplicatesAndLogsShadows(t *testing.T) {
	t.Parallel()
	f := setup(t)
	dup := processor.NewRegistry()
	paidByExample(dup)
	paidByUser(dup)
	if _, err := processor.New(processor.Config{}, processor.Deps{Pool: f.pool, Registry: dup}); err == nil ||
		!strings.Contains(err.Error(), "route kind stripe, type invoice.paid registered twice: by shared/processor_test.paidByExample") {
		t.Fatalf("New with a duplicate route: %v", err)
	}

	f.reg.Handle(processor.Kind("stripe"), "invoice.paid", named("kind"))
	f.reg.Handle(processor.Source("stripe"), "invoice.paid", named("source"))
	f.processor(processor.Config{SourceKinds: map[string]string{"stripe": "stripe"}})
	lines := f.logs.lines(t, "shadows a route by kind")
	if len(lines) != 1 {
		t.Fatalf("shadow log lines = %v", lines)
	}
	l := lines[0]
	check(t, "shadow line", l, map[string]any{"level": "WARN", "source": "stripe", "route": "source stripe, type invoice.paid",
		"shadows": "kind stripe, type invoice.paid"})
	if site := fmt.Sprint(l["route_site"]); !strings.HasPrefix(site, "shared/processor_test.TestNewRefusesDuplicatesAndLogsShadows (registry_test.go:") {
		t.Errorf("shadow line's route_site = %q, want this test's registration", site)
	}
}

func TestPermanent(t *testing.T) {
	t.Parallel()
	base := errors.New("bad payload")
	err := fmt.Errorf("handle evt_1: %w", processor.Permanent(base))
	if !processor.IsPermanent(err) || !errors.Is(err, base) {
		t.Fatalf("Permanent lost its meaning or its cause: %v", err)
	}
	if processor.IsPermanent(base) || processor.Permanent(nil) != nil {
		t.Fatal("IsPermanent(plain) or Permanent(nil)")
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	b := processor.Backoff{Base: 30 * time.Second, Cap: 6 * time.Hour}
	for n, want := range map[int]time.Duration{
		0: 30 * time.Second, 1: 30 * time.Second, 2: time.Minute, 3: 2 * time.Minute,
		10: 256 * time.Minute, 11: 6 * time.Hour, 12: 6 * time.Hour, 1000: 6 * time.Hour,
	} {
		if got := b.Ceiling(n); got != want {
			t.Errorf("Ceiling(%d) = %s, want %s", n, got, want)
		}
	}
	// No overflow near the largest durations.
	huge := processor.Backoff{Base: time.Second, Cap: time.Duration(1<<63 - 1)}
	if got := huge.Ceiling(80); got != huge.Cap {
		t.Errorf("huge Ceiling(80) = %s", got)
	}
	// Full jitter: the draw scales the ceiling, from 0 up to (not) it.
	for r, want := range map[float64]time.Duration{0: 0, 0.5: 2 * time.Minute, 0.75: 3 * time.Minute} {
		j := b
		j.Rand = func() float64 { return r }
		if got := j.Delay(4); got != want {
			t.Errorf("Delay(4) with rand %v = %s, want %s", r, got, want)
		}
	}
	for range 1000 {
		if d := b.Delay(3); d < 0 || d >= 2*time.Minute {
			t.Fatalf("default random Delay(3) = %s, outside [0, 2m)", d)
		}
	}
	// The retry window docs/processor.md states for the defaults.
	def := processor.Backoff{Base: processor.DefaultBackoffBase, Cap: processor.DefaultBackoffCap}
	// The window is the sum of the delay ceilings between the attempts.
	var window time.Duration
	for n := 1; n < processor.DefaultMaxAttempts; n++ {
		window += def.Ceiling(n)
	}
	if want := 14*time.Hour + 31*time.Minute + 30*time.Second; window != want {
		t.Errorf("default retry window = %s, want %s", window, want)
	}
}

// The deployed processor has no sources document: it routes by the kind
// the receiver recorded on each event, and falls back to the configured
// map only for rows stored without one.
func TestRoutesByTheRecordedKind(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var got []string
	f.reg.HandleFunc(processor.Kind("shopify"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		got = append(got, ev.EventID+":"+ev.SourceKind)
		return nil
	})
	if _, err := f.store.EventInsert(f.ctx, storage.EventInsertParams{Source: "shop-eu", SourceKind: "shopify", EventID: "w1", EventType: "orders/create", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// A legacy row without a kind, whose source the map knows.
	if _, err := f.store.EventInsert(f.ctx, storage.EventInsertParams{Source: "shop-us", EventID: "w2", EventType: "orders/create", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	p := f.processor(processor.Config{SourceKinds: map[string]string{"shop-us": "shopify"}})
	f.drain(p)
	sort.Strings(got)
	if strings.Join(got, ",") != "w1:shopify,w2:shopify" {
		t.Fatalf("handled %v", got)
	}
}
