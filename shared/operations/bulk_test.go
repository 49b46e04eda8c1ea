package operations_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
)

// openDeadLetters is the figure the processor's DeadLettersOpen gauge
// reports (its statement), and the overview's.
func (f *fixture) openDeadLetters() (gauge, overview int64) {
	f.t.Helper()
	st, err := f.store.DeadLetterGetOpenStats(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	s := must[*operations.Stats](f.t)(f.read.Stats(f.ctx, operations.StatsQuery{}))
	return st.Open, s.DeadLettersOpen
}

// A resolve counts first (a read-only API may), needs a reason, refuses a
// confirmed count that no longer holds, then closes exactly the selection:
// the dead letters leave every open count, the events are finished
// (outcome resolved) and the action records them; a requeue no longer
// finds them.
func TestResolve(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	shop := factory.Events(f.ctx, t, f.store, 2, &factory.EventOpts{Source: "shop", State: inbox.StateDead})
	other := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "other", State: inbox.StateDead})
	sel := operations.DeadLetterSelection{Source: "shop"}

	dry := must[*operations.ResolveResult](t)(f.read.Resolve(f.ctx, operations.ResolveRequest{Select: sel, DryRun: true}))
	field.Must(t, "dry run", field.Printed("DryRun", dry.DryRun, true), field.Printed("Matched", dry.Matched, 2), field.Printed("Resolved", dry.Resolved, 0))
	_, err := f.read.Resolve(f.ctx, operations.ResolveRequest{Select: sel, Reason: "duplicate"})
	cause(t, err, inbox.CauseReadOnly)
	_, err = f.act.Resolve(f.ctx, operations.ResolveRequest{Select: sel})
	cause(t, err, inbox.CauseInvalidArgument)
	_, err = f.act.Resolve(f.ctx, operations.ResolveRequest{Select: sel, Reason: "   "})
	cause(t, err, inbox.CauseInvalidArgument)
	_, err = f.act.Resolve(t.Context(), operations.ResolveRequest{Select: sel, Reason: "duplicate"})
	cause(t, err, inbox.CauseUnauthenticated)
	_, err = f.act.Resolve(f.ctx, operations.ResolveRequest{Reason: "duplicate"})
	cause(t, err, inbox.CauseInvalidArgument)
	_, err = f.act.Resolve(f.ctx, operations.ResolveRequest{Select: sel, Expect: new(3), Reason: "duplicate"})
	cause(t, err, inbox.CauseCountChanged)
	if gauge, overview := f.openDeadLetters(); gauge != 3 || overview != 3 {
		t.Fatalf("a refused resolve changed the open dead letters: gauge %d, overview %d, want 3", gauge, overview)
	}

	res := must[*operations.ResolveResult](t)(f.act.Resolve(f.ctx, operations.ResolveRequest{Select: sel, Expect: new(2), Reason: "sent twice by the shop"}))
	field.Must(t, "resolve", field.Printed("DryRun", res.DryRun, false), field.Printed("Matched", res.Matched, 2),
		field.Printed("Resolved", res.Resolved, 2), field.Printed("Next", res.Next == nil, true))
	if gauge, overview := f.openDeadLetters(); gauge != 1 || overview != 1 {
		t.Fatalf("open dead letters after the resolve: gauge %d, overview %d, want 1 (the other source's)", gauge, overview)
	}
	p := must[*operations.DeadLetterPage](t)(f.read.DeadLetters(f.ctx, operations.DeadLetterQuery{}))
	if len(p.DeadLetters) != 1 || p.DeadLetters[0].EventPK != other.ID {
		t.Fatalf("open dead letters = %+v, want only event %d's", p.DeadLetters, other.ID)
	}
	for _, e := range shop {
		d := must[*operations.EventDetail](t)(f.read.Event(f.ctx, operations.EventRef{ID: e.ID}))
		field.Check(t, fmt.Sprintf("event %d", e.ID), field.Printed("Outcome", *d.Event.Outcome, "resolved"),
			field.Printed("State", d.Event.State, inbox.StateProcessed), field.Printed("OpenDeadLetter", d.OpenDeadLetter, int64(0)),
			field.Printed("ResolvedAt set", len(d.DeadLetters) == 1 && d.DeadLetters[0].ResolvedAt != nil, true),
			field.Printed("Actions", len(d.Actions), 1))
	}
	act := must[*operations.ActionPage](t)(f.read.Actions(f.ctx, operations.ActionQuery{})).Actions[0]
	field.Must(t, "action", field.Printed("ID", act.ID, res.ActionID), field.Printed("Action", act.Action, inbox.ActionResolve),
		field.Printed("Actor", act.Actor, "alice@ops"), field.Printed("Reason", *act.Reason, "sent twice by the shop"),
		field.Printed("Events", act.Events, 2))
	if n := must[*operations.RequeueResult](t)(f.read.Requeue(f.ctx, operations.RequeueRequest{Select: sel, DryRun: true})); n.Events != 0 {
		t.Fatalf("a requeue still selects %d resolved dead letters", n.Events)
	}
	// A replay by source does not run what was resolved; one naming it
	// does.
	if n := must[*operations.ReplayResult](t)(f.read.Replay(f.ctx, operations.ReplayRequest{Select: operations.ReplaySelection{Source: "shop"}, DryRun: true})); n.Matched != 0 {
		t.Fatalf("a replay by source selects %d resolved events", n.Matched)
	}
	named := operations.ReplaySelection{Criteria: operations.Criteria{IDs: []int64{shop[0].ID}}}
	if n := must[*operations.ReplayResult](t)(f.read.Replay(f.ctx, operations.ReplayRequest{Select: named, DryRun: true})); n.Matched != 1 {
		t.Fatalf("a replay naming a resolved event selects %d", n.Matched)
	}
	if n := must[*operations.ReplayResult](t)(f.read.Replay(f.ctx, operations.ReplayRequest{Select: operations.ReplaySelection{Outcome: "resolved"}, DryRun: true})); n.Matched != 2 {
		t.Fatalf("a replay of outcome resolved selects %d, want 2", n.Matched)
	}
}

// A discard finishes due events without running them: a drain after it
// runs nothing of them, and the action records them.
func TestDiscard(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	due := factory.Events(f.ctx, t, f.store, 2, &factory.EventOpts{Source: "stripe", Type: "ok"})
	retrying := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "stripe", Type: "ok", State: inbox.StateRetrying})
	kept := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "github", Type: "ok"})
	factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "stripe", Type: "ok", State: inbox.StateDead})
	factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "stripe", Type: "ok", State: inbox.StateProcessed})
	sel := operations.DiscardSelection{Source: "stripe"}

	dry := must[*operations.DiscardResult](t)(f.read.Discard(f.ctx, operations.DiscardRequest{Select: sel, DryRun: true}))
	field.Must(t, "dry run", field.Printed("Matched", dry.Matched, 3))
	_, err := f.read.Discard(f.ctx, operations.DiscardRequest{Select: sel, Reason: "test traffic"})
	cause(t, err, inbox.CauseReadOnly)
	_, err = f.act.Discard(f.ctx, operations.DiscardRequest{Select: sel})
	cause(t, err, inbox.CauseInvalidArgument)
	_, err = f.act.Discard(f.ctx, operations.DiscardRequest{Reason: "test traffic"})
	cause(t, err, inbox.CauseInvalidArgument)
	_, err = f.act.Discard(f.ctx, operations.DiscardRequest{Select: sel, Expect: new(2), Reason: "test traffic"})
	cause(t, err, inbox.CauseCountChanged)

	res := must[*operations.DiscardResult](t)(f.act.Discard(f.ctx, operations.DiscardRequest{Select: sel, Expect: new(3), Reason: "test traffic"}))
	field.Must(t, "discard", field.Printed("Matched", res.Matched, 3), field.Printed("Discarded", res.Discarded, 3))
	ran := drain(t, f, nil)
	if len(ran) != 1 || ran[0] != kept.ID {
		t.Fatalf("the drain after the discard ran %v, want only event %d", ran, kept.ID)
	}
	for _, e := range append(due, retrying) {
		got := must[*inbox.Event](t)(f.store.EventGetByID(f.ctx, e.ID))
		field.Check(t, fmt.Sprintf("event %d", e.ID), field.Printed("Outcome", got.Outcome, inbox.OutcomeDiscarded),
			field.Printed("processed", got.ProcessedAt != nil, true))
	}
	act := must[*operations.ActionPage](t)(f.read.Actions(f.ctx, operations.ActionQuery{})).Actions[0]
	field.Must(t, "action", field.Printed("Action", act.Action, inbox.ActionDiscard), field.Printed("Events", act.Events, 3),
		field.Printed("Reason", *act.Reason, "test traffic"))
	if n := must[*operations.ReplayResult](t)(f.read.Replay(f.ctx, operations.ReplayRequest{Select: operations.ReplaySelection{Source: "stripe"}, DryRun: true})); n.Matched != 1 {
		t.Fatalf("a replay by source selects %d, want only the processed event, not the discarded ones", n.Matched)
	}
}

// drain runs a processor over f's database until nothing is due, with
// handlers for type "ok" of kinds stripe and github that record the
// events they ran; block, when set, runs first in each handler call.
func drain(t *testing.T, f *fixture, block func(id int64) error) []int64 {
	t.Helper()
	var mu sync.Mutex
	var ran []int64
	reg := processor.NewRegistry()
	for _, k := range []string{"stripe", "github"} {
		reg.HandleFunc(processor.Source(k), "ok", func(_ context.Context, _ pgx.Tx, ev *processor.Event) error {
			if block != nil {
				if err := block(ev.ID); err != nil {
					return err
				}
			}
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, ev.ID)
			return nil
		})
	}
	p, err := processor.New(processor.Config{}, processor.Deps{Pool: f.pool, Registry: reg, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Drain(f.ctx)
	if err != nil {
		t.Error(err)
	}
	t.Logf("drain: %d handled, %d retried, %d fallbacks", st.Handled, st.Retried, st.Fallbacks)
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(ran)
	return ran
}

// A discard that reaches an event a processor holds waits for the
// processor's transaction: the batch it was running fails and rolls back,
// the discard then takes the events, and the processor, going on with
// each alone, runs none of them.
func TestDiscardWaitsForTheProcessorHoldingTheEvents(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	evs := factory.Events(f.ctx, t, f.store, 3, &factory.EventOpts{Source: "stripe", Type: "ok"})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	type drained struct{ ran []int64 }
	done := make(chan drained, 1)
	go func() {
		ran := drain(t, f, func(int64) error {
			first := false
			once.Do(func() { first = true; close(entered) })
			if first {
				<-release
			}
			// Every attempt fails: an event the discard missed would be
			// retried, never dropped silently.
			return errors.New("downstream is down")
		})
		done <- drained{ran}
	}()
	<-entered
	type discarded struct {
		res *operations.DiscardResult
		err error
	}
	out := make(chan discarded, 1)
	go func() {
		res, err := f.act.Discard(f.ctx, operations.DiscardRequest{Select: operations.DiscardSelection{Source: "stripe"}, Reason: "stop"})
		out <- discarded{res, err}
	}()
	// The discard is waiting on the rows the processor holds.
	poll.Until(t, 10*time.Second, func() (bool, string) {
		var n int
		err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n > 0, fmt.Sprintf("%d sessions waiting on a lock (%v)", n, err)
	})
	close(release)
	d := <-out
	if d.err != nil {
		t.Fatal(d.err)
	}
	<-done
	for _, e := range evs {
		got := must[*inbox.Event](t)(f.store.EventGetByID(f.ctx, e.ID))
		if got.ProcessedAt != nil && got.Outcome != inbox.OutcomeDiscarded {
			t.Errorf("event %d ran after the discard: outcome %q", e.ID, got.Outcome)
		}
	}
	after := must[*operations.DiscardResult](t)(f.read.Discard(f.ctx, operations.DiscardRequest{Select: operations.DiscardSelection{Source: "stripe"}, DryRun: true}))
	field.Must(t, "discard", field.Printed("Discarded", d.res.Discarded, 3), field.Printed("left", after.Matched, 0))
	if ran := drain(t, f, nil); len(ran) != 0 {
		t.Fatalf("a drain after the discard ran %v", ran)
	}
}

// Every action's criteria select exactly what they name: the failure
// cause of the last attempt, a case-insensitive error text, the receipt
// window and explicit ids.
func TestBulkCriteriaSelectExactly(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	old := time.Now().Add(-48 * time.Hour)
	// Dead letters: a timeout, a failure quoting "Card Declined", an old one.
	dTimeout := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "s", State: inbox.StateDead, Cause: inbox.CauseHandlerTimeout})
	dDeclined := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "s", State: inbox.StateDead, DeadError: "stripe: Card Declined"})
	dOld := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "s", State: inbox.StateDead, CreatedAt: old})
	// Due events: the same three shapes, retrying.
	eTimeout := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "s", State: inbox.StateRetrying, Cause: inbox.CauseHandlerTimeout})
	eDeclined := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "s", State: inbox.StateRetrying, LastError: "stripe: card declined"})
	eOld := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "s", State: inbox.StateRetrying, CreatedAt: old})
	// Processed events for replay: one received long ago, one recent.
	pOld := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "p", State: inbox.StateProcessed, CreatedAt: old})
	pNew := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "p", State: inbox.StateProcessed})

	recent := operations.Window{Since: operations.Span(24 * time.Hour)}
	long := operations.Window{To: time.Now().Add(-24 * time.Hour)}
	dlIDs := func(events ...*inbox.Event) []int64 {
		var out []int64
		for _, e := range events {
			d := must[*operations.EventDetail](t)(f.read.Event(f.ctx, operations.EventRef{ID: e.ID}))
			out = append(out, d.OpenDeadLetter)
		}
		return out
	}
	deadCases := []struct {
		name string
		c    operations.Criteria
		want []*inbox.Event
	}{
		{"cause", operations.Criteria{Cause: string(inbox.CauseHandlerTimeout)}, []*inbox.Event{dTimeout}},
		{"error text", operations.Criteria{Error: "card DECLINED"}, []*inbox.Event{dDeclined}},
		{"received long ago", operations.Criteria{Received: long}, []*inbox.Event{dOld}},
		{"received recently", operations.Criteria{Received: recent}, []*inbox.Event{dTimeout, dDeclined}},
		{"ids", operations.Criteria{IDs: dlIDs(dOld, dTimeout)}, []*inbox.Event{dTimeout, dOld}},
		{"cause and error", operations.Criteria{Cause: string(inbox.CauseHandlerTimeout), Error: "declined"}, nil},
	}
	for _, c := range deadCases {
		sel := operations.DeadLetterSelection{Source: "s", Criteria: c.c}
		rq := must[*operations.RequeueResult](t)(f.read.Requeue(f.ctx, operations.RequeueRequest{Select: sel, DryRun: true}))
		rs := must[*operations.ResolveResult](t)(f.read.Resolve(f.ctx, operations.ResolveRequest{Select: sel, DryRun: true}))
		list := must[*operations.DeadLetterPage](t)(f.read.DeadLetters(f.ctx, operations.DeadLetterQuery{Source: "s", Criteria: c.c}))
		var listed []int64
		for _, d := range list.DeadLetters {
			listed = append(listed, d.EventPK)
		}
		field.Check(t, "dead letters by "+c.name, field.Printed("requeue", rq.Events, len(c.want)),
			field.Printed("resolve", rs.Matched, len(c.want)), field.Printed("list", listed, ids(c.want)))
	}
	dueCases := []struct {
		name string
		c    operations.Criteria
		want []*inbox.Event
	}{
		{"cause", operations.Criteria{Cause: string(inbox.CauseHandlerTimeout)}, []*inbox.Event{eTimeout}},
		{"error text", operations.Criteria{Error: "CARD declined"}, []*inbox.Event{eDeclined}},
		{"received long ago", operations.Criteria{Received: long}, []*inbox.Event{eOld}},
		{"ids", operations.Criteria{IDs: []int64{eOld.ID, eDeclined.ID, dOld.ID}}, []*inbox.Event{eDeclined, eOld}},
	}
	for _, c := range dueCases {
		sel := operations.DiscardSelection{Source: "s", Criteria: c.c}
		n := must[*operations.DiscardResult](t)(f.read.Discard(f.ctx, operations.DiscardRequest{Select: sel, DryRun: true}))
		field.Check(t, "discard by "+c.name, field.Printed("Matched", n.Matched, len(c.want)))
	}
	replayCases := []struct {
		name string
		c    operations.Criteria
		want int
	}{
		{"received long ago", operations.Criteria{Received: long}, 1},
		{"received recently", operations.Criteria{Received: recent}, 1},
		{"ids", operations.Criteria{IDs: []int64{pOld.ID, pNew.ID}}, 2},
		{"cause", operations.Criteria{Cause: string(inbox.CauseHandlerTimeout)}, 0},
	}
	for _, c := range replayCases {
		sel := operations.ReplaySelection{Source: "p", Criteria: c.c}
		n := must[*operations.ReplayResult](t)(f.read.Replay(f.ctx, operations.ReplayRequest{Select: sel, DryRun: true}))
		field.Check(t, "replay by "+c.name, field.Printed("Matched", n.Matched, c.want))
	}
	// The actions do what their counts said: the cause's resolve, the
	// error text's discard.
	rs := must[*operations.ResolveResult](t)(f.act.Resolve(f.ctx, operations.ResolveRequest{
		Select: operations.DeadLetterSelection{Criteria: operations.Criteria{Cause: string(inbox.CauseHandlerTimeout)}}, Expect: new(1), Reason: "timeouts are retried upstream"}))
	ds := must[*operations.DiscardResult](t)(f.act.Discard(f.ctx, operations.DiscardRequest{
		Select: operations.DiscardSelection{Criteria: operations.Criteria{Error: "declined"}}, Expect: new(1), Reason: "declined cards are final"}))
	field.Must(t, "actions", field.Printed("Resolved", rs.Resolved, 1), field.Printed("Discarded", ds.Discarded, 1))
	if e := must[*inbox.Event](t)(f.store.EventGetByID(f.ctx, dTimeout.ID)); e.Outcome != inbox.OutcomeResolved {
		t.Errorf("the timed-out dead event's outcome = %q", e.Outcome)
	}
	if e := must[*inbox.Event](t)(f.store.EventGetByID(f.ctx, eDeclined.ID)); e.Outcome != inbox.OutcomeDiscarded {
		t.Errorf("the declined event's outcome = %q", e.Outcome)
	}
	// Criteria out of bounds are refused.
	for name, c := range map[string]operations.Criteria{
		"a zero id":     {IDs: []int64{0}},
		"too many ids":  {IDs: make([]int64, operations.MaxIDs+1)},
		"a long error":  {Error: string(make([]byte, operations.MaxFilterBytes+1))},
		"a NUL in text": {Cause: "a\x00b"},
	} {
		_, err := f.read.Resolve(f.ctx, operations.ResolveRequest{Select: operations.DeadLetterSelection{Criteria: c}, DryRun: true})
		if inbox.CauseOf(err) != inbox.CauseInvalidArgument {
			t.Errorf("%s: %v, want invalid_argument", name, err)
		}
	}
}

func ids(evs []*inbox.Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

// A resolve larger than one call goes on under one record; stopping
// between calls (a cancel) leaves a record that says how far it got, and
// only its operator may continue it.
func TestResolveInSeveralCalls(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	factory.Events(f.ctx, t, f.store, 5, &factory.EventOpts{Source: "shop", State: inbox.StateDead})
	sel := operations.DeadLetterSelection{Source: "shop"}
	first := must[*operations.ResolveResult](t)(f.act.Resolve(f.ctx, operations.ResolveRequest{Select: sel, Expect: new(5), Reason: "r", Max: 2}))
	field.Must(t, "first call", field.Printed("Matched", first.Matched, 5), field.Printed("Resolved", first.Resolved, 2), field.Printed("Next set", first.Next != nil, true))
	// A dead letter that dies after the count is not the resolve's.
	late := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "shop", State: inbox.StateDead})
	bob := operations.WithOperator(t.Context(), operations.Operator{Name: "bob@ops"})
	_, err := f.act.Resolve(bob, operations.ResolveRequest{Reason: "r", Continue: first.Next})
	cause(t, err, inbox.CauseInvalidArgument)
	_, err = f.act.Resolve(f.ctx, operations.ResolveRequest{Reason: "r", Continue: &operations.ActionCursor{ActionID: first.ActionID + 100, After: 1, Through: 2}})
	cause(t, err, inbox.CauseInvalidArgument)
	second := must[*operations.ResolveResult](t)(f.act.Resolve(f.ctx, operations.ResolveRequest{Reason: "r", Continue: first.Next, Max: 2}))
	field.Must(t, "second call", field.Printed("ActionID", second.ActionID, first.ActionID), field.Printed("Resolved", second.Resolved, 2),
		field.Printed("Next set", second.Next != nil, true))
	// The operator stops here: the record says 4, one is still open.
	act := must[*operations.ActionPage](t)(f.read.Actions(f.ctx, operations.ActionQuery{})).Actions[0]
	field.Must(t, "record after a cancel", field.Printed("ID", act.ID, first.ActionID), field.Printed("Events", act.Events, 4))
	if gauge, _ := f.openDeadLetters(); gauge != 2 {
		t.Fatalf("open dead letters = %d, want 2 (one left, one late)", gauge)
	}
	// Resumed: the rest of the first count, never the late one.
	last := must[*operations.ResolveResult](t)(f.act.Resolve(f.ctx, operations.ResolveRequest{Reason: "r", Continue: second.Next, Max: 2}))
	field.Must(t, "last call", field.Printed("Resolved", last.Resolved, 1), field.Printed("Next", last.Next == nil, true))
	act = must[*operations.ActionPage](t)(f.read.Actions(f.ctx, operations.ActionQuery{})).Actions[0]
	field.Must(t, "record", field.Printed("Events", act.Events, 5))
	d := must[*operations.EventDetail](t)(f.read.Event(f.ctx, operations.EventRef{ID: late.ID}))
	if d.OpenDeadLetter == 0 {
		t.Fatal("the dead letter that died after the count was resolved")
	}
}

// A discard larger than one call commits each chunk with its record's
// count: a discard stopped after its first call leaves a record of
// exactly what it discarded.
func TestDiscardInSeveralCalls(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	factory.Events(f.ctx, t, f.store, 3, &factory.EventOpts{Source: "stripe", Type: "ok"})
	first := must[*operations.DiscardResult](t)(f.act.Discard(f.ctx, operations.DiscardRequest{
		Select: operations.DiscardSelection{All: true}, Expect: new(3), Reason: "r", Max: 2}))
	field.Must(t, "first call", field.Printed("Discarded", first.Discarded, 2), field.Printed("Next set", first.Next != nil, true))
	_, err := f.act.Resolve(f.ctx, operations.ResolveRequest{Reason: "r", Continue: first.Next})
	cause(t, err, inbox.CauseInvalidArgument)
	act := must[*operations.ActionPage](t)(f.read.Actions(f.ctx, operations.ActionQuery{})).Actions[0]
	field.Must(t, "record", field.Printed("Action", act.Action, inbox.ActionDiscard), field.Printed("Events", act.Events, 2))
	if ran := drain(t, f, nil); len(ran) != 1 {
		t.Fatalf("the drain after a stopped discard ran %v, want the one it did not reach", ran)
	}
}

// A requeue larger than one call goes on in further calls under one
// record, each call's events due at once; one stopped between calls (or
// cut short: its context cancelled) leaves a record of exactly what it
// requeued, and resumes with the rest of the first count only.
func TestRequeueInSeveralCalls(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	factory.Events(f.ctx, t, f.store, 5, &factory.EventOpts{Source: "stripe", Type: "ok", State: inbox.StateDead})
	sel := operations.DeadLetterSelection{Source: "stripe"}
	first := must[*operations.RequeueResult](t)(f.act.Requeue(f.ctx, operations.RequeueRequest{Select: sel, Expect: new(5), Max: 2}))
	field.Must(t, "first call", field.Printed("Matched", first.Matched, 5), field.Printed("Events", first.Events, 2),
		field.Printed("Next set", first.Next != nil, true), field.Printed("ActionID set", first.ActionID != 0, true))
	late := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "stripe", Type: "ok", State: inbox.StateDead})

	// Only this operator's requeue continues it, and only as a requeue.
	bob := operations.WithOperator(t.Context(), operations.Operator{Name: "bob@ops"})
	_, err := f.act.Requeue(bob, operations.RequeueRequest{Continue: first.Next})
	cause(t, err, inbox.CauseInvalidArgument)
	_, err = f.act.Resolve(f.ctx, operations.ResolveRequest{Reason: "r", Continue: first.Next})
	cause(t, err, inbox.CauseInvalidArgument)
	_, err = f.act.Requeue(f.ctx, operations.RequeueRequest{Continue: first.Next, DryRun: true})
	cause(t, err, inbox.CauseInvalidArgument)

	// The operator gives up mid-way: the call never lands.
	cancelled, cancel := context.WithCancel(f.ctx)
	cancel()
	if _, err := f.act.Requeue(cancelled, operations.RequeueRequest{Continue: first.Next}); err == nil {
		t.Fatal("a cancelled continuation succeeded")
	}
	act := must[*operations.ActionPage](t)(f.read.Actions(f.ctx, operations.ActionQuery{})).Actions[0]
	field.Must(t, "record after a cancel", field.Printed("ID", act.ID, first.ActionID),
		field.Printed("Action", act.Action, inbox.ActionRequeue), field.Printed("Events", act.Events, 2))
	if gauge, _ := f.openDeadLetters(); gauge != 4 {
		t.Fatalf("open dead letters = %d, want 4 (three left, one late)", gauge)
	}

	// Resumed: the rest of the first count, never the late one.
	second := must[*operations.RequeueResult](t)(f.act.Requeue(f.ctx, operations.RequeueRequest{Continue: first.Next, Max: 2}))
	field.Must(t, "second call", field.Printed("ActionID", second.ActionID, first.ActionID), field.Printed("Matched", second.Matched, 0),
		field.Printed("Events", second.Events, 2), field.Printed("Next set", second.Next != nil, true))
	last := must[*operations.RequeueResult](t)(f.act.Requeue(f.ctx, operations.RequeueRequest{Continue: second.Next, Max: 2}))
	field.Must(t, "last call", field.Printed("Events", last.Events, 1), field.Printed("Next", last.Next == nil, true))
	act = must[*operations.ActionPage](t)(f.read.Actions(f.ctx, operations.ActionQuery{})).Actions[0]
	field.Must(t, "record", field.Printed("ID", act.ID, first.ActionID), field.Printed("Events", act.Events, 5))
	d := must[*operations.EventDetail](t)(f.read.Event(f.ctx, operations.EventRef{ID: late.ID}))
	if d.OpenDeadLetter == 0 {
		t.Fatal("the dead letter that died after the count was requeued")
	}
	if ran := drain(t, f, nil); len(ran) != 5 {
		t.Fatalf("the drain after the requeue ran %v, want its five events", ran)
	}
}

// A requeue confirmed at a count the selection no longer has (a dead
// letter died after the dry run) changes nothing and records nothing: the
// count held to Expect is the one the requeue would act on; confirmed
// again, it requeues the whole selection, the late one too.
func TestRequeueRefusesASelectionThatGrewAfterItsCount(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	factory.Events(f.ctx, t, f.store, 2, &factory.EventOpts{Source: "shop", State: inbox.StateDead})
	sel := operations.DeadLetterSelection{Source: "shop"}
	dry := must[*operations.RequeueResult](t)(f.read.Requeue(f.ctx, operations.RequeueRequest{Select: sel, DryRun: true}))
	field.Must(t, "dry run", field.Printed("Matched", dry.Matched, 2), field.Printed("Events", dry.Events, 2))
	late := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "shop", State: inbox.StateDead})

	_, err := f.act.Requeue(f.ctx, operations.RequeueRequest{Select: sel, Expect: &dry.Matched, Reason: "handler fixed"})
	cause(t, err, inbox.CauseCountChanged)
	if msg := inbox.MessageOf(err); !strings.Contains(msg, "now selects 3 events, not the 2 confirmed") {
		t.Fatalf("refusal = %q, want the new count and the confirmed one", msg)
	}
	if gauge, _ := f.openDeadLetters(); gauge != 3 {
		t.Fatalf("open dead letters after the refusal = %d, want 3: nothing requeued", gauge)
	}
	if acts := must[*operations.ActionPage](t)(f.read.Actions(f.ctx, operations.ActionQuery{})).Actions; len(acts) != 0 {
		t.Fatalf("a refused requeue was recorded: %+v", acts)
	}

	res := must[*operations.RequeueResult](t)(f.act.Requeue(f.ctx, operations.RequeueRequest{Select: sel, Expect: new(3), Reason: "handler fixed"}))
	field.Must(t, "requeue", field.Printed("Matched", res.Matched, 3), field.Printed("Events", res.Events, 3))
	if d := must[*operations.EventDetail](t)(f.read.Event(f.ctx, operations.EventRef{ID: late.ID})); d.OpenDeadLetter != 0 {
		t.Fatal("the late dead letter, confirmed in the count, was not requeued")
	}
}

// Every action refuses a selection that names nothing, with one message,
// rather than act on nothing or on everything; its confirmed count's
// refusal changes nothing either way.
func TestEveryActionRefusesAnEmptySelection(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "shop", State: inbox.StateDead})
	calls := map[string]func() error{
		"requeue": func() error {
			_, err := f.act.Requeue(f.ctx, operations.RequeueRequest{Reason: "r"})
			return err
		},
		"resolve": func() error {
			_, err := f.act.Resolve(f.ctx, operations.ResolveRequest{Reason: "r"})
			return err
		},
		"discard": func() error {
			_, err := f.act.Discard(f.ctx, operations.DiscardRequest{Reason: "r", DryRun: true})
			return err
		},
		"replay": func() error {
			_, err := f.act.Replay(f.ctx, operations.ReplayRequest{DryRun: true})
			return err
		},
		"reingest": func() error {
			_, err := f.act.Reingest(f.ctx, operations.ReingestRequest{DryRun: true})
			return err
		},
	}
	msgs := map[string]bool{}
	for name, call := range calls {
		err := call()
		cause(t, err, inbox.CauseInvalidArgument)
		msgs[inbox.MessageOf(err)] = true
		if !strings.Contains(inbox.MessageOf(err), "the selection is empty") {
			t.Errorf("%s: %q", name, inbox.MessageOf(err))
		}
	}
	if len(msgs) != 1 {
		t.Errorf("the refusals say %d things, want one: %v", len(msgs), msgs)
	}
	if gauge, _ := f.openDeadLetters(); gauge != 1 {
		t.Fatalf("open dead letters = %d, want 1", gauge)
	}
	// IsZero is what the front ends ask before calling.
	for name, zero := range map[string]bool{
		"dead letters":        operations.DeadLetterSelection{}.IsZero(),
		"discard":             operations.DiscardSelection{}.IsZero(),
		"replay":              operations.ReplaySelection{}.IsZero(),
		"quarantine":          operations.QuarantineSelection{}.IsZero(),
		"criteria":            operations.Criteria{IDs: []int64{}}.IsZero(),
		"all is no empty one": !operations.DeadLetterSelection{All: true}.IsZero(),
		"a cause narrows":     !operations.DiscardSelection{Criteria: operations.Criteria{Cause: "handler_error"}}.IsZero(),
	} {
		if !zero {
			t.Errorf("%s: IsZero wrong", name)
		}
	}
}
