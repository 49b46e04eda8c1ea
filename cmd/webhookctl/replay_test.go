package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

type replayOut struct {
	DryRun   bool `json:"dry_run"`
	Matched  int  `json:"matched"`
	Replayed int  `json:"replayed"`
	Archived int  `json:"archived"`
}

// TestReplay: a replay by filter changes exactly the events its dry run
// counted, archived ones included, and the processor applies them again.
func TestReplay(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	a1 := f.insert("stripe", "a1", "ok")
	a2 := f.insert("stripe", "a2", "ok")
	gh := f.insert("github", "g1", "ok")
	u1 := f.insert("stripe", "u1", "invoice.created")
	u2 := f.insert("github", "u2", "issues")
	f.drain(nil)
	// A second batch, processed an hour later on the processor's clock:
	// the window a faulty handler was live, say.
	later := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	b1 := f.insert("stripe", "b1", "ok")
	b2 := f.insert("stripe", "b2", "ok")
	f.drain(func() time.Time { return later })
	if n := f.count(`SELECT count(*) FROM applied`); n != 5 {
		t.Fatalf("%d applications before the replay, want 5", n)
	}

	if _, _, err := f.run("replay", "--source", "stripe"); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("replay without --yes: %v", err)
	}
	if _, _, err := f.run("replay", "--dry-run"); err == nil || !strings.Contains(err.Error(), "--all") {
		t.Fatalf("replay without a filter: %v", err)
	}
	if _, _, err := f.run("replay", "--outcome", "failed", "--dry-run"); err == nil {
		t.Fatal("--outcome failed accepted")
	}

	// The window: processed in the last hour of the processor's clock.
	from := later.Add(-time.Minute).UTC().Format(time.RFC3339)
	var dry, real replayOut
	out, stderr, err := f.run("replay", "--source", "stripe", "--outcome", "handled", "--from", from, "--dry-run", "--json")
	if err != nil || !strings.Contains(stderr, "WARNING: a replay runs the handlers again") {
		t.Fatalf("dry run: %v\n%s", err, stderr)
	}
	if err := jsonUnmarshal(out, &dry); err != nil {
		t.Fatal(err)
	}
	before := f.snapshot()
	f.runJSON(&real, "replay", "--source", "stripe", "--outcome", "handled", "--from", from, "--yes")
	got := changed(before, f.snapshot())
	if !field.Check(t, "replay",
		field.Eq("dry run DryRun", dry.DryRun, true),
		field.Eq("dry run Matched", dry.Matched, 2),
		field.Eq("dry run Replayed", dry.Replayed, 0),
		field.Eq("Matched", real.Matched, 2),
		field.Eq("Replayed", real.Replayed, 2),
		field.Is("events changed", got, sameSet(got, idSet(b1, b2)), "b1 and b2"),
	) {
		t.FailNow()
	}
	if n := f.count(`SELECT count(*) FROM webhook_events WHERE id = ANY($1) AND processed_at IS NULL AND outcome IS NULL
	   AND attempts = 1 AND failed_attempts = 0 AND last_error IS NULL AND next_attempt_at <= now()`, []int64{b1, b2}); n != 2 {
		t.Fatalf("%d replayed events are unprocessed and due, want 2", n)
	}
	// The processor applies them again, and only them.
	if st := f.drain(func() time.Time { return later }); st.Handled != 2 {
		t.Fatalf("drain after replay = %+v", st)
	}
	if n := f.count(`SELECT count(*) FROM applied WHERE event_pk = ANY($1)`, []int64{b1, b2}); n != 4 {
		t.Fatalf("replayed events applied %d times in all, want 4", n)
	}

	// Unhandled events, once their handler is deployed; by id; and an
	// archived event is replayed too, counted apart (the processor reads
	// its body back from S3).
	f.runJSON(&dry, "replay", "--outcome", "unhandled", "--dry-run")
	before = f.snapshot()
	f.runJSON(&real, "replay", "--outcome", "unhandled", "--yes")
	if got := changed(before, f.snapshot()); dry.Matched != 2 || real.Replayed != 2 || !sameSet(got, idSet(u1, u2)) {
		t.Fatalf("unhandled: dry %+v, real %+v, changed %v", dry, real, got)
	}
	factory.MarkArchived(f.ctx, t, f.store, "k", a1)
	f.runJSON(&dry, "replay", "--source", "stripe", "--type", "ok", "--dry-run")
	before = f.snapshot()
	f.runJSON(&real, "replay", "--source", "stripe", "--type", "ok", "--yes")
	if got := changed(before, f.snapshot()); !field.Check(t, "with an archived event",
		field.Eq("dry run Matched", dry.Matched, 4),
		field.Eq("dry run Archived", dry.Archived, 1),
		field.Eq("Replayed", real.Replayed, 4),
		field.Eq("Archived", real.Archived, 1),
		field.Is("events changed", got, sameSet(got, idSet(a1, a2, b1, b2)), "a1, a2, b1 and b2"),
	) {
		t.FailNow()
	}
	// The replay is recorded with the events it reset, all of them.
	var acts operations.ActionPage
	f.runJSON(&acts, "actions", "--limit", "1")
	if len(acts.Actions) != 1 || acts.Actions[0].Action != "replay" || acts.Actions[0].Events != real.Replayed {
		t.Fatalf("the replay's record = %+v, want %d events", acts.Actions, real.Replayed)
	}
	f.runJSON(&dry, "replay", strconv.FormatInt(gh, 10), "--dry-run")
	before = f.snapshot()
	human := f.runOK("replay", "--id", strconv.FormatInt(gh, 10), "--yes")
	if got := changed(before, f.snapshot()); dry.Matched != 1 || !sameSet(got, idSet(gh)) || !strings.Contains(human, "replayed 1 events (of 1 matched)") {
		t.Fatalf("by id: dry %+v, changed %v, output %s", dry, got, human)
	}
	// Unprocessed now: a second replay finds nothing.
	f.runJSON(&dry, "replay", "--all", "--dry-run")
	if dry.Matched != 0 {
		t.Fatalf("replay --all after everything was replayed: %+v", dry)
	}
	if out := f.runOK("replay", "--source", "stripe", "--dry-run"); !strings.Contains(out, "dry run: 0 events would be replayed\n") {
		t.Fatalf("human dry run: %s", out)
	}
}

// TestReplayInSeveralCalls: a replay larger than one API call's worth
// (operations.ReplayPerCall) goes on call after call until every event it
// matched is reset, all under one record that counts them all.
func TestReplayInSeveralCalls(t *testing.T) {
	tier.Heavy(t, "ten thousand events replayed")
	t.Parallel()
	f := newOpsFixture(t)
	n := operations.ReplayPerCall + 2
	f.insertMany(n, "stripe", "evt_many_", "ok")
	if st := f.drain(nil); st.Handled != n {
		t.Fatalf("drain = %+v, want %d handled", st, n)
	}
	var real replayOut
	f.runJSON(&real, "replay", "--source", "stripe", "--yes", "--actor", "alice")
	if real.Matched != n || real.Replayed != n || real.DryRun {
		t.Fatalf("replay = %+v, want %d matched and replayed", real, n)
	}
	if left := f.count(`SELECT count(*) FROM webhook_events WHERE processed_at IS NOT NULL`); left != 0 {
		t.Fatalf("%d events left processed", left)
	}
	var acts operations.ActionPage
	f.runJSON(&acts, "actions")
	if len(acts.Actions) != 1 || acts.Actions[0].Events != n || acts.Actions[0].Actor != "alice" {
		t.Fatalf("records = %+v, want one replay of %d events", acts.Actions, n)
	}
	if linked := f.count(`SELECT count(*) FROM webhook_operator_action_events WHERE action_id = $1`, acts.Actions[0].ID); linked != n {
		t.Fatalf("%d events linked to the record, want %d", linked, n)
	}
}
