package storage_test

import (
	"slices"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// A pause's row, once; the hold of its source's waiting events (those a
// claim holds are left to run), which no claim, no wake-up and no due
// count sees; the claimed events a pause covers held in the claim's
// transaction; and the release, each event due when it was due or at
// once.
func testPauses(t *testing.T, e *env) {
	s := e.store
	by := inbox.Actor{Name: "ops", Reason: "downstream down"}
	p := inbox.Pause{Scope: inbox.PauseSource, Name: "shop", PausedAt: e.now, Actor: by.Name, Reason: by.Reason}
	if ok := must[bool](t)(s.PauseInsert(e.ctx, p)); !ok {
		t.Fatal("a first pause was refused")
	}
	if ok := must[bool](t)(s.PauseInsert(e.ctx, p)); ok {
		t.Fatal("a second pause of the same source was recorded")
	}
	if _, err := s.PauseInsert(e.ctx, inbox.Pause{Scope: inbox.PauseSource, Name: "x", PausedAt: e.now}); err == nil {
		t.Fatal("a pause without an actor was recorded")
	}
	hp := inbox.Pause{Scope: inbox.PauseHandler, Name: "kind stripe, any type", PausedAt: e.now, Actor: "ops"}
	must[bool](t)(s.PauseInsert(e.ctx, hp))
	ps := must[[]inbox.Pause](t)(s.PauseList(e.ctx))
	if len(ps) != 2 {
		t.Fatalf("pauses: %+v", ps)
	}
	field.Check(t, "pauses",
		field.Eq("[0].Scope", ps[0].Scope, inbox.PauseSource), field.Eq("[0].Name", ps[0].Name, "shop"),
		field.Eq("[0].Actor", ps[0].Actor, "ops"), field.Eq("[0].Reason", ps[0].Reason, "downstream down"),
		field.Eq("[1].Scope", ps[1].Scope, inbox.PauseHandler))

	past, later := e.now.Add(-time.Hour), e.now.Add(time.Hour)
	due := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "shop", NextAttemptAt: past, Now: e.now})
	retry := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "shop", State: inbox.StateRetrying, NextAttemptAt: later, Now: e.now})
	running := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "shop", State: inbox.StateInFlight, Now: e.now})
	factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "shop", State: inbox.StateProcessed, Now: e.now})
	other := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "other", NextAttemptAt: past, Now: e.now})
	hold := inbox.HoldOf(inbox.PauseSource, "shop")

	c := must[storage.HeldCount](t)(s.EventCountHeld(e.ctx, hold, "shop"))
	field.Check(t, "before the hold", field.Eq("Held", c.Held, 0), field.Eq("Waiting", c.Waiting, 2))
	if n := must[int](t)(s.EventHoldSource(e.ctx, "shop")); n != 2 {
		t.Fatalf("held %d events, want the due one and the retrying one", n)
	}
	c = must[storage.HeldCount](t)(s.EventCountHeld(e.ctx, hold, ""))
	field.Check(t, "after the hold", field.Eq("Held", c.Held, 2), field.Eq("Waiting", c.Waiting, 0))
	got := must[*inbox.Event](t)(s.EventGetByID(e.ctx, due.ID))
	field.Check(t, "held event",
		field.Eq("State", got.State(e.now), inbox.StatePaused), field.Eq("HeldBy", got.HeldBy, hold),
		field.Is("HeldDueAt", got.HeldDueAt, got.HeldDueAt != nil && got.HeldDueAt.Equal(due.NextAttemptAt), "its due time"),
		field.Eq("Attempts", got.Attempts, 0))
	if st := must[*inbox.Event](t)(s.EventGetByID(e.ctx, running.ID)).State(e.now); st != inbox.StateInFlight {
		t.Fatalf("the claimed event: %s, want it left to its claim", st)
	}

	// Nothing sees the held events as work: the claim takes the other
	// source's event alone, the wake-up is the retry's of nobody, and
	// the backlog counts them apart.
	tx := must[*storage.Tx](t)(s.Begin(e.ctx))
	claim := must[storage.Claimed](t)(tx.EventClaimBatch(e.ctx, storage.ClaimParams{Now: e.now.Add(2 * time.Hour), Max: 10, BodyBudget: 1 << 20}))
	claimed := claim.Events
	if len(claimed) != 1 || claimed[0].ID != other.ID {
		t.Fatalf("claimed %d events, want only the unpaused source's", len(claimed))
	}
	// The claim's statement names the pauses in force, as the events
	// they hold record them, for the processor to hold what they cover.
	field.Check(t, "claim", field.Printed("Pauses", slices.Sorted(slices.Values(claim.Pauses)),
		[]string{inbox.HoldOf(hp.Scope, hp.Name), inbox.HoldOf(inbox.PauseSource, "shop")}))
	// The processor holds a claimed event a handler's pause covers in the
	// claim's transaction.
	if n := must[int](t)(tx.EventHoldClaimed(e.ctx, []storage.Hold{{ID: other.ID, HeldBy: inbox.HoldOf(hp.Scope, hp.Name)}})); n != 1 {
		t.Fatalf("held %d claimed events", n)
	}
	check(t, tx.Commit(e.ctx))
	b := must[storage.Backlog](t)(s.EventGetBacklog(e.ctx, e.now))
	field.Check(t, "backlog", field.Eq("Paused", b.Paused, int64(3)), field.Eq("Due", b.Due, int64(0)),
		field.Is("OldestDueAt", b.OldestDueAt, b.OldestDueAt == nil, "nil"))
	bs := must[storage.BacklogStats](t)(s.EventGetBacklogStats(e.ctx, e.now))
	field.Check(t, "backlog stats", field.Eq("Paused", bs.Paused, int64(3)), field.Eq("Retrying", bs.Retrying, int64(0)))
	if next := must[*time.Time](t)(s.EventGetNextWake(e.ctx)); next == nil || !next.Before(later) {
		t.Fatalf("next wake-up: %v, want the live event's time, never a held one's", next)
	}

	// The release: the past-due event due at now, the retry at its time.
	pd, ok, err := s.PauseDelete(e.ctx, inbox.PauseSource, "shop")
	if err != nil || !ok || pd.Actor != "ops" {
		t.Fatalf("resume: %+v %v %v", pd, ok, err)
	}
	if _, ok, err := s.PauseDelete(e.ctx, inbox.PauseSource, "shop"); ok || err != nil {
		t.Fatalf("a second resume: %v %v", ok, err)
	}
	if n := must[int](t)(s.EventRelease(e.ctx, hold, e.now)); n != 2 {
		t.Fatalf("released %d events", n)
	}
	for ev, want := range map[int64]time.Time{due.ID: e.now, retry.ID: later} {
		got := must[*inbox.Event](t)(s.EventGetByID(e.ctx, ev))
		field.Check(t, "released event",
			field.Is("NextAttemptAt", got.NextAttemptAt, got.NextAttemptAt.Equal(want), want.String()),
			field.Eq("HeldBy", got.HeldBy, ""), field.Is("HeldDueAt", got.HeldDueAt, got.HeldDueAt == nil, "nil"))
	}
	if n := must[int](t)(s.EventRelease(e.ctx, inbox.HoldOf(hp.Scope, hp.Name), e.now)); n != 1 {
		t.Fatalf("released %d events of the handler's pause", n)
	}
	id := must[int64](t)(s.OperatorActionRecordCounted(e.ctx, inbox.ActionResume, by, map[string]string{"scope": "source", "name": "shop"}, 2))
	act := must[inbox.OperatorAction](t)(s.OperatorActionGetByID(e.ctx, id))
	field.Check(t, "action", field.Eq("Action", act.Action, inbox.ActionResume), field.Eq("Events", act.Events, 2),
		field.Eq("Actor", act.Actor, "ops"), field.Eq("Reason", act.Reason, "downstream down"))
}
