package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
)

// A source paused from the command line holds its events, which list as
// paused and show on stats, while the processor runs the others; pausing
// it again is refused with its cause; resumed, its events are applied
// once.
func TestSourcesPauseAndResume(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	held := f.insert("stripe", "evt_1", "ok")
	f.insert("stripe", "evt_2", "ok")
	f.insert("github", "gh_1", "ok")

	if out := f.runOK("sources", "pause", "stripe", "--dry-run"); !strings.Contains(out, `dry run: pausing source "stripe" would hold 2 waiting events now (not paused now)`) {
		t.Fatalf("dry run:\n%s", out)
	}
	out := f.runOK("sources", "pause", "stripe", "--actor", "alice", "--reason", "ERP migration")
	if !strings.Contains(out, `paused source "stripe": 2 waiting events held`) {
		t.Fatalf("pause:\n%s", out)
	}
	if st := f.drain(nil); st.Handled != 1 {
		t.Fatalf("drain while paused handled %d events, want only github's", st.Handled)
	}
	list := f.runOK("events", "list", "--state", "paused")
	for _, want := range []string{"evt_1", "evt_2", "paused", "held by source stripe"} {
		if !strings.Contains(list, want) {
			t.Errorf("paused list lacks %q:\n%s", want, list)
		}
	}
	stats := f.runOK("stats")
	for _, want := range []string{"paused 2", "paused source", "by alice: ERP migration"} {
		if !strings.Contains(stats, want) {
			t.Errorf("stats lacks %q:\n%s", want, stats)
		}
	}
	if _, _, err := f.run("sources", "pause", "stripe"); inbox.CauseOf(err) != inbox.CauseAlreadyPaused {
		t.Fatalf("a second pause: %v", err)
	}
	if _, _, err := f.run("sources", "pause", "two", "words"); err == nil {
		t.Fatal("a source's name of two words was taken")
	}

	var res operations.PauseResult
	f.runJSON(&res, "sources", "resume", "stripe", "--reason", "migrated")
	field.Check(t, "resume", field.Eq("Events", res.Events, 2), field.Eq("Paused", res.Paused, false), field.Eq("Scope", res.Scope, inbox.PauseSource))
	if _, _, err := f.run("sources", "resume", "stripe"); inbox.CauseOf(err) != inbox.CauseNotPaused {
		t.Fatalf("a second resume: %v", err)
	}
	if st := f.drain(nil); st.Handled != 2 {
		t.Fatalf("drain after the resume handled %d events, want 2", st.Handled)
	}
	if n := f.count(`SELECT count(*) FROM applied WHERE event_pk = $1`, held); n != 1 {
		t.Fatalf("event applied %d times, want once", n)
	}
	acts := f.runOK("actions")
	for _, want := range []string{"pause", "resume", "ERP migration"} {
		if !strings.Contains(acts, want) {
			t.Errorf("actions lack %q:\n%s", want, acts)
		}
	}
}

// A handler is paused by its route as 'webhookctl handlers' prints it,
// quoted or in words; what is no route is refused before anything
// changes.
func TestHandlersPauseAndResume(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.insert("stripe", "evt_ok", "ok")
	f.insert("stripe", "evt_flaky", "flaky")
	out, errOut, err := f.run("handlers", "pause", "kind", "stripe,", "type", "flaky", "--reason", "503s")
	if err != nil || !strings.Contains(out, `paused handler "kind stripe, type flaky": its events are held as the processor meets them`) {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	// The routes compiled into webhookctl are the application's
	// (shared/handlers), not the test's registry: a note says when the
	// route is not among them.
	reg := processor.NewRegistry()
	handlers.Register(reg)
	compiled := slices.ContainsFunc(reg.Routes(), func(rt processor.Route) bool { return rt.String() == "kind stripe, type flaky" })
	if noted := strings.Contains(errOut, `note: no route "kind stripe, type flaky" is compiled into this webhookctl`); noted == compiled {
		t.Errorf("the note on a route webhookctl does not know (compiled: %v):\n%s", compiled, errOut)
	}
	if st := f.drain(nil); st.Handled != 1 || st.Held != 1 || st.Retried != 0 {
		t.Fatalf("drain while the handler is paused: %+v", st)
	}
	if _, _, err := f.run("handlers", "pause", "stripe"); inbox.CauseOf(err) != inbox.CauseInvalidArgument {
		t.Fatalf("a pause of no route: %v", err)
	}
	if out := f.runOK("handlers", "resume", "kind stripe, type flaky"); !strings.Contains(out, `resumed handler "kind stripe, type flaky": 1 events released`) {
		t.Fatalf("resume:\n%s", out)
	}
}
