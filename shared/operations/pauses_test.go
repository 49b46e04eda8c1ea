package operations_test

import (
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// A pause is counted first (a dry run), then holds the source's waiting
// events and is recorded with who and why; the overview and the events
// show it; a resume releases exactly those, is recorded, and wakes the
// processor.
func TestPauseAndResumeASource(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	w := &wakes{}
	act := must[*operations.Service](t)(operations.New(operations.Config{Access: operations.AccessAct}, operations.Deps{Store: f.store, Wake: w}))
	evs := factory.Events(f.ctx, t, f.store, 3, &factory.EventOpts{Source: "shop"})
	factory.Events(f.ctx, t, f.store, 2, &factory.EventOpts{Source: "other"})
	req := operations.PauseRequest{Scope: inbox.PauseSource, Name: "shop", Reason: "ERP migration"}

	dry := req
	dry.DryRun = true
	res := must[*operations.PauseResult](t)(f.read.Pause(f.ctx, dry))
	field.Check(t, "dry run", field.Eq("Events", res.Events, 3), field.Eq("Paused", res.Paused, false), field.Eq("DryRun", res.DryRun, true))
	if _, err := act.Pause(f.ctx, operations.PauseRequest{Scope: inbox.PauseSource, Name: "shop", Expect: new(7)}); err == nil {
		t.Fatal("a pause with a wrong count went through")
	} else {
		cause(t, err, inbox.CauseCountChanged)
	}
	res = must[*operations.PauseResult](t)(act.Pause(f.ctx, req))
	field.Check(t, "pause", field.Eq("Events", res.Events, 3), field.Eq("Paused", res.Paused, true))
	if res.ActionID == 0 {
		t.Fatal("the pause has no action's record")
	}
	if n := w.n.Load(); n != 0 {
		t.Fatalf("%d wake-ups after a pause, want none", n)
	}

	st := must[*operations.Stats](t)(f.read.Stats(f.ctx, operations.StatsQuery{}))
	if len(st.Pauses) != 1 {
		t.Fatalf("the overview shows %d pauses, want 1", len(st.Pauses))
	}
	field.Check(t, "overview", field.Eq("Pauses[0].Name", st.Pauses[0].Name, "shop"), field.Eq("Pauses[0].Actor", st.Pauses[0].Actor, "alice@ops"),
		field.Is("Pauses[0].Reason", st.Pauses[0].Reason, st.Pauses[0].Reason != nil && *st.Pauses[0].Reason == "ERP migration", "ERP migration"),
		field.Eq("Backlog.Paused", st.Backlog.Paused, int64(3)), field.Eq("Backlog.Due", st.Backlog.Due, int64(2)),
		field.Eq("Backlog.Unprocessed", st.Backlog.Unprocessed, int64(5)))
	page := must[*operations.EventPage](t)(f.read.Events(f.ctx, operations.EventQuery{State: string(inbox.StatePaused)}))
	if len(page.Events) != 3 {
		t.Fatalf("%d paused events listed, want 3", len(page.Events))
	}
	ev := page.Events[0]
	field.Check(t, "paused event", field.Eq("State", ev.State, inbox.StatePaused),
		field.Is("HeldBy", ev.HeldBy, ev.HeldBy != nil && *ev.HeldBy == "source:shop", "source:shop"),
		field.Is("NextAttemptAt", ev.NextAttemptAt, ev.NextAttemptAt == nil, "null: due at no time"),
		field.Is("HeldDueAt", ev.HeldDueAt, ev.HeldDueAt != nil, "set"))

	// Twice is refused with a cause, and changes nothing.
	_, err := act.Pause(f.ctx, req)
	cause(t, err, inbox.CauseAlreadyPaused)

	res = must[*operations.PauseResult](t)(act.Resume(f.ctx, operations.PauseRequest{Scope: inbox.PauseSource, Name: "shop", Reason: "done"}))
	field.Check(t, "resume", field.Eq("Events", res.Events, 3), field.Eq("Paused", res.Paused, false))
	if n := w.n.Load(); n != 1 {
		t.Fatalf("%d wake-ups after a resume, want 1", n)
	}
	_, err = act.Resume(f.ctx, req)
	cause(t, err, inbox.CauseNotPaused)
	for _, e := range evs {
		got := must[*inbox.Event](t)(f.store.EventGetByID(f.ctx, e.ID))
		if st := got.State(got.NextAttemptAt); st != inbox.StatePending {
			t.Fatalf("event %d is %s after the resume, want pending", e.ID, st)
		}
	}

	acts := must[*operations.ActionPage](t)(f.read.Actions(f.ctx, operations.ActionQuery{}))
	if len(acts.Actions) != 2 {
		t.Fatalf("%d actions recorded, want the pause and the resume", len(acts.Actions))
	}
	resume, pause := acts.Actions[0], acts.Actions[1]
	field.Check(t, "actions",
		field.Eq("resume.Action", resume.Action, inbox.ActionResume), field.Eq("resume.Events", resume.Events, 3),
		field.Eq("pause.Action", pause.Action, inbox.ActionPause), field.Eq("pause.Actor", pause.Actor, "alice@ops"),
		field.Is("pause.Reason", pause.Reason, pause.Reason != nil && *pause.Reason == "ERP migration", "ERP migration"),
		field.Eq("pause.Filter", string(pause.Filter), `{"name":"shop","scope":"source"}`))
}

// Each refusal says why, with its cause: the read-only API counts but
// does not act, and a scope or a route that is not one is refused.
func TestPauseRefusals(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	_, err := f.read.Pause(f.ctx, operations.PauseRequest{Scope: inbox.PauseSource, Name: "shop"})
	cause(t, err, inbox.CauseReadOnly)
	_, err = f.read.Resume(f.ctx, operations.PauseRequest{Scope: inbox.PauseHandler, Name: "fallback"})
	cause(t, err, inbox.CauseReadOnly)
	for _, r := range []operations.PauseRequest{
		{Scope: "queue", Name: "shop"},
		{Scope: inbox.PauseSource, Name: " "},
		{Scope: inbox.PauseHandler, Name: "ledger"},
		{Scope: inbox.PauseHandler, Name: "source ledger"},
		{Scope: inbox.PauseHandler, Name: "route ledger, any type"},
		{Scope: inbox.PauseHandler, Name: "kind stripe, type "},
	} {
		_, err := f.act.Pause(f.ctx, r)
		cause(t, err, inbox.CauseInvalidArgument)
	}
	for _, name := range []string{"fallback", "kind stripe, any type", "source shop, type order.created"} {
		must[*operations.PauseResult](t)(f.act.Pause(f.ctx, operations.PauseRequest{Scope: inbox.PauseHandler, Name: name}))
	}
	st := must[*operations.Stats](t)(f.read.Stats(f.ctx, operations.StatsQuery{}))
	if len(st.Pauses) != 3 {
		t.Fatalf("%d pauses, want 3", len(st.Pauses))
	}
}
