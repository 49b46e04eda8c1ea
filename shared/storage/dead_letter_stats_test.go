package storage_test

import (
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// testDeadLetterOpenStats: the gauge counts open dead letters only, and
// its age is the oldest open one's, whatever was requeued.
func testDeadLetterOpenStats(t *testing.T, e *env) {
	s := e.store
	now := e.now
	if st := must[storage.DeadLetterStats](t)(s.DeadLetterGetOpenStats(e.ctx)); st.Open != 0 || st.OldestDeadAt != nil || st.OldestAge(now) != 0 {
		t.Fatalf("no dead letters: %+v", st)
	}
	hourAgo := now.Add(-time.Hour)
	old := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "shop", Type: "order", State: inbox.StateDead, Now: hourAgo})
	factory.Events(e.ctx, t, s, 2, &factory.EventOpts{Source: "shop", Type: "refund", State: inbox.StateDead, Now: now})
	st := must[storage.DeadLetterStats](t)(s.DeadLetterGetOpenStats(e.ctx))
	if !field.Check(t, "three open",
		field.Eq("Open", st.Open, 3),
		field.Is("OldestDeadAt", st.OldestDeadAt, st.OldestDeadAt != nil && st.OldestDeadAt.Equal(hourAgo), "an hour ago"),
		field.Eq("OldestAge(now+1m)", st.OldestAge(now.Add(time.Minute)), time.Hour+time.Minute),
	) {
		t.FailNow()
	}
	// Requeued, the oldest no longer counts: the gauge ages from the next.
	if n := must[storage.BulkResult](t)(s.DeadLetterRequeue(e.ctx, storage.DeadLetterFilter{Source: "shop", EventType: "order"}, storage.BulkOptions{Now: now, By: inbox.Actor{Name: "ops@test"}})); n.Done != 1 {
		t.Fatalf("requeued %d (event %d)", n.Done, old.ID)
	}
	st = must[storage.DeadLetterStats](t)(s.DeadLetterGetOpenStats(e.ctx))
	if !field.Check(t, "after the requeue",
		field.Eq("Open", st.Open, 2),
		field.Is("OldestDeadAt", st.OldestDeadAt, st.OldestDeadAt != nil && st.OldestDeadAt.Equal(now), "now"),
		field.Eq("OldestAge(now-1s)", st.OldestAge(now.Add(-time.Second)), 0),
	) {
		t.FailNow()
	}
}
