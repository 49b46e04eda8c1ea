package main

import (
	"encoding/json"
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// TestOperatorActionsAreRecorded: a replay, a requeue and an expunge each
// leave their record (who, from --actor, $WEBHOOKCTL_ACTOR or user@host;
// why; the filter; how many events), which actions lists newest first and
// events show lists for the events they touched. Dry runs record nothing.
func TestOperatorActionsAreRecorded(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.withArchive()
	ids := f.populate()

	f.runOK("replay", "--source", "stripe", "--type", "ok", "--dry-run")
	f.runOK("dead-letters", "requeue", "--source", "stripe", "--dry-run")
	var none operations.ActionPage
	f.runJSON(&none, "actions")
	if len(none.Actions) != 0 {
		t.Fatalf("dry runs were recorded: %+v", none.Actions)
	}

	var replayed replayOut
	f.runJSON(&replayed, "replay", "--source", "stripe", "--type", "ok", "--yes", "--actor", "alice", "--reason", "INC-7 bad handler", "--json")
	if replayed.Replayed == 0 {
		t.Fatalf("replay = %+v", replayed)
	}
	f.env[EnvActor] = "ci-job-42"
	f.runOK("dead-letters", "requeue", "--source", "stripe", "--yes")
	delete(f.env, EnvActor)
	f.runOK("expunge", strconv.FormatInt(ids["poison2"], 10), "--yes", "--reason", "erasure request")

	var all operations.ActionPage
	f.runJSON(&all, "actions")
	if len(all.Actions) != 3 {
		t.Fatalf("actions = %+v", all.Actions)
	}
	expunge, requeue, replay := all.Actions[0], all.Actions[1], all.Actions[2]
	me := "unknown"
	if u, err := user.Current(); err == nil {
		me = u.Username
	}
	host, _ := os.Hostname()
	filter := func(a operations.Action) map[string]any {
		var m map[string]any
		_ = json.Unmarshal(a.Filter, &m)
		return m
	}
	field.Check(t, "replay",
		field.Eq("Action", replay.Action, "replay"),
		field.Eq("Actor", replay.Actor, "alice"),
		field.Is("Reason", replay.Reason, replay.Reason != nil && *replay.Reason == "INC-7 bad handler", `"INC-7 bad handler"`),
		field.Eq("Events", replay.Events, replayed.Replayed),
		field.Eq(`filter["type"]`, filter(replay)["type"], nil),
		field.Eq(`filter["event_type"]`, filter(replay)["event_type"], "ok"),
		field.Is("DBUser", replay.DBUser, replay.DBUser != "", "set"),
	)
	field.Check(t, "requeue",
		field.Eq("Action", requeue.Action, "requeue"),
		field.Eq("Actor", requeue.Actor, "ci-job-42"),
		field.Eq("Events", requeue.Events, 2),
		field.Eq(`filter["source"]`, filter(requeue)["source"], "stripe"),
	)
	field.Check(t, "expunge",
		field.Eq("Action", expunge.Action, "expunge"),
		field.Eq("Actor", expunge.Actor, me+"@"+host),
		field.Eq("Events", expunge.Events, 1),
		field.Eq(`filter["id"]`, filter(expunge)["id"], any(float64(ids["poison2"]))),
	)

	// Each event lists the actions that touched it: poison2 was requeued,
	// then expunged.
	var show eventShowOut
	f.runJSON(&show, "events", "show", strconv.FormatInt(ids["poison2"], 10), "--no-body")
	if len(show.Actions) != 2 || show.Actions[0].Action != "requeue" || show.Actions[1].Action != "expunge" {
		t.Fatalf("actions of poison2 = %+v", show.Actions)
	}
	human := f.runOK("events", "show", strconv.FormatInt(ids["poison2"], 10), "--no-body")
	for _, want := range []string{"OPERATOR ACTIONS", "requeue", "ci-job-42", "expunge", "erasure request"} {
		if !strings.Contains(human, want) {
			t.Errorf("events show lacks %q:\n%s", want, human)
		}
	}
	if out := f.runOK("actions", "--limit", "1"); !strings.Contains(out, "expunge") || strings.Contains(out, "INC-7") {
		t.Errorf("actions --limit 1:\n%s", out)
	}
	// An actor's name is text from the command line: it reaches the
	// terminal escaped.
	f.runOK("replay", "--outcome", "unhandled", "--yes", "--actor", "eve\x1b[2J")
	if out := f.runOK("actions"); strings.Contains(out, "\x1b") {
		t.Errorf("control characters reached the terminal: %q", out)
	}
}
