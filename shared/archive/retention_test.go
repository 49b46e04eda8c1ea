package archive_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

const retention = 30 * 24 * time.Hour

// retentionFixture is a database holding, by source:
//   - old: two events received 40 days ago (past retention);
//   - mixed: one received 40 days ago, one a day ago;
//   - fresh: two received a day ago;
//   - late: one received 40 days ago and processed just now, so not yet
//     archivable (its body is still in Postgres);
//   - dead: one received 40 days ago that never ran to completion.
//
// Each of old, mixed and fresh is one archive object once archived.
type retentionFixture struct {
	*fixture
	bodies map[string][]byte // by source/event id
}

func setupRetention(t *testing.T) *retentionFixture {
	t.Helper()
	f := &retentionFixture{fixture: setup(t), bodies: map[string][]byte{}}
	now := time.Now()
	past, recent := now.Add(-40*24*time.Hour), now.Add(-24*time.Hour)
	add := func(source, id string, received time.Time, state inbox.EventState, processed time.Time) {
		body := []byte(`{"id":"` + id + `","email":"someone@example.com"}`)
		opts := &factory.EventOpts{Source: source, EventID: id, Type: "customer.updated", Body: body, CreatedAt: received,
			State: state, Metadata: map[string]string{"account": "acct_1"}}
		if state == inbox.StateProcessed {
			opts.ProcessedAt = &processed
		}
		factory.Event(context.Background(), t, f.store, opts)
		f.bodies[source+"/"+id] = body
	}
	twoHoursAgo := now.Add(-2 * time.Hour)
	add("old", "o1", past, inbox.StateProcessed, twoHoursAgo)
	add("old", "o2", past.Add(time.Hour), inbox.StateProcessed, twoHoursAgo)
	add("mixed", "m1", past, inbox.StateProcessed, twoHoursAgo)
	add("mixed", "m2", recent, inbox.StateProcessed, twoHoursAgo)
	add("fresh", "f1", recent, inbox.StateProcessed, twoHoursAgo)
	add("fresh", "f2", recent, inbox.StateProcessed, twoHoursAgo)
	add("late", "l1", past, inbox.StateProcessed, now)
	add("dead", "d1", past, inbox.StateDead, time.Time{})
	return f
}

func (f *retentionFixture) retaining(mod func(*archive.Config, *archive.Deps)) *archive.Archiver {
	return f.archiver(func(c *archive.Config, d *archive.Deps) {
		c.BodyRetention = retention
		if mod != nil {
			mod(c, d)
		}
	})
}

// event reads source/id's row.
func (f *retentionFixture) event(source, id string) *inbox.Event {
	f.t.Helper()
	e, err := f.store.EventGetByKey(context.Background(), source, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return e
}

// inBucket says whether the bucket holds key.
func (f *retentionFixture) inBucket(key string) bool {
	for _, o := range f.objects() {
		if o.Key == key {
			return true
		}
	}
	return false
}

// TestRetentionDeletesObjectsWhollyPastIt: a run deletes exactly the
// object whose events are all past retention and marks its rows, clears
// the body still in Postgres of a processed event past it, and leaves the
// object with one event within retention, the fresh one, and an event that
// never finished. The rows keep their key, hash and metadata.
func TestRetentionDeletesObjectsWhollyPastIt(t *testing.T) {
	t.Parallel()
	f := setupRetention(t)
	ctx := context.Background()
	a := f.retaining(nil)
	res := f.run(a)
	field.Check(t, "run", field.Eq("Batches", res.Batches, 3), field.Eq("ExpiredObjects", res.ExpiredObjects, 1),
		field.Eq("ExpiredEvents (old's two, late's one)", res.ExpiredEvents, 3), field.Eq("Truncated", res.Truncated, false))

	oldKey := f.event("old", "o1").ArchiveKey
	if oldKey == "" || f.inBucket(oldKey) {
		t.Errorf("old's object %q: still in the bucket", oldKey)
	}
	for _, src := range []string{"mixed", "fresh"} {
		if key := f.event(src, src[:1]+"1").ArchiveKey; key == "" || !f.inBucket(key) {
			t.Errorf("%s's object %q: gone, though an event in it is within retention", src, key)
		}
	}
	for _, ref := range []string{"old/o1", "old/o2", "late/l1"} {
		src, id, _ := strings.Cut(ref, "/")
		e := f.event(src, id)
		sum := sha256.Sum256(f.bodies[ref])
		field.Check(t, ref,
			field.Is("BodyExpiredAt", e.BodyExpiredAt, e.BodyExpiredAt != nil, "set"),
			field.Is("Body", len(e.Body), e.Body == nil, "nil"),
			field.Is("Payload", len(e.Payload), e.Payload == nil, "nil"),
			field.Is("BodySHA256", e.BodySHA256, bytes.Equal(e.BodySHA256, sum[:]), "the hash recorded at receipt"),
			field.Eq("Metadata account", e.Metadata["account"], "acct_1"),
			field.Eq("EventID", e.EventID, id))
		_, err := a.Body(ctx, e)
		if inbox.CauseOf(err) != inbox.CauseBodyExpired {
			t.Errorf("%s: read gives %v, want cause body_expired", ref, err)
		}
	}
	for _, ref := range []string{"mixed/m1", "mixed/m2", "fresh/f1", "dead/d1"} {
		src, id, _ := strings.Cut(ref, "/")
		e := f.event(src, id)
		if e.BodyExpiredAt != nil {
			t.Errorf("%s: marked expired", ref)
		}
		if got, err := a.Body(ctx, e); err != nil || !bytes.Equal(got, f.bodies[ref]) {
			t.Errorf("%s: read gives %q, %v; want its body", ref, got, err)
		}
	}
	if o, err := f.store.ArchiveObjectGet(ctx, oldKey); err != nil || o.ExpiredAt == nil {
		t.Errorf("old's manifest row: %+v, %v; want expired", o, err)
	}
	if st, err := f.store.ArchiveObjectGetStats(ctx); err != nil || st.Objects != 2 {
		t.Errorf("stats: %+v, %v; want the 2 objects still stored", st, err)
	}
	f.check()

	// A second run finds nothing more to do.
	again := f.run(a)
	field.Check(t, "second run", field.Eq("ExpiredObjects", again.ExpiredObjects, 0), field.Eq("ExpiredEvents", again.ExpiredEvents, 0),
		field.Eq("Batches", again.Batches, 0))
	if n := len(f.objects()); n != 2 {
		t.Errorf("after the second run the bucket holds %d objects, want 2", n)
	}
	f.check()
}

// TestRetentionKeepsDeduplication: a redelivery of an event whose body
// expired is still a duplicate (the key and hash stay), and new events are
// stored as ever.
func TestRetentionKeepsDeduplication(t *testing.T) {
	t.Parallel()
	f := setupRetention(t)
	ctx := context.Background()
	f.run(f.retaining(nil))
	for _, ref := range []string{"old/o1", "late/l1"} {
		src, id, _ := strings.Cut(ref, "/")
		res, err := f.store.EventInsert(ctx, storage.EventInsertParams{Source: src, EventID: id, EventType: "customer.updated", Body: f.bodies[ref]})
		if err != nil {
			t.Fatal(err)
		}
		stored := f.event(src, id)
		field.Check(t, "redelivery of "+ref, field.Eq("Inserted", res.Inserted, false), field.Eq("ID", res.ID, stored.ID),
			field.Is("StoredSHA256", res.StoredSHA256, bytes.Equal(res.StoredSHA256, res.BodySHA256[:]), "the hash received now"))
	}
	res, err := f.store.EventInsert(ctx, storage.EventInsertParams{Source: "old", EventID: "o3", EventType: "customer.updated", Body: []byte(`{"id":"o3"}`)})
	if err != nil || !res.Inserted {
		t.Fatalf("a new event after the retention run: %+v, %v", res, err)
	}
}

// TestRetentionIsOffByDefault: without a retention nothing expires,
// however old.
func TestRetentionIsOffByDefault(t *testing.T) {
	t.Parallel()
	f := setupRetention(t)
	res := f.run(f.archiver(nil))
	field.Check(t, "run", field.Eq("Batches", res.Batches, 3), field.Eq("ExpiredObjects", res.ExpiredObjects, 0), field.Eq("ExpiredEvents", res.ExpiredEvents, 0))
	if n := f.int(`SELECT count(*) FROM webhook_events WHERE body_expired_at IS NOT NULL`); n != 0 {
		t.Errorf("%d rows marked expired", n)
	}
	if n := len(f.objects()); n != 3 {
		t.Errorf("the bucket holds %d objects, want 3", n)
	}
}

// TestRetentionInterruptedAfterTheDelete: S3 deletes the object but the
// archiver never hears so (the answer is lost), so the transaction that
// marks the rows rolls back: the object is gone and its rows unmarked. The
// next run deletes it again (nothing to delete) and marks them.
func TestRetentionInterruptedAfterTheDelete(t *testing.T) {
	t.Parallel()
	f := setupRetention(t)
	ctx := context.Background()
	f.run(f.archiver(nil)) // the three objects, nothing expired
	oldKey := f.event("old", "o1").ArchiveKey

	// A proxy that passes every request on and loses the answer to a
	// DELETE: S3 did it, the archiver sees a failure.
	target, err := url.Parse(f.s3cfg.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	var deletes []string
	proxy.ModifyResponse = func(r *http.Response) error {
		if r.Request.Method == http.MethodDelete {
			mu.Lock()
			deletes = append(deletes, r.Request.URL.Path)
			mu.Unlock()
			return errors.New("answer lost")
		}
		return nil
	}
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	cfg := withOneAttempt(f.s3cfg)
	cfg.Endpoint = srv.URL
	lossy := f.retaining(func(_ *archive.Config, d *archive.Deps) { d.Blobs = s3test.Open(t, cfg) })
	res, err := lossy.RunOnce(ctx)
	if err == nil || res.ExpiredObjects != 0 {
		t.Fatalf("run whose delete answer is lost: %+v, %v; want a failure, nothing expired", res, err)
	}
	mu.Lock()
	n := len(deletes)
	mu.Unlock()
	if n != 1 || f.inBucket(oldKey) {
		t.Fatalf("deletes passed on: %d; old's object still stored: %v; want it deleted once", n, f.inBucket(oldKey))
	}
	if e := f.event("old", "o1"); e.BodyExpiredAt != nil {
		t.Fatal("rows marked though the run failed")
	}

	res = f.run(f.retaining(nil))
	field.Check(t, "next run", field.Eq("ExpiredObjects", res.ExpiredObjects, 1), field.Eq("ExpiredEvents", res.ExpiredEvents, 3))
	for _, id := range []string{"o1", "o2"} {
		if e := f.event("old", id); e.BodyExpiredAt == nil {
			t.Errorf("old/%s: not marked by the next run", id)
		}
	}
	f.check()
}

// TestConcurrentRetentionPasses: archivers running at once expire each
// object once between them.
func TestConcurrentRetentionPasses(t *testing.T) {
	t.Parallel()
	f := setupRetention(t)
	f.run(f.archiver(nil))
	var wg sync.WaitGroup
	results := make([]archive.Result, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = f.retaining(nil).RunOnce(context.Background()) })
	}
	wg.Wait()
	var objects, events int
	for i, r := range results {
		if errs[i] != nil {
			t.Errorf("archiver %d: %v", i, errs[i])
		}
		objects += r.ExpiredObjects
		events += r.ExpiredEvents
	}
	field.Check(t, "between them", field.Eq("ExpiredObjects", objects, 1), field.Eq("ExpiredEvents", events, 3))
	f.check()
}

// TestExpungeAfterRetention: an expunge of an event whose body expired
// erases what the row still holds and finds no object to rewrite.
func TestExpungeAfterRetention(t *testing.T) {
	t.Parallel()
	f := setupRetention(t)
	a := f.retaining(nil)
	f.run(a)
	rep, err := a.Expunge(context.Background(), "old", "o1", privacyOfficer)
	if err != nil {
		t.Fatal(err)
	}
	field.Check(t, "expunge", field.Eq("ArchiveKey", rep.ArchiveKey, ""), field.Eq("Metadata", rep.Metadata, true))
	if _, err := readBody(context.Background(), a, f.store, "old", "o1"); inbox.CauseOf(err) != inbox.CauseEventExpunged {
		t.Errorf("read after the expunge: %v, want event_expunged", err)
	}
}
