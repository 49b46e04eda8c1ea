package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// blobs opens the fixture's bucket.
func (f *opsFixture) blobs() *blobstore.Store {
	f.t.Helper()
	return s3test.Open(f.t, *f.s3)
}

// gunzipAll reads every member of a .jsonl.gz object.
func gunzipAll(t *testing.T, data []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestArchiveRun: one archiver pass now; its dry run counts what the run
// then archives, exactly.
func TestArchiveRun(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.withArchive()
	var want []int64
	for _, id := range []string{"s1", "s2", "s3", "s4", "s5"} {
		want = append(want, f.insert("stripe", id, "ok"))
	}
	want = append(want, f.insert("github", "g1", "ok"), f.insert("github", "g2", "issues"))
	f.drain(nil)
	// One event unprocessed: nothing to archive there.
	f.insert("stripe", "later", "ok")

	// The default minimum age (7 days) leaves everything in Postgres.
	var none, dry, run operations.ArchiveRunResult
	f.runJSON(&none, "archive", "run", "--dry-run")
	f.runJSON(&dry, "archive", "run", "--dry-run", "--min-age", "1ms")
	before := f.snapshot()
	out, stderr, err := f.run("archive", "run", "--min-age", "1ms", "--json")
	if err != nil || jsonUnmarshal(out, &run) != nil || stderr != "" {
		// Standard error is not a terminal here: no progress bar, no noise.
		t.Fatalf("archive run: %v\nstdout %s\nstderr %q", err, out, stderr)
	}
	got := changed(before, f.snapshot())
	if !field.Check(t, "archive run",
		field.Eq("default Archivable", none.Archivable, 0),
		field.Eq("default MinAgeSeconds", none.MinAgeSeconds, 7*24*3600),
		field.Eq("dry run DryRun", dry.DryRun, true),
		field.Eq("dry run Archivable", dry.Archivable, 7),
		field.Eq("run DryRun", run.DryRun, false),
		field.Eq("run Events", run.Events, 7),
		field.Eq("run Archivable", run.Archivable, 7),
		field.Eq("run Objects", run.Objects, 2),
		field.Eq("run len(Keys)", len(run.Keys), 2),
		field.Is("run BodyBytes", run.BodyBytes, run.BodyBytes != 0, "some"),
		field.Is("run ObjectBytes", run.ObjectBytes, run.ObjectBytes != 0, "some"),
		field.Eq("run Truncated", run.Truncated, false),
		field.Is("events changed", got, sameSet(got, idSet(want...)), "the 7 archivable"),
	) {
		t.FailNow()
	}
	for _, k := range run.Keys {
		if _, err := f.blobs().Head(f.ctx, k); err != nil || !strings.HasPrefix(k, "archive/provider=") {
			t.Fatalf("object %s: %v", k, err)
		}
	}
	if n := f.count(`SELECT count(*) FROM webhook_events WHERE archived_at IS NOT NULL AND body IS NULL`); n != 7 {
		t.Fatalf("%d events archived, want 7", n)
	}
	// Nothing left.
	f.runJSON(&run, "archive", "run", "--min-age", "1ms")
	if run.Events != 0 || run.Archivable != 0 {
		t.Fatalf("second run = %+v", run)
	}

	// --max-batches stops early and says so.
	if done := factory.ProcessDue(f.ctx, t, f.store, time.Now().Add(-time.Hour)); len(done) != 1 || done[0].EventID != "later" {
		t.Fatalf("processed %d events, want the one left", len(done))
	}
	f.insert("github", "g3", "ok")
	f.drain(nil)
	human := f.runOK("archive", "run", "--min-age", "1ms", "--max-batches", "1")
	if !strings.Contains(human, "archived 1 events in 1 objects") || !strings.Contains(human, "stopped early") {
		t.Fatalf("--max-batches 1: %s", human)
	}

	// The archive's settings are required, and an S3 outage fails the
	// run without clearing anything.
	delete(f.env, "ARCHIVE_BUCKET")
	if _, _, err := f.run("archive", "run"); err == nil || !strings.Contains(err.Error(), "ARCHIVE_BUCKET") {
		t.Fatalf("without a bucket: %v", err)
	}
}

func TestArchiveRunS3Outage(t *testing.T) {
	tier.Heavy(t, "an S3 outage")
	t.Parallel()
	f := newOpsFixture(t)
	f.withArchive()
	f.insert("stripe", "s1", "ok")
	f.drain(nil)
	f.env["S3_ENDPOINT"] = "http://127.0.0.1:1" // nothing listens there
	before := f.snapshot()
	_, _, err := f.run("archive", "run", "--min-age", "1ms")
	if err == nil || !strings.Contains(err.Error(), "nothing of the failed batch was cleared") {
		t.Fatalf("run with S3 down: %v", err)
	}
	if got := changed(before, f.snapshot()); len(got) != 0 {
		t.Fatalf("a failed run changed %v", got)
	}
}

// TestArchiveRunInSeveralCalls: one API call writes at most
// operations.ArchiveBatchesPerCall objects; a run goes on call after call
// within --max-batches, and stops when nothing is left to archive.
func TestArchiveRunInSeveralCalls(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.withArchive()
	f.env["ARCHIVE_BATCH_SIZE"] = "1" // one object per event
	per := operations.ArchiveBatchesPerCall
	n := 2*per + 5
	f.insertMany(n, "stripe", "evt_arch_", "ok")
	if st := f.drain(nil); st.Handled != n {
		t.Fatalf("drain = %+v, want %d handled", st, n)
	}

	// Bounded past one call: per objects, then one more, then it stops.
	var first operations.ArchiveRunResult
	f.runJSON(&first, "archive", "run", "--min-age", "1ms", "--max-batches", strconv.Itoa(per+1))
	if !field.Check(t, "--max-batches "+strconv.Itoa(per+1),
		field.Eq("Archivable", first.Archivable, int64(n)),
		field.Eq("Events", first.Events, per+1),
		field.Eq("Objects", first.Objects, per+1),
		field.Eq("len(Keys)", len(first.Keys), per+1),
		field.Eq("Truncated", first.Truncated, true),
	) {
		t.FailNow()
	}
	// A bound above what is left: call after call until nothing is.
	var rest operations.ArchiveRunResult
	f.runJSON(&rest, "archive", "run", "--min-age", "1ms", "--max-batches", strconv.Itoa(10*per))
	left := n - (per + 1)
	if !field.Check(t, "--max-batches "+strconv.Itoa(10*per)+", want the "+strconv.Itoa(left)+" left",
		field.Eq("Archivable", rest.Archivable, int64(left)),
		field.Eq("Events", rest.Events, left),
		field.Eq("Objects", rest.Objects, left),
		field.Eq("len(Keys)", len(rest.Keys), left),
		field.Eq("Truncated", rest.Truncated, false),
	) {
		t.FailNow()
	}
	keys := map[string]bool{}
	for _, k := range append(first.Keys, rest.Keys...) {
		keys[k] = true
	}
	if len(keys) != n {
		t.Fatalf("%d distinct objects, want %d", len(keys), n)
	}
	if archived := f.count(`SELECT count(*) FROM webhook_events WHERE archived_at IS NOT NULL AND body IS NULL`); archived != n {
		t.Fatalf("%d events archived, want %d", archived, n)
	}
	var none operations.ArchiveRunResult
	f.runJSON(&none, "archive", "run", "--min-age", "1ms")
	if none.Archivable != 0 || none.Events != 0 || none.Truncated {
		t.Fatalf("a run with nothing left = %+v", none)
	}
	if human := f.runOK("archive", "run", "--min-age", "1ms"); !strings.Contains(human, "archived 0 events in 0 objects") || strings.Contains(human, "stopped early") {
		t.Fatalf("a run with nothing left:\n%s", human)
	}
	for _, bad := range [][]string{{"--max-batches", "-1"}, {"--min-age", "0"}, {"--min-age", "soon"}} {
		if _, _, err := f.run(append([]string{"archive", "run"}, bad...)...); err == nil {
			t.Errorf("archive run %v accepted", bad)
		}
	}
}

// TestArchiveSettingsWhenGiven: a command that does not touch the archive
// works without its settings; once its bucket is named, its settings are
// read as the archiver reads them, and a bad one is said, naming it.
func TestArchiveSettingsWhenGiven(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.insert("stripe", "evt_1", "ok")
	f.runOK("stats")
	f.runOK("events", "show", "stripe", "evt_1")
	f.withArchive()
	f.env["ARCHIVE_MIN_AGE"] = "soon"
	for _, args := range [][]string{{"stats"}, {"events", "list"}, {"archive", "run", "--dry-run"}} {
		if _, _, err := f.run(args...); err == nil || !strings.Contains(err.Error(), "ARCHIVE_MIN_AGE") {
			t.Errorf("%v with ARCHIVE_MIN_AGE=soon: %v", args, err)
		}
	}
}
