package main

import (
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// TestDeadLettersResolve: resolve counts first (without --yes), needs a
// reason, refuses a count that changed, then closes exactly what it
// counted: the events change, the list no longer shows them.
func TestDeadLettersResolve(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	ids := f.populate()
	if _, _, err := f.run("dead-letters", "resolve"); err == nil || !strings.Contains(err.Error(), "--all") {
		t.Fatalf("resolve without a filter: %v", err)
	}
	before := f.snapshot()
	out := f.runOK("dead-letters", "resolve", "--source", "stripe")
	if !strings.Contains(out, "dry run: 2 events would be resolved") || !strings.Contains(out, "--expect 2") {
		t.Fatalf("resolve without --yes:\n%s", out)
	}
	if _, _, err := f.run("dead-letters", "resolve", "--source", "stripe", "--yes"); err == nil || !strings.Contains(err.Error(), "--reason") {
		t.Fatalf("resolve without a reason: %v", err)
	}
	if _, _, err := f.run("dead-letters", "resolve", "--source", "stripe", "--yes", "--reason", "dupes", "--expect", "3"); err == nil ||
		!strings.Contains(err.Error(), "now selects 2") {
		t.Fatalf("resolve with a stale count: %v", err)
	}
	if got := changed(before, f.snapshot()); len(got) != 0 {
		t.Fatalf("a refused resolve changed events %v", got)
	}
	var cause operations.ResolveResult
	f.runJSON(&cause, "dead-letters", "resolve", "--cause", "permanent_error", "--source", "github", "--dry-run")
	var res operations.ResolveResult
	f.runJSON(&res, "dead-letters", "resolve", "--source", "stripe", "--yes", "--reason", "dupes", "--expect", "2")
	got := changed(before, f.snapshot())
	if !field.Check(t, "resolve",
		field.Eq("cause dry run Matched", cause.Matched, 1),
		field.Eq("Matched", res.Matched, 2),
		field.Eq("Resolved", res.Resolved, 2),
		field.Is("events changed", got, sameSet(got, idSet(ids["poison1"], ids["poison2"])), "poison1 and poison2"),
	) {
		t.FailNow()
	}
	if n := f.count(`SELECT count(*) FROM webhook_events WHERE id = ANY($1) AND outcome = 'resolved' AND dead_at IS NULL`,
		[]int64{ids["poison1"], ids["poison2"]}); n != 2 {
		t.Fatalf("%d events resolved, want 2", n)
	}
	var dl deadLettersListOut
	f.runJSON(&dl, "dead-letters", "list")
	if len(dl.DeadLetters) != 1 || dl.DeadLetters[0].EventPK != ids["ghpoison"] {
		t.Fatalf("open dead letters after the resolve = %+v", dl.DeadLetters)
	}
	if out := f.runOK("actions"); !strings.Contains(out, "resolve") || !strings.Contains(out, "dupes") {
		t.Fatalf("actions lack the resolve:\n%s", out)
	}
}

// TestEventsDiscard: discard counts by the error text, then finishes a
// source's unprocessed events, the retrying one and the one a processor
// claimed alike, and nothing else.
func TestEventsDiscard(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	ids := f.populate()
	if _, _, err := f.run("events", "discard"); err == nil || !strings.Contains(err.Error(), "--all") {
		t.Fatalf("discard without a filter: %v", err)
	}
	if out := f.runOK("events", "discard", "--error", "ANSWERED 503"); !strings.Contains(out, "dry run: 1 events would be discarded") {
		t.Fatalf("discard by error text without --yes:\n%s", out)
	}
	if _, _, err := f.run("events", "discard", "--source", "github", "--yes"); err == nil || !strings.Contains(err.Error(), "--reason") {
		t.Fatalf("discard without a reason: %v", err)
	}
	before := f.snapshot()
	out := f.runOK("events", "discard", "--source", "github", "--yes", "--reason", "the tracker is gone", "--expect", "2")
	if got := changed(before, f.snapshot()); !sameSet(got, idSet(ids["flaky"], ids["inflight"])) || !strings.Contains(out, "discarded 2 events") {
		t.Fatalf("changed %v, output %s", got, out)
	}
	if n := f.count(`SELECT count(*) FROM webhook_events WHERE id = ANY($1) AND outcome = 'discarded' AND processed_at IS NOT NULL`,
		[]int64{ids["flaky"], ids["inflight"]}); n != 2 {
		t.Fatalf("%d events discarded, want 2", n)
	}
	var dry operations.DiscardResult
	f.runJSON(&dry, "events", "discard", "--all", "--dry-run")
	if dry.Matched != 1 {
		t.Fatalf("unprocessed events left: %+v, want the stripe one", dry)
	}
	for _, bad := range [][]string{{"x"}, {"1", "--id", "2"}, {"--all", "--since", "-1h"}, {"--ids", "a"}} {
		if _, _, err := f.run(append([]string{"events", "discard"}, bad...)...); err == nil {
			t.Errorf("discard %v accepted", bad)
		}
	}
}
