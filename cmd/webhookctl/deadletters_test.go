package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

type deadLettersListOut struct {
	DeadLetters []operations.DeadLetter `json:"dead_letters"`
}

type countOut struct {
	DryRun bool `json:"dry_run"`
	Events int  `json:"events"`
}

func TestDeadLettersList(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	ids := f.populate()
	var all, github deadLettersListOut
	f.runJSON(&all, "dead-letters", "list")
	f.runJSON(&github, "dead-letters", "list", "--source", "github", "--since", "1h")
	if len(all.DeadLetters) != 3 || len(github.DeadLetters) != 1 || github.DeadLetters[0].EventPK != ids["ghpoison"] {
		t.Fatalf("dead letters = %+v; github = %+v", all, github)
	}
	d := all.DeadLetters[0]
	if !field.Check(t, "dead letter",
		field.Eq("EventPK", d.EventPK, ids["poison1"]),
		field.Eq("Source", d.Source, "stripe"),
		field.Eq("Type", d.Type, "poison"),
		field.Eq("Attempts", d.Attempts, 1),
		field.Is("LastError", d.LastError, d.LastError != nil, "set"),
		field.Is("Errors", d.Errors, len(d.Errors) == 1 && d.Errors[0].Cause == "permanent_error", "one, cause permanent_error"),
		field.Eq("RequeuedAt", d.RequeuedAt, nil),
	) {
		t.FailNow()
	}
	var one deadLettersListOut
	f.runJSON(&one, "dead-letters", "list", "--id", strconv.FormatInt(d.ID, 10))
	if len(one.DeadLetters) != 1 || one.DeadLetters[0].ID != d.ID {
		t.Fatalf("--id = %+v", one)
	}
	human := f.runOK("dead-letters", "list", "--type", "poison")
	for _, want := range []string{"ID", "EVENT", "LAST ERROR", "evt_poison_1", "gh_poison", "cannot decode"} {
		if !strings.Contains(human, want) {
			t.Errorf("list lacks %q:\n%s", want, human)
		}
	}
	if out := f.runOK("dl", "list", "--source", "nope"); !strings.Contains(out, "no open dead letters") {
		t.Errorf("empty list:\n%s", out)
	}
}

// TestDeadLettersRequeue: the dry run counts what the requeue then sends
// back, exactly: the same events change, and no other.
func TestDeadLettersRequeue(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	ids := f.populate()

	if _, _, err := f.run("dead-letters", "requeue"); err == nil || !strings.Contains(err.Error(), "--all") {
		t.Fatalf("requeue without a filter: %v", err)
	}
	var dry, real countOut
	f.runJSON(&dry, "dead-letters", "requeue", "--source", "stripe", "--dry-run")
	// Without --yes a requeue is a dry run: it counts, says so and
	// changes nothing.
	before := f.snapshot()
	var noYes countOut
	f.runJSON(&noYes, "dead-letters", "requeue", "--source", "stripe")
	out := f.runOK("dead-letters", "requeue", "--source", "stripe")
	if got := changed(before, f.snapshot()); !field.Check(t, "requeue without --yes",
		field.Is("events changed", got, len(got) == 0, "none"),
		field.Eq("DryRun", noYes.DryRun, true),
		field.Eq("Events", noYes.Events, 2),
		field.Is("output", out, strings.Contains(out, "dry run: 2 events would be requeued; run it again with --yes"), "the dry run's line"),
	) {
		t.FailNow()
	}
	// --expect, the count the operator saw, no longer holding: nothing
	// is requeued.
	if _, _, err := f.run("dead-letters", "requeue", "--source", "stripe", "--yes", "--expect", "3"); err == nil || !strings.Contains(err.Error(), "not the 3 confirmed") {
		t.Fatalf("requeue with a stale --expect: %v", err)
	}
	if got := changed(before, f.snapshot()); len(got) != 0 {
		t.Fatalf("a refused requeue changed %v", got)
	}
	f.runJSON(&real, "dead-letters", "requeue", "--source", "stripe", "--yes", "--expect", "2")
	got := changed(before, f.snapshot())
	if !field.Check(t, "requeue",
		field.Eq("dry run DryRun", dry.DryRun, true),
		field.Eq("dry run Events", dry.Events, 2),
		field.Eq("DryRun", real.DryRun, false),
		field.Eq("Events", real.Events, dry.Events),
		field.Is("events changed", got, sameSet(got, idSet(ids["poison1"], ids["poison2"])), "poison1 and poison2"),
	) {
		t.FailNow()
	}
	if n := f.count(`SELECT count(*) FROM webhook_events WHERE id = ANY($1) AND dead_at IS NULL AND attempts = 1 AND failed_attempts = 0 AND solo AND next_attempt_at <= now()`,
		[]int64{ids["poison1"], ids["poison2"]}); n != 2 {
		t.Fatalf("%d requeued events are live and due, want 2", n)
	}
	if n := f.count(`SELECT count(*) FROM webhook_dead_letters WHERE requeued_at IS NOT NULL`); n != 2 {
		t.Fatalf("%d dead letters marked requeued, want 2", n)
	}
	// Nothing is left to requeue there.
	f.runJSON(&dry, "dead-letters", "requeue", "--source", "stripe", "--dry-run")
	if dry.Events != 0 {
		t.Fatalf("second dry run = %+v", dry)
	}

	// One, by the dead letter's id.
	var dl deadLettersListOut
	f.runJSON(&dl, "dead-letters", "list", "--source", "github")
	arg := strconv.FormatInt(dl.DeadLetters[0].ID, 10)
	f.runJSON(&dry, "dead-letters", "requeue", arg, "--dry-run")
	before = f.snapshot()
	out = f.runOK("dead-letters", "requeue", arg, "--yes")
	if got := changed(before, f.snapshot()); dry.Events != 1 || !sameSet(got, idSet(ids["ghpoison"])) || !strings.Contains(out, "requeued 1 events") {
		t.Fatalf("dry run %+v, changed %v, output %s", dry, got, out)
	}

	// The requeued poison dies again: new dead letters, and --all
	// counts them.
	f.drain(nil)
	f.runJSON(&dry, "dead-letters", "requeue", "--all", "--dry-run")
	if dry.Events != 3 {
		t.Fatalf("--all dry run = %+v", dry)
	}
	if out := f.runOK("dead-letters", "requeue", "--all", "--dry-run"); !strings.Contains(out, "dry run: 3 events would be requeued") {
		t.Fatalf("human dry run: %s", out)
	}
	for _, bad := range [][]string{{"x"}, {"1", "--id", "2"}, {"--all", "--since", "-1h"}} {
		if _, _, err := f.run(append([]string{"dead-letters", "requeue"}, bad...)...); err == nil {
			t.Errorf("requeue %v accepted", bad)
		}
	}
}
