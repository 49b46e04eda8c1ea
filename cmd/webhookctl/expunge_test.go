package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// TestExpunge: the dry run says what an expunge erases, and the expunge
// erases exactly that: in Postgres and its dead-letter copy, and in an S3
// object (versitygw) without disturbing its neighbour.
func TestExpunge(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.withArchive()
	ids := f.populate()
	dead := strconv.FormatInt(ids["poison1"], 10)

	before := f.snapshot()
	if _, _, err := f.run("expunge", dead); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("expunge without --yes: %v", err)
	}
	var dry, done operations.ExpungeResult
	f.runJSON(&dry, "expunge", dead, "--dry-run")
	if got := changed(before, f.snapshot()); len(got) != 0 {
		t.Fatalf("refused and dry runs changed %v", got)
	}
	if !field.Check(t, "dry run",
		field.Eq("DryRun", dry.DryRun, true),
		field.Eq("ID", dry.ID, ids["poison1"]),
		field.Eq("BodyInPostgres", dry.BodyInPostgres, true),
		field.Eq("PayloadStored", dry.PayloadStored, true),
		field.Eq("ArchiveKey", dry.ArchiveKey, nil),
		field.Eq("DeadLetterCopies", dry.DeadLetterCopies, 1),
		field.Eq("AlreadyExpunged", dry.AlreadyExpunged, false),
		field.Eq("ExpungedAt", dry.ExpungedAt, nil),
	) {
		t.FailNow()
	}
	f.runJSON(&done, "expunge", dead, "--yes")
	if got := changed(before, f.snapshot()); !sameSet(got, idSet(ids["poison1"])) {
		t.Fatalf("expunge changed %v", got)
	}
	if !field.Check(t, "expunge (against its dry run)",
		field.Eq("DryRun", done.DryRun, false),
		field.Is("ExpungedAt", done.ExpungedAt, done.ExpungedAt != nil, "set"),
		field.Eq("DeadLetterCopies", done.DeadLetterCopies, dry.DeadLetterCopies),
		field.Eq("BodyInPostgres", done.BodyInPostgres, dry.BodyInPostgres),
		field.Is("dry run AttemptErrors", dry.AttemptErrors, dry.AttemptErrors != 0, "some"),
		field.Eq("AttemptErrors", done.AttemptErrors, dry.AttemptErrors),
		field.Eq("dry run LastErrorStored", dry.LastErrorStored, true),
		field.Eq("LastErrorStored", done.LastErrorStored, true),
		field.Is("NotReached", done.NotReached, len(done.NotReached) != 0, "listed"),
		field.Is("OrphanObjects", done.OrphanObjects, done.OrphanObjects != nil, "non-nil"),
	) {
		t.FailNow()
	}
	if n := f.count(`SELECT count(*) FROM webhook_attempts WHERE event_pk = $1 AND error NOT IN ('', '[expunged]')`, ids["poison1"]); n != 0 {
		t.Fatalf("%d attempt error texts left", n)
	}
	if n := f.count(`SELECT count(*) FROM webhook_events WHERE id = $1 AND body IS NULL AND payload IS NULL AND expunged_at IS NOT NULL`, ids["poison1"]); n != 1 {
		t.Fatal("the event's body is still there")
	}
	if n := f.count(`SELECT count(*) FROM webhook_dead_letters WHERE body IS NOT NULL OR payload IS NOT NULL`); n != 2 {
		t.Fatalf("%d dead letters keep a body, want the 2 others", n)
	}
	// Again: nothing left, harmless.
	f.runJSON(&dry, "expunge", dead, "--dry-run")
	if !field.Check(t, "second dry run",
		field.Eq("AlreadyExpunged", dry.AlreadyExpunged, true),
		field.Eq("DeadLetterCopies", dry.DeadLetterCopies, 0),
		field.Eq("AttemptErrors", dry.AttemptErrors, 0),
		field.Eq("LastErrorStored", dry.LastErrorStored, false),
	) {
		t.FailNow()
	}
	if out := f.runOK("expunge", "stripe", "evt_poison_1", "--yes"); !strings.Contains(out, "already expunged") {
		t.Fatalf("second expunge: %s", out)
	}

	// An archived event: its object is rewritten without it; the other
	// event of the object still reads back.
	var run operations.ArchiveRunResult
	f.runJSON(&run, "archive", "run", "--min-age", "1ms")
	var e eventShowOut
	f.runJSON(&e, "events", "show", "stripe", "evt_ok_1", "--no-body")
	if e.ArchiveKey == nil {
		t.Fatalf("not archived: %+v (run %+v)", e, run)
	}
	f.runJSON(&dry, "expunge", "stripe", "evt_ok_1", "--dry-run")
	if !field.Check(t, "dry run of an archived event",
		field.Is("ArchiveKey", dry.ArchiveKey, dry.ArchiveKey != nil && *dry.ArchiveKey == *e.ArchiveKey, *e.ArchiveKey),
		field.Eq("BodyInPostgres", dry.BodyInPostgres, false),
		field.Eq("DeadLetterCopies", dry.DeadLetterCopies, 0),
	) {
		t.FailNow()
	}
	before = f.snapshot()
	human := f.runOK("expunge", "stripe", "evt_ok_1", "--yes")
	if got := changed(before, f.snapshot()); !sameSet(got, idSet(ids["ok1"])) || !strings.Contains(human, "archived body in "+*e.ArchiveKey+": erased") ||
		!strings.Contains(human, "not reached by expunge") || !strings.Contains(human, "log group") {
		t.Fatalf("changed %v; output %s", got, human)
	}
	var gone, neighbour eventShowOut
	f.runJSON(&gone, "events", "show", "stripe", "evt_ok_1")
	f.runJSON(&neighbour, "events", "show", "stripe", "evt_ok_2")
	if gone.State != "expunged" || gone.Body != nil || !strings.Contains(gone.BodyError, "expunged") {
		t.Fatalf("expunged event = %+v", gone)
	}
	if !field.Check(t, "neighbour",
		field.Eq("BodyFrom", neighbour.BodyFrom, "archive"),
		field.Is("Body", neighbour.Body, neighbour.Body != nil && *neighbour.Body == `{"id":"evt_ok_2","type":"ok"}`, `{"id":"evt_ok_2","type":"ok"}`),
		field.Eq("ArchiveKey", *neighbour.ArchiveKey, *e.ArchiveKey),
	) {
		t.FailNow()
	}
	// The object no longer holds the body.
	data, err := f.blobs().Get(f.ctx, *e.ArchiveKey)
	if err != nil || strings.Contains(gunzipAll(t, data), "evt_ok_1") || !strings.Contains(gunzipAll(t, data), "evt_ok_2") {
		t.Fatalf("object after expunge: %v", err)
	}

	// Expunge needs the archive's settings.
	delete(f.env, "ARCHIVE_BUCKET")
	if _, _, err := f.run("expunge", "stripe", "evt_ok_2", "--yes"); err == nil || !strings.Contains(err.Error(), "ARCHIVE_BUCKET") {
		t.Fatalf("expunge without settings: %v", err)
	}
	if _, _, err := f.run("expunge", "stripe", "evt_none", "--dry-run"); err == nil || !strings.Contains(err.Error(), "no such event") {
		t.Fatalf("unknown event: %v", err)
	}
}

// expunge --help once named a policy the template does not
// define. Every IAM resource-like name in the help (…Policy, …Role,
// …Function) is a resource or an output of template.yaml.
func TestExpungeHelpNamesOnlyTheTemplatesResources(t *testing.T) {
	out, err := run(t, nil, "expunge", "--help")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile("template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range regexp.MustCompile(`\b[A-Z][a-z]+[A-Za-z]*(Policy|Role|Function)\b`).FindAllString(out, -1) {
		if !regexp.MustCompile(`(?m)^  ` + name + `:`).Match(tmpl) {
			t.Errorf("expunge --help names %s, which template.yaml neither defines nor outputs", name)
		}
	}
	if !strings.Contains(out, "the acting function does it\nwith its own rights") {
		t.Errorf("expunge --help no longer says whose rights expunge runs with:\n%s", out)
	}
}
