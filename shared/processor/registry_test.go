package processor_test

import (
	"context"
	"errors"
	"fmt"
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

func TestRegistryRefusesAmbiguity(t *testing.T) {
	t.Parallel()
	mustPanic := func(name, want string, f func()) {
		t.Helper()
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(fmt.Sprint(r), want) {
				t.Errorf("%s: panic = %v, want one mentioning %q", name, r, want)
			}
		}()
		f()
	}
	r := processor.NewRegistry()
	r.Handle(processor.Kind("stripe"), "invoice.paid", named("a"))
	mustPanic("duplicate", "already registered", func() { r.Handle(processor.Kind("stripe"), "invoice.paid", named("b")) })
	mustPanic("empty match", "empty match", func() { r.Handle(processor.Match{}, "x", named("b")) })
	mustPanic("empty type", "empty event type", func() { r.Handle(processor.Source("s"), "", named("b")) })
	mustPanic("nil handler", "nil handler", func() { r.Handle(processor.Source("s"), "x", nil) })
	r.Fallback(named("f"))
	mustPanic("second fallback", "already registered", func() { r.Fallback(named("g")) })
	// The same type for a source and for a kind is not ambiguous.
	r.Handle(processor.Source("stripe"), "invoice.paid", named("c"))
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
	if got, want := def.RetryWindow(processor.DefaultMaxAttempts), 14*time.Hour+31*time.Minute+30*time.Second; got != want {
		t.Errorf("default retry window = %s, want %s", got, want)
	}
	if got := def.RetryWindow(1); got != 0 {
		t.Errorf("RetryWindow(1) = %s", got)
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
