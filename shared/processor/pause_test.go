package processor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
)

// pauses is the acting operator's Service over the fixture's database,
// which pauses and resumes as webhookctl and the console do.
func (f *fixture) pauses() *operations.Service {
	f.t.Helper()
	s, err := operations.New(operations.Config{Access: operations.AccessAct}, operations.Deps{Store: f.store})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *fixture) pause(s *operations.Service, scope inbox.PauseScope, name string, resume bool) *operations.PauseResult {
	f.t.Helper()
	ctx := operations.WithOperator(f.ctx, operations.Operator{Name: "ops"})
	call := s.Pause
	if resume {
		call = s.Resume
	}
	res, err := call(ctx, operations.PauseRequest{Scope: scope, Name: name, Reason: "downstream migration"})
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

// A paused source's events are stored as ever and wait, no attempt
// counted, whether they were waiting at the pause or arrived after it;
// once resumed, each is handled exactly once.
func TestPausedSourceWaitsUntilResumed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	f.reg.HandleFunc(processor.Source("billing"), processor.AnyType, writeLedger)
	ops := f.pauses()
	before := f.insert("ledger", "ledger.write", "before_", 3)
	if res := f.pause(ops, inbox.PauseSource, "ledger", false); res.Events != 3 {
		t.Fatalf("the pause held %d waiting events, want 3", res.Events)
	}
	after := f.insertOne("ledger", "after_1", "ledger.write", []byte(`{"n":1}`))
	other := f.insertOne("billing", "bill_1", "invoice.paid", []byte(`{"n":2}`))
	p := f.processor(processor.Config{BatchSize: 10})

	check(t, "paused drain", f.drain(p), map[string]any{"Handled": 1, "Held": 1, "Stopped": processor.StopDrained})
	if rows, _ := f.ledger(); rows != 1 {
		t.Fatalf("ledger rows = %d while the source is paused, want only the other source's", rows)
	}
	for _, id := range append(before, after) {
		check(t, "held row", f.row(id), map[string]any{"Attempts": 0, "ProcessedAt": unset, "HeldDueAt": set})
		if st := f.row(id).State(f.clock.Now()); st != inbox.StatePaused {
			t.Fatalf("event %d is %s, want paused", id, st)
		}
		attempts(t, f.history(id), 0)
	}
	check(t, "other source", f.row(other), map[string]any{"Outcome": inbox.OutcomeHandled})
	// Held events are no work: a second drain claims nothing.
	check(t, "second paused drain", f.drain(p), map[string]any{"Claimed": 0, "Held": 0, "Stopped": processor.StopDrained})

	if res := f.pause(ops, inbox.PauseSource, "ledger", true); res.Events != 4 {
		t.Fatalf("the resume released %d events, want 4", res.Events)
	}
	check(t, "resumed drain", f.drain(p), map[string]any{"Handled": 4, "Held": 0})
	if rows, events := f.ledger(); rows != 5 || events != 5 {
		t.Fatalf("ledger rows = %d for %d events after the resume, want 5 and 5", rows, events)
	}
	for _, id := range append(before, after) {
		check(t, "resumed row", f.row(id), map[string]any{"Attempts": 1, "Outcome": inbox.OutcomeHandled, "HeldBy": "", "HeldDueAt": unset})
	}
	f.noOpenClaims()
}

// A paused handler's events wait, held as the processor meets them, while
// the other handlers of the same source run; resumed, they run.
func TestPausedHandlerWaitsWhileOthersRun(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), "ledger.write", writeLedger)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	ops := f.pauses()
	route := "source ledger, type ledger.write"
	if res := f.pause(ops, inbox.PauseHandler, route, false); res.Events != 0 {
		t.Fatalf("a handler's pause held %d events at once: routing is the processor's", res.Events)
	}
	paused := f.insert("ledger", "ledger.write", "w_", 3)
	running := f.insert("ledger", "ledger.other", "o_", 2)
	p := f.processor(processor.Config{BatchSize: 10})

	check(t, "paused drain", f.drain(p), map[string]any{"Claimed": 5, "Handled": 2, "Held": 3})
	for _, id := range running {
		check(t, "other route", f.row(id), map[string]any{"Outcome": inbox.OutcomeHandled})
	}
	for _, id := range paused {
		check(t, "held", f.row(id), map[string]any{"Attempts": 0, "HeldBy": "handler:" + route})
	}
	f.pause(ops, inbox.PauseHandler, route, true)
	check(t, "resumed drain", f.drain(p), map[string]any{"Handled": 3, "Held": 0})
	for _, id := range paused {
		check(t, "resumed", f.row(id), map[string]any{"Attempts": 1, "Outcome": inbox.OutcomeHandled})
	}
}

// A retry of a paused source is held too, however far off it was due,
// and keeps its failed attempts: held, it costs none, and resumed it runs
// at its time.
func TestPauseHoldsARetryWithoutChargingIt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	fail := true
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		if fail {
			return errors.New("downstream down")
		}
		return writeLedger(ctx, tx, ev)
	})
	ids := f.insert("ledger", "ledger.write", "r_", 1)
	p := f.processor(processor.Config{})
	check(t, "failing drain", f.drain(p), map[string]any{"Retried": 1})
	ops := f.pauses()
	f.pause(ops, inbox.PauseSource, "ledger", false)
	row := f.row(ids[0])
	check(t, "held retry", row, map[string]any{"FailedAttempts": 1, "Attempts": 1, "HeldBy": "source:ledger"})
	f.clock.Advance(24 * time.Hour)
	check(t, "a day later", f.drain(p), map[string]any{"Claimed": 0})
	fail = false
	f.pause(ops, inbox.PauseSource, "ledger", true)
	check(t, "resumed", f.drain(p), map[string]any{"Handled": 1})
	check(t, "handled retry", f.row(ids[0]), map[string]any{"Attempts": 2, "FailedAttempts": 1, "Outcome": inbox.OutcomeHandled})
}

// The metrics' line counts held events apart, in the backlog but never
// due, so that a pause ages no backlog alarm however long it lasts.
func TestPausedEventsAgeNoBacklogAlarm(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	f.insert("ledger", "ledger.write", "m_", 2)
	f.pause(f.pauses(), inbox.PauseSource, "ledger", false)
	f.clock.Advance(6 * time.Hour)
	f.drain(f.processor(processor.Config{}))
	l := f.metricLines(t)[0]
	for name, want := range map[string]float64{
		processor.MetricBacklogCount: 2, processor.MetricBacklogPaused: 2, processor.MetricBacklogDue: 0, processor.MetricBacklogOldestAge: 0,
	} {
		if l[name] != want {
			t.Errorf("%s = %v, want %v", name, l[name], want)
		}
	}
}
