package operations_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// wakes counts the processor's wake-ups (shared/wake's own tests run the
// real ones).
type wakes struct {
	n    atomic.Int64
	fail bool
}

func (w *wakes) Wake(context.Context) error {
	w.n.Add(1)
	if w.fail {
		return errors.New("lambda unreachable")
	}
	return nil
}

// A requeue or replay that made events due wakes the processor, once;
// a dry run, a refusal or an action that selected nothing does not, and a
// failed wake-up leaves the action done.
func TestActionsWakeTheProcessor(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	w := &wakes{}
	act := must[*operations.Service](t)(operations.New(operations.Config{Access: operations.AccessAct}, operations.Deps{Store: f.store, Wake: w}))
	factory.Events(f.ctx, t, f.store, 2, &factory.EventOpts{Source: "shop", State: inbox.StateDead})
	factory.Events(f.ctx, t, f.store, 2, &factory.EventOpts{Source: "shop", State: inbox.StateProcessed})

	sel := operations.DeadLetterSelection{Source: "shop"}
	must[*operations.RequeueResult](t)(act.Requeue(f.ctx, operations.RequeueRequest{Select: sel, DryRun: true}))
	if _, err := act.Requeue(f.ctx, operations.RequeueRequest{Select: sel, Expect: new(5)}); err == nil {
		t.Fatal("a requeue with a wrong count went through")
	}
	if n := w.n.Load(); n != 0 {
		t.Fatalf("%d wake-ups before anything was done", n)
	}
	must[*operations.RequeueResult](t)(act.Requeue(f.ctx, operations.RequeueRequest{Select: sel}))
	if n := w.n.Load(); n != 1 {
		t.Fatalf("%d wake-ups after a requeue, want 1", n)
	}
	// Nothing left to requeue: nothing to wake for.
	must[*operations.RequeueResult](t)(act.Requeue(f.ctx, operations.RequeueRequest{Select: sel}))
	if n := w.n.Load(); n != 1 {
		t.Fatalf("%d wake-ups after an empty requeue, want 1", n)
	}
	w.fail = true
	res := must[*operations.ReplayResult](t)(act.Replay(f.ctx, operations.ReplayRequest{Select: operations.ReplaySelection{Source: "shop", Outcome: string(inbox.OutcomeHandled)}}))
	if res.Replayed != 2 || w.n.Load() != 2 {
		t.Fatalf("replay with the wake-up failing: %+v, %d wake-ups", res, w.n.Load())
	}
}

// A resolve makes nothing due, but wakes the processor all the same: its
// line carries the DeadLettersOpen gauge, whose alarm the lower figure
// clears. A dry run and a discard do not wake it.
func TestResolveWakesTheProcessor(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	w := &wakes{}
	act := must[*operations.Service](t)(operations.New(operations.Config{Access: operations.AccessAct}, operations.Deps{Store: f.store, Wake: w}))
	factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "shop", State: inbox.StateDead})
	factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "shop"})
	sel := operations.DeadLetterSelection{Source: "shop"}
	must[*operations.ResolveResult](t)(act.Resolve(f.ctx, operations.ResolveRequest{Select: sel, DryRun: true}))
	must[*operations.DiscardResult](t)(act.Discard(f.ctx, operations.DiscardRequest{Select: operations.DiscardSelection{Source: "shop"}, Reason: "r"}))
	if n := w.n.Load(); n != 0 {
		t.Fatalf("%d wake-ups after a dry run and a discard", n)
	}
	must[*operations.ResolveResult](t)(act.Resolve(f.ctx, operations.ResolveRequest{Select: sel, Reason: "r"}))
	if n := w.n.Load(); n != 1 {
		t.Fatalf("%d wake-ups after a resolve, want 1", n)
	}
}
