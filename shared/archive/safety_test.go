package archive_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// at returns a clock stopped at t.
func at(t time.Time) archive.Clock { return clockFunc(func() time.Time { return t }) }

// versions lists every version of every key in the bucket.
func (f *fixture) versions() []blobstore.Version {
	f.t.Helper()
	vs, err := f.blobs.ListVersions(context.Background(), "")
	if err != nil {
		f.t.Fatal(err)
	}
	return vs
}

func (f *fixture) exists(key string) bool {
	f.t.Helper()
	return slices.ContainsFunc(f.objects(), func(o blobstore.Object) bool { return o.Key == key })
}

// TestSweepAgeGuard: an upload that lands after its batch died is named by
// no manifest row; the sweep finds it by listing the bucket, and deletes it
// once it is older than OrphanMinAge, never before. A committed batch's
// object is never swept, however old; an old object whose key a live batch
// holds is left to that batch; a key the archiver does not write is never
// touched. In a versioned bucket the sweep's delete is a delete marker:
// the archiver cannot destroy a version.
func TestSweepAgeGuard(t *testing.T) {
	t.Parallel()
	f := setupVersioned(t)
	ctx := context.Background()
	f.insert("stripe", "evt_1", []byte(`{"id":"evt_1"}`))
	f.process(2 * time.Hour)
	res := f.run(f.archiver(nil))
	if len(res.Keys) != 1 {
		t.Fatalf("archived %+v", res)
	}
	committed := res.Keys[0]
	late := "archive/provider=stripe/dt=2026-01-02/900-901.jsonl.gz"
	held := "archive/provider=stripe/dt=2026-01-02/902-903.jsonl.gz"
	foreign := "archive/provider=stripe/notes.txt"
	for _, k := range []string{late, held, foreign} {
		if _, err := f.blobs.Put(ctx, k, []byte("late upload"), archive.ContentType); err != nil {
			t.Fatal(err)
		}
	}
	// A live batch holds held's manifest row.
	if err := f.store.ArchiveObjectPrepare(ctx, held, "stripe"); err != nil {
		t.Fatal(err)
	}
	batch, err := f.store.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Rollback(ctx)
	if ok, err := batch.ArchiveObjectLockPending(ctx, held); err != nil || !ok {
		t.Fatalf("lock %s: %v %v", held, ok, err)
	}

	uploaded := time.Now()
	guard := 10 * time.Minute
	sweepAt := func(now time.Time) []string {
		t.Helper()
		swept, err := archive.SweepOrphans(ctx, f.archiver(func(c *archive.Config, d *archive.Deps) { c.OrphanMinAge, d.Clock = guard, at(now) }))
		if err != nil {
			t.Fatal(err)
		}
		return swept
	}
	for _, now := range []time.Time{uploaded, uploaded.Add(guard - time.Minute)} {
		if swept := sweepAt(now); len(swept) != 0 || !f.exists(late) {
			t.Fatalf("at +%s, younger than the guard: swept %v", now.Sub(uploaded), swept)
		}
	}
	if swept := sweepAt(uploaded.Add(guard + time.Minute)); !slices.Equal(swept, []string{late}) || f.exists(late) {
		t.Fatalf("past the guard: swept %v, want [%s]", swept, late)
	}
	for _, k := range []string{committed, held, foreign} {
		if !f.exists(k) {
			t.Fatalf("%s was swept", k)
		}
	}
	// The late object's row, recorded by the sweep while it deleted, is gone.
	if _, err := f.store.ArchiveObjectGet(ctx, late); err == nil {
		t.Fatalf("manifest row of %s left", late)
	}
	// The archiver's delete left a marker; the bytes are a noncurrent
	// version, which the bucket's lifecycle expires.
	var marker, kept bool
	for _, v := range f.versions() {
		if v.Key == late {
			marker = marker || (v.DeleteMarker && v.IsLatest)
			kept = kept || (!v.DeleteMarker && !v.IsLatest)
		}
	}
	if !marker || !kept {
		t.Fatalf("versions of %s after the sweep: %+v", late, f.versions())
	}

	// Once the batch died, its old object goes too (by the manifest's pass).
	if err := batch.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if swept := sweepAt(uploaded.Add(1000 * time.Hour)); !slices.Equal(swept, []string{held}) {
		t.Fatalf("after the batch died: swept %v, want [%s]", swept, held)
	}
	if !f.exists(committed) || !f.exists(foreign) {
		t.Fatal("a committed or foreign object was swept")
	}
	if got := f.readBody(f.archiver(nil), "stripe", "evt_1"); string(got) != `{"id":"evt_1"}` {
		t.Fatalf("archived body: %q", got)
	}
}

// TestSweepAgeGuardKeepsAnUploadWhoseCommitIsPending: RunOnce's sweep, even
// with its clock far ahead, never takes the object of a batch between its
// upload and its commit.
func TestSweepAgeGuardKeepsAnUploadWhoseCommitIsPending(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.insert("stripe", "evt_1", []byte(`{"id":"evt_1"}`))
	f.process(2 * time.Hour)
	future := time.Now().Add(1000 * time.Hour)
	a := f.archiver(nil)
	archive.SetAfterConfirm(a, func(ctx context.Context, key string) error {
		// Another archiver sweeps, its clock far ahead, while this batch's
		// upload waits for its commit.
		swept, err := archive.SweepOrphans(ctx, f.archiver(func(c *archive.Config, d *archive.Deps) {
			c.MinAge, c.OrphanMinAge, d.Clock = 24000*time.Hour, time.Minute, at(future)
		}))
		if err != nil || len(swept) != 0 {
			return fmt.Errorf("sweep during the batch: %v, %v", swept, err)
		}
		return nil
	})
	if res := f.run(a); res.Events != 1 {
		t.Fatalf("run: %+v", res)
	}
	f.check()
}

// TestExpungeScrubsEveryCopy: the body is quoted in every place an event's
// data reaches (the event's metadata and last error, each attempt's error,
// the dead letter's history and last error, the archive object, the
// object's earlier version left by a crashed upload at the same key, and
// an orphan upload that no committed batch owns); the expunge leaves no
// trace of it in any table or any version in the bucket, and says what
// it erased and what it cannot reach.
func TestExpungeScrubsEveryCopy(t *testing.T) {
	t.Parallel()
	f := setupVersioned(t)
	ctx := context.Background()
	const marker = "pii-7f3a-marker"
	body := []byte(`{"id":"evt_gdpr","email":"` + marker + `"}`)
	quote := "handler: invalid email " + marker
	long := time.Now().Add(-3 * time.Hour)

	f.insert("stripe", "evt_before", []byte(`{"id":"evt_before"}`))
	// Two failed attempts quoting the body, then a third that dead-letters
	// it, then a requeue, another failure and a success.
	ev := factory.Event(ctx, t, f.store, &factory.EventOpts{Source: "stripe", EventID: "evt_gdpr", Body: body,
		State: inbox.StateRetrying, Attempts: 2, LastError: quote, Metadata: map[string]string{"hook": marker}, Now: long})
	finish := func(r storage.AttemptResult) {
		t.Helper()
		r.ID, r.StartedAt, r.FinishedAt = ev.ID, long, long
		if n, err := f.store.EventFinish(ctx, storage.EventFinishParams{Processor: "test", BatchSize: 1, Results: []storage.AttemptResult{r}}); err != nil || n != 1 {
			t.Fatalf("finish %+v: %d %v", r, n, err)
		}
	}
	finish(storage.AttemptResult{Outcome: inbox.AttemptFailed, Cause: inbox.CauseHandlerFailed, Error: quote, Dead: true})
	if _, err := f.store.EventDeadLetter(ctx, []int64{ev.ID}); err != nil {
		t.Fatal(err)
	}
	if n, err := f.store.DeadLetterRequeue(ctx, storage.DeadLetterFilter{Source: "stripe"}, storage.BulkOptions{Now: long, By: inbox.Actor{Name: "ops"}}); err != nil || n.Done != 1 {
		t.Fatalf("requeue: %d %v", n.Done, err)
	}
	finish(storage.AttemptResult{Outcome: inbox.AttemptFailed, Cause: inbox.CauseHandlerFailed, Error: quote, NextAttemptAt: long})
	finish(storage.AttemptResult{Outcome: inbox.AttemptHandled})
	f.insert("stripe", "evt_after", []byte(`{"id":"evt_after"}`))
	f.process(2 * time.Hour)

	// A crashed upload of the batch, then the batch again: the key has two
	// versions, both with the body.
	crashed := f.archiver(nil)
	archive.CrashAfterUpload(crashed)
	_, _ = crashed.RunOnce(ctx)
	res := f.run(f.archiver(nil))
	if res.Events != 3 || len(res.Keys) != 1 {
		t.Fatalf("archived %+v", res)
	}
	key := res.Keys[0]
	// An upload that landed after its batch died: no row names it.
	orphan := fmt.Sprintf("archive/provider=stripe/dt=2026-01-02/%d-%d.jsonl.gz", ev.ID, ev.ID+5)
	if _, err := f.blobs.Put(ctx, orphan, append([]byte("late copy "), body...), archive.ContentType); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.PayloadMismatchInsert(ctx, inbox.PayloadMismatch{Source: "stripe", EventID: "evt_gdpr", Cause: inbox.CausePayloadMismatch,
		StoredSHA256: ev.BodySHA256, ReceivedSHA256: make([]byte, 32), ReceivedSize: 10}); err != nil {
		t.Fatal(err)
	}
	if !f.holds(marker) {
		t.Fatal("the fixture put the marker nowhere")
	}

	rep, err := f.archiver(nil).Expunge(ctx, "stripe", "evt_gdpr", privacyOfficer)
	if err != nil {
		t.Fatal(err)
	}
	// Archived, the row held no payload or body any more; the rewritten
	// object's two older versions and the orphan's one went for good.
	for _, c := range []struct {
		field     string
		got, want any
	}{
		{"ArchiveKey", rep.ArchiveKey, key}, {"Payload", rep.Payload, false}, {"Body", rep.Body, false},
		{"Metadata", rep.Metadata, true}, {"LastError", rep.LastError, true}, {"AttemptErrors", rep.AttemptErrors, 4},
		{"DeadLetters", rep.DeadLetters, 1}, {"Versions", rep.Versions, 3}, {"AlreadyExpunged", rep.AlreadyExpunged, false},
	} {
		if c.got != c.want {
			t.Errorf("report's %s = %v, want %v", c.field, c.got, c.want)
		}
	}
	if !slices.Equal(rep.Orphans, []string{orphan}) {
		t.Errorf("report's Orphans = %v, want [%s]", rep.Orphans, orphan)
	}
	if f.holds(marker) {
		t.Fatal("a copy of the body survived the expunge")
	}
	// Every version left is a current object: the rewritten one, and the
	// neighbours still read back.
	for _, v := range f.versions() {
		if !v.IsLatest || v.DeleteMarker || v.Key == orphan {
			t.Fatalf("version left: %+v", v)
		}
	}
	if got := f.readBody(f.archiver(nil), "stripe", "evt_after"); string(got) != `{"id":"evt_after"}` {
		t.Fatalf("neighbour: %q", got)
	}
	// The action records what was erased.
	acts, err := f.store.OperatorActionListByEvent(ctx, ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := acts[len(acts)-1]
	var filter struct {
		Scrubbed map[string]any `json:"scrubbed"`
	}
	if err := json.Unmarshal(last.Filter, &filter); err != nil || last.Action != inbox.ActionExpunge ||
		filter.Scrubbed["archive_key"] != key || filter.Scrubbed["attempt_errors"] != float64(4) || filter.Scrubbed["metadata"] != true {
		t.Fatalf("action %+v (%s): %v", last, last.Filter, err)
	}
	// The history keeps its shape: attempts, causes, a redacted text.
	atts, err := f.store.AttemptListByEvent(ctx, ev.ID)
	if err != nil || len(atts) != 5 {
		t.Fatalf("attempts %+v, %v", atts, err)
	}
	for _, a := range atts[:4] {
		if a.Error != storage.Redacted || a.Cause != inbox.CauseHandlerFailed {
			t.Fatalf("attempt %+v", a)
		}
	}
	// Again: nothing left, and no error.
	rep, err = f.archiver(nil).Expunge(ctx, "stripe", "evt_gdpr", privacyOfficer)
	if err != nil {
		t.Fatalf("second expunge: %v", err)
	}
	for _, c := range []struct {
		field     string
		got, want any
	}{
		{"AlreadyExpunged", rep.AlreadyExpunged, true}, {"AttemptErrors", rep.AttemptErrors, 0}, {"DeadLetters", rep.DeadLetters, 0},
		{"Versions", rep.Versions, 0}, {"Orphans", len(rep.Orphans), 0},
	} {
		if c.got != c.want {
			t.Errorf("second expunge's %s = %v, want %v", c.field, c.got, c.want)
		}
	}
	f.check()
}

// holds reports whether s is anywhere in the event tables or in any
// object in the bucket (current objects decompressed, and the size of
// every other version, which cannot be read: any noncurrent version of an
// archive key counts as a copy).
func (f *fixture) holds(s string) bool {
	f.t.Helper()
	ctx := context.Background()
	for _, table := range []string{"webhook_events", "webhook_attempts", "webhook_dead_letters", "webhook_payload_mismatches",
		"webhook_operator_actions", "webhook_archive_objects"} {
		var n int64
		q := fmt.Sprintf(`SELECT count(*) FROM %s t WHERE strpos(to_jsonb(t)::text, $1) > 0`, table)
		if err := f.pool.QueryRow(ctx, q, s).Scan(&n); err != nil {
			f.t.Fatalf("%s: %v", table, err)
		}
		var bodies int64
		if table == "webhook_events" || table == "webhook_dead_letters" {
			q = fmt.Sprintf(`SELECT count(*) FROM %s WHERE strpos(convert_from(body, 'UTF8'), $1) > 0`, table)
			if err := f.pool.QueryRow(ctx, q, s).Scan(&bodies); err != nil {
				f.t.Fatalf("%s: %v", table, err)
			}
		}
		if n+bodies > 0 {
			f.t.Logf("%s: %d rows hold %q", table, n+bodies, s)
			return true
		}
	}
	for _, v := range f.versions() {
		if !v.IsLatest && !v.DeleteMarker {
			f.t.Logf("noncurrent version %s %s", v.Key, v.VersionID)
			return true
		}
	}
	for _, o := range f.objects() {
		data, err := f.blobs.Get(ctx, o.Key)
		if err != nil {
			f.t.Fatal(err)
		}
		plain := string(data)
		if strings.HasSuffix(o.Key, ".jsonl.gz") && len(data) > 2 && data[0] == 0x1f {
			plain = string(zcat(f.t, data))
		}
		if strings.Contains(plain, s) || strings.Contains(string(data), s) {
			f.t.Logf("object %s", o.Key)
			return true
		}
	}
	return false
}
