package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
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
	var none, dry, run archiveRunJSON
	f.runJSON(&none, "archive", "run", "--dry-run")
	f.runJSON(&dry, "archive", "run", "--dry-run", "--min-age", "1ms")
	before := f.snapshot()
	out, stderr, err := f.run("archive", "run", "--min-age", "1ms", "--json")
	if err != nil || jsonUnmarshal(out, &run) != nil || stderr != "" {
		// Standard error is not a terminal here: no progress bar, no noise.
		t.Fatalf("archive run: %v\nstdout %s\nstderr %q", err, out, stderr)
	}
	got := changed(before, f.snapshot())
	if none.Archivable != 0 || none.MinAgeSeconds != 7*24*3600 || !dry.DryRun || dry.Archivable != 7 ||
		run.DryRun || run.Events != 7 || run.Archivable != 7 || run.Objects != 2 || len(run.Keys) != 2 ||
		run.BodyBytes == 0 || run.ObjectBytes == 0 || run.Truncated || !sameSet(got, idSet(want...)) {
		t.Fatalf("dry run %+v; run %+v; changed %v", dry, run, got)
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
