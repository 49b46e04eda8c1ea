package archive_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/emftest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The child mode: the test binary re-executed by TestKilledBetweenUploadAndMark
// runs one archive run that SIGKILLs itself right after the upload is
// confirmed, as a crash there would.
const (
	envChild     = "ARCHIVE_TEST_CHILD"
	envChildDB   = "ARCHIVE_TEST_DATABASE_URL"
	envChildS3   = "ARCHIVE_TEST_S3_ENDPOINT"
	envChildBkt  = "ARCHIVE_TEST_BUCKET"
	childBatch   = 50
	childMinAge  = time.Hour
	childTimeout = time.Minute
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(runChild())
	}
	pgtest.Main(m)
}

func runChild() int {
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	pool, err := pgxpool.New(ctx, os.Getenv(envChildDB))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	blobs, err := blobstore.Open(ctx, blobstore.Config{
		Bucket: os.Getenv(envChildBkt), Region: locals3.Region, Endpoint: os.Getenv(envChildS3), PathStyle: true,
		AccessKeyID: locals3.AccessKeyID, SecretAccessKey: locals3.SecretAccessKey,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	a, err := archive.New(archive.Config{Prefix: "archive", BatchSize: childBatch, MinAge: childMinAge}, archive.Deps{Store: storage.New(pool), Blobs: blobs})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	archive.SetAfterConfirm(a, func(context.Context, string) error {
		// The object is uploaded and confirmed; the database is not yet
		// updated. Die here, as abruptly as a crash or a Lambda timeout.
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	})
	_, err = a.RunOnce(ctx)
	fmt.Fprintf(os.Stderr, "child: run returned (%v) instead of dying\n", err)
	return 3
}

// clockFunc is a Clock that reads the time from a function.
type clockFunc func() time.Time

func (c clockFunc) Now() time.Time { return c() }

type fixture struct {
	t     *testing.T
	url   string
	pool  *pgxpool.Pool
	store *storage.Store
	srv   *locals3.Server
	s3cfg blobstore.Config
	blobs *blobstore.Store
	logs  *syncBuffer
}

// setup gives each test its own database and its own S3 server and bucket.
func setup(t *testing.T) *fixture {
	t.Helper()
	return setupWith(t, false)
}

// setupVersioned is setup with a bucket that keeps versions, as the
// deployed archive bucket does.
func setupVersioned(t *testing.T) *fixture {
	t.Helper()
	return setupWith(t, true)
}

func setupWith(t *testing.T, versioned bool) *fixture {
	t.Helper()
	url := pgtest.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	srv := s3test.ServerWith(t, locals3.Options{Versioning: versioned})
	newBucket := s3test.Bucket
	if versioned {
		newBucket = s3test.VersionedBucket
	}
	cfg := newBucket(t, srv)
	return &fixture{t: t, url: url, pool: pool, store: storage.New(pool), srv: srv, s3cfg: cfg,
		blobs: s3test.Open(t, cfg), logs: &syncBuffer{}}
}

// archiver returns an archiver over the fixture: events processed more than
// an hour ago, batches of 100, unless mod says otherwise.
func (f *fixture) archiver(mod func(*archive.Config, *archive.Deps)) *archive.Archiver {
	f.t.Helper()
	cfg := archive.Config{Prefix: "archive", MinAge: time.Hour, BatchSize: 100}
	deps := archive.Deps{Store: f.store, Blobs: f.blobs, Logger: slog.New(slog.NewJSONHandler(f.logs, nil))}
	if mod != nil {
		mod(&cfg, &deps)
	}
	a, err := archive.New(cfg, deps)
	if err != nil {
		f.t.Fatal(err)
	}
	return a
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.pool.Exec(context.Background(), sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

func (f *fixture) int(sql string, args ...any) int64 {
	f.t.Helper()
	var n *int64
	if err := f.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
	if n == nil {
		return 0
	}
	return *n
}

// insert stores an event as the receiver does, and returns its body.
func (f *fixture) insert(source, eventID string, body []byte) []byte {
	f.t.Helper()
	res, err := f.store.EventInsert(context.Background(), storage.EventInsertParams{Source: source, EventID: eventID, EventType: "test.event", Body: body})
	if err != nil || !res.Inserted {
		f.t.Fatalf("insert %s/%s: %+v %v", source, eventID, res, err)
	}
	return body
}

// bulkInsert stores n JSON events of source with ~padBytes of random hex
// each, received 3h ago, and returns their bodies by event id (evt_1...).
func (f *fixture) bulkInsert(source string, n, padBytes int) map[string][]byte {
	f.t.Helper()
	return f.bulk(source, n, padBytes, nil)
}

// bulk is bulkInsert with each event processed at processedAt(i) (from 1)
// when processedAt is set.
func (f *fixture) bulk(source string, n, padBytes int, processedAt func(i int) time.Time) map[string][]byte {
	f.t.Helper()
	bodies := make(map[string][]byte, n)
	pad := make([]byte, max(1, padBytes/2))
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("evt_%d", i)
		_, _ = rand.Read(pad)
		body := fmt.Appendf(nil, `{"id":%q,"object":"event","type":"invoice.paid","data":{"n":%d,"pad":"%x"}}`, id, i, pad)
		opts := &factory.EventOpts{Source: source, EventID: id, Type: "invoice.paid", Body: body, CreatedAt: time.Now().Add(-3 * time.Hour)}
		if processedAt != nil {
			opts.State, opts.ProcessedAt = inbox.StateProcessed, new(processedAt(i))
		}
		factory.Event(context.Background(), f.t, f.store, opts)
		bodies[id] = body
	}
	return bodies
}

// process marks every event due now processed ago, as a processor would.
func (f *fixture) process(ago time.Duration) {
	f.t.Helper()
	factory.ProcessDue(context.Background(), f.t, f.store, time.Now().Add(-ago))
}

func (f *fixture) run(a *archive.Archiver) archive.Result {
	f.t.Helper()
	res, err := a.RunOnce(context.Background())
	if err != nil {
		f.t.Fatalf("run: %v", err)
	}
	return res
}

// readBody reads an event's body as the operator's pages do: its row, then
// the archiver's Body.
func readBody(ctx context.Context, a *archive.Archiver, store storage.Executor, source, eventID string) ([]byte, error) {
	ev, err := store.EventGetByKey(ctx, source, eventID)
	if err != nil {
		return nil, err
	}
	return a.Body(ctx, ev)
}

func (f *fixture) readBody(a *archive.Archiver, source, eventID string) []byte {
	f.t.Helper()
	b, err := readBody(context.Background(), a, f.store, source, eventID)
	if err != nil {
		f.t.Fatalf("read %s/%s: %v", source, eventID, err)
	}
	return b
}

// objects lists the bucket.
func (f *fixture) objects() []blobstore.Object {
	f.t.Helper()
	objs, err := f.blobs.List(context.Background(), "")
	if err != nil {
		f.t.Fatal(err)
	}
	return objs
}

// check verifies the archive's invariants, whatever happened before:
//   - every object in the bucket is a committed manifest row with the
//     object's size, and every committed row's object exists (no orphan,
//     nothing missing);
//   - every event line appears in exactly one object (no duplicate), and the
//     event row points at that object, at the member holding the line;
//   - every archived row is in its object, and every row still holding its
//     body is neither archived nor in any object's line;
//   - a row whose body the retention pass removed points at no stored
//     object, and an object it deleted is gone from the bucket.
//
// It returns the number of archived events.
func (f *fixture) check() int {
	f.t.Helper()
	ctx := context.Background()
	type loc struct {
		key      string
		off, len int64
	}
	archived := map[int64]loc{}
	rows, err := f.pool.Query(ctx, `SELECT id, archive_key, archive_offset, archive_length, body IS NOT NULL, archived_at IS NOT NULL, expunged_at IS NOT NULL, body_expired_at IS NOT NULL FROM webhook_events`)
	if err != nil {
		f.t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var key *string
		var off, n *int64
		var hasBody, isArchived, expunged, expired bool
		if err := rows.Scan(&id, &key, &off, &n, &hasBody, &isArchived, &expunged, &expired); err != nil {
			f.t.Fatal(err)
		}
		switch {
		case isArchived && (key == nil || off == nil || n == nil || hasBody):
			f.t.Errorf("event %d: archived but key %v, body present %v", id, key, hasBody)
		case !isArchived && key != nil:
			f.t.Errorf("event %d: not archived but has key %s", id, *key)
		case !isArchived && !hasBody && !expunged && !expired:
			f.t.Errorf("event %d: body gone but neither archived, expunged nor expired: PAYLOAD LOST", id)
		case expired && hasBody:
			f.t.Errorf("event %d: body expired but still in its row", id)
		}
		if isArchived && !expunged && !expired && key != nil {
			archived[id] = loc{*key, *off, *n}
		}
	}
	rows.Close()

	manifest := map[string]int64{} // committed key -> size
	expiredObjects := map[string]bool{}
	mrows, err := f.pool.Query(ctx, `SELECT key, size, committed_at IS NOT NULL, expired_at IS NOT NULL FROM webhook_archive_objects`)
	if err != nil {
		f.t.Fatal(err)
	}
	for mrows.Next() {
		var key string
		var size int64
		var committed, expired bool
		if err := mrows.Scan(&key, &size, &committed, &expired); err != nil {
			f.t.Fatal(err)
		}
		if expired {
			expiredObjects[key] = true
			continue
		}
		if !committed {
			f.t.Errorf("manifest: %s still pending after the run", key)
			continue
		}
		manifest[key] = size
	}
	mrows.Close()

	seen := map[int64]string{}
	objs := f.objects()
	inBucket := map[string]bool{}
	for _, o := range objs {
		inBucket[o.Key] = true
		if expiredObjects[o.Key] {
			f.t.Errorf("object %s: deleted past retention by the manifest, still in the bucket", o.Key)
			continue
		}
		size, ok := manifest[o.Key]
		if !ok {
			f.t.Errorf("object %s: not a committed archive object: ORPHAN", o.Key)
			continue
		}
		if size != o.Size {
			f.t.Errorf("object %s: %d bytes, manifest says %d", o.Key, o.Size, size)
		}
		data, err := f.blobs.Get(ctx, o.Key)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, l := range lines(f.t, data) {
			if prev, dup := seen[l.ID]; dup {
				f.t.Errorf("event %d: in %s and %s: DUPLICATE", l.ID, prev, o.Key)
			}
			seen[l.ID] = o.Key
			at, ok := archived[l.ID]
			if !ok || at.key != o.Key {
				f.t.Errorf("event %d: line in %s but row points at %+v", l.ID, o.Key, at)
				continue
			}
			got, err := archive.DecodeMember(data[at.off : at.off+at.len])
			if err != nil || got.ID != l.ID {
				f.t.Errorf("event %d: member at %s [%d,+%d): %v", l.ID, o.Key, at.off, at.len, err)
			}
		}
	}
	for key := range manifest {
		if !inBucket[key] {
			f.t.Errorf("committed object %s: MISSING from the bucket", key)
		}
	}
	for id, at := range archived {
		if seen[id] != at.key {
			f.t.Errorf("event %d: archived in %s but no line there", id, at.key)
		}
	}
	return len(archived)
}

// lines decodes a whole object as zcat would (all members, in order).
func lines(t *testing.T, obj []byte) []archive.Line {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(obj))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return parseLines(t, data)
}

func parseLines(t *testing.T, data []byte) []archive.Line {
	t.Helper()
	var out []archive.Line
	for _, raw := range bytes.SplitAfter(data, []byte("\n")) {
		if len(raw) == 0 {
			continue
		}
		if raw[len(raw)-1] != '\n' {
			t.Fatalf("line without newline: %.80q", raw)
		}
		var l archive.Line
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("line is not JSON: %v: %.80q", err, raw)
		}
		out = append(out, l)
	}
	return out
}

// zcat decompresses an object with the system's zcat, as an operator would.
func zcat(t *testing.T, obj []byte) []byte {
	t.Helper()
	if _, err := exec.LookPath("zcat"); err != nil {
		t.Skip("no zcat on this machine")
	}
	cmd := exec.Command("zcat")
	cmd.Stdin = bytes.NewReader(obj)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("zcat: %v", err)
	}
	return out
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// line returns the last raw log line whose msg is msg.
func (b *syncBuffer) line(t *testing.T, msg string) []byte {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var last []byte
	for _, line := range bytes.Split(b.buf.Bytes(), []byte("\n")) {
		var rec struct{ Msg string }
		if json.Unmarshal(line, &rec) == nil && rec.Msg == msg {
			last = line
		}
	}
	if last == nil {
		t.Fatalf("no log line %q", msg)
	}
	return last
}

// records returns the JSON log records whose msg is msg.
func (b *syncBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(b.buf.Bytes(), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

func TestArchiveTenThousand(t *testing.T) {
	tier.Heavy(t, "archives ten thousand events")
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	const n, batchSize = 10_000, 500
	bodies := f.bulkInsert("stripe", n, 1500)
	f.process(2 * time.Hour)

	size := func(label string) (total, columns int64) {
		total = f.int(`SELECT pg_total_relation_size('webhook_events')`)
		columns = f.int(`SELECT sum(coalesce(pg_column_size(payload), 0) + coalesce(pg_column_size(body), 0)) FROM webhook_events`)
		t.Logf("%-26s webhook_events total %9d bytes; payload+body columns %9d bytes", label, total, columns)
		return total, columns
	}
	totalBefore, colsBefore := size("before:")

	a := f.archiver(func(c *archive.Config, d *archive.Deps) { c.BatchSize = batchSize })
	start := time.Now()
	res := f.run(a)
	elapsed := time.Since(start)
	wantObjects := (n + batchSize - 1) / batchSize
	if res.Events != n || res.Batches != wantObjects {
		t.Fatalf("run: %d events in %d objects, want %d in %d", res.Events, res.Batches, n, wantObjects)
	}
	t.Logf("archived %d events (%d body bytes) into %d objects (%d bytes) in %v",
		res.Events, res.BodyBytes, res.Batches, res.ObjectBytes, elapsed.Round(time.Millisecond))

	_, colsAfter := size("after archiving:")
	if colsAfter != 0 {
		t.Fatalf("payload and body still hold %d bytes", colsAfter)
	}
	f.exec(`VACUUM webhook_events`)
	size("after VACUUM:")
	f.exec(`VACUUM FULL webhook_events`)
	totalFull, _ := size("after VACUUM FULL:")
	if totalFull >= totalBefore || totalBefore-totalFull < colsBefore/2 {
		t.Errorf("the table shrank from %d to %d bytes with %d bytes of payload removed", totalBefore, totalFull, colsBefore)
	}

	objs := f.objects()
	if len(objs) != wantObjects {
		t.Fatalf("bucket holds %d objects, want %d", len(objs), wantObjects)
	}
	// zcat of every object gives valid JSON lines, n in all.
	total := 0
	for _, o := range objs {
		if !strings.HasPrefix(o.Key, "archive/provider=stripe/dt=") || !strings.HasSuffix(o.Key, ".jsonl.gz") {
			t.Fatalf("key %s", o.Key)
		}
		data, err := f.blobs.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		ls := parseLines(t, zcat(t, data))
		for _, l := range ls {
			raw, err := l.RawBody()
			if err != nil {
				t.Fatalf("line of %s: body %v", l.EventID, err)
			}
			if !bytes.Equal(raw, bodies[l.EventID]) {
				t.Errorf("line of %s: body %q, want %q", l.EventID, raw, bodies[l.EventID])
			}
			if l.Source != "stripe" {
				t.Errorf("line of %s: Source = %q, want stripe", l.EventID, l.Source)
			}
			if l.EventType != "invoice.paid" {
				t.Errorf("line of %s: EventType = %q, want invoice.paid", l.EventID, l.EventType)
			}
			if l.ProcessedAt.IsZero() {
				t.Errorf("line of %s: no ProcessedAt", l.EventID)
			}
		}
		total += len(ls)
	}
	if total != n {
		t.Fatalf("zcat gave %d lines, want %d", total, n)
	}
	if got := f.check(); got != n {
		t.Fatalf("%d events archived", got)
	}

	// Every body reads back byte-identical, with one ranged GET each.
	start = time.Now()
	ids := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				got, err := readBody(ctx, a, f.store, "stripe", id)
				if err != nil || !bytes.Equal(got, bodies[id]) {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s: %v", id, err))
					mu.Unlock()
				}
			}
		}()
	}
	for id := range bodies {
		ids <- id
	}
	close(ids)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d bodies did not read back, e.g. %s", len(bad), bad[0])
	}
	t.Logf("read back %d bodies by ranged GET in %v", len(bodies), time.Since(start).Round(time.Millisecond))

	// A second run finds nothing to do.
	if res := f.run(a); res.Events != 0 || res.Batches != 0 {
		t.Fatalf("second run: %+v", res)
	}
}

func TestLosslessBodies(t *testing.T) {
	t.Parallel()
	f := setup(t)
	bodies := map[string][]byte{
		"evt_json":     []byte(`{"id":"evt_json","type":"a.b","html":"<b>&amp;</b>","n":1.50}`),
		"evt_nul":      []byte(`{"id":"evt_nul","note":"caf\u00e9 \u0000 ☕"}`), // JSONB refuses \u0000: payload NULL
		"evt_bignum":   []byte(`{"id":"evt_bignum","n":1e999999}`),
		"evt_latin1":   {'{', '"', 'x', '"', ':', '"', 0xe9, '"', '}'}, // invalid UTF-8
		"evt_binary":   {0, 1, 2, 0xff, 0xfe, '\n', '\r'},
		"evt_empty":    {},
		"evt_text":     []byte("plain text\r\nwith CRLF and \u2028 separators\n"),
		"evt_dupkeys":  []byte(`{"a":1,"a":2,   "z" : [ ] }`),
		"evt_rawbytes": []byte("NUL byte \x00 inside valid UTF-8"),
	}
	for id, b := range bodies {
		f.insert("standard", id, b)
	}
	f.process(2 * time.Hour)
	if n := f.int(`SELECT count(*) FROM webhook_events WHERE payload IS NULL`); n < 4 {
		t.Fatalf("only %d bodies without payload: the fixture no longer covers what JSONB cannot hold", n)
	}
	a := f.archiver(nil)
	if res := f.run(a); res.Events != len(bodies) || res.Batches != 1 {
		t.Fatalf("run: %+v", res)
	}
	for id, want := range bodies {
		if got := f.readBody(a, "standard", id); !bytes.Equal(got, want) {
			t.Errorf("%s: read back %q, stored %q", id, got, want)
		}
	}
	data, err := f.blobs.Get(context.Background(), f.objects()[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range parseLines(t, zcat(t, data)) {
		wantB64 := l.EventID == "evt_latin1" || l.EventID == "evt_binary"
		if (l.BodyBase64 != nil) != wantB64 || (l.Body != nil) == wantB64 {
			t.Errorf("%s: body %v body_base64 %v", l.EventID, l.Body != nil, l.BodyBase64 != nil)
		}
	}
	f.check()
}

func TestBodyFromPostgresAndErrors(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.archiver(nil)
	ctx := context.Background()
	body := f.insert("stripe", "evt_pg", []byte(`{"id":"evt_pg"}`))
	if got := f.readBody(a, "stripe", "evt_pg"); !bytes.Equal(got, body) {
		t.Fatalf("read %q", got)
	}
	// A body altered in Postgres behind the hash's back is refused.
	sha256Of := func(b []byte) []byte { s := sha256.Sum256(b); return s[:] }
	factory.Event(ctx, t, f.store, &factory.EventOpts{Source: "stripe", EventID: "evt_tampered", Body: []byte("tampered"), BodySHA256: sha256Of(body)})
	if _, err := readBody(ctx, a, f.store, "stripe", "evt_tampered"); inbox.CauseOf(err) != inbox.CauseArchiveCorrupt {
		t.Fatalf("tampered body: %v", err)
	}
}

func TestSelection(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	// Oldest processed first, by source: a1..a3 then b1 processed in that
	// order, long ago; recent processed just now; pending never processed;
	// dead was dead-lettered.
	now := time.Now()
	processed := func(source, id string, ago time.Duration) {
		factory.Event(ctx, t, f.store, &factory.EventOpts{Source: source, EventID: id, Body: []byte(`{"id":"` + id + `"}`),
			State: inbox.StateProcessed, ProcessedAt: new(now.Add(-ago))})
	}
	for i, ev := range []struct{ source, id string }{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"a", "a3"}} {
		processed(ev.source, ev.id, time.Duration(10-i)*time.Hour)
	}
	processed("a", "recent", 10*time.Minute)
	factory.Event(ctx, t, f.store, &factory.EventOpts{Source: "a", EventID: "pending", Body: []byte(`{}`)})
	factory.Event(ctx, t, f.store, &factory.EventOpts{Source: "a", EventID: "dead", Body: []byte(`{}`), State: inbox.StateDead, Now: now.Add(-5 * time.Hour)})

	// One batch of 2: the two oldest, both of source a.
	a := f.archiver(func(c *archive.Config, d *archive.Deps) { c.BatchSize = 2; c.MaxBatches = 1 })
	res := f.run(a)
	if res.Batches != 1 || len(res.Keys) != 1 {
		t.Fatalf("first run: %d batches, keys %v; want 1", res.Batches, res.Keys)
	}
	if res.Events != 2 {
		t.Errorf("first run: %d events, want 2", res.Events)
	}
	if !res.Truncated {
		t.Error("first run: not truncated at MaxBatches")
	}
	if want := "/provider=a/dt=" + time.Now().UTC().Format(time.DateOnly) + "/1-2.jsonl.gz"; !strings.HasSuffix(res.Keys[0], want) {
		t.Errorf("first run: key %s, want one ending %s", res.Keys[0], want)
	}
	// The rest: b1 alone (its source's batch), then a3.
	res = f.run(f.archiver(func(c *archive.Config, d *archive.Deps) { c.BatchSize = 2 }))
	if res.Batches != 2 || len(res.Keys) != 2 {
		t.Fatalf("second run: %d batches, keys %v; want 2", res.Batches, res.Keys)
	}
	if res.Events != 2 {
		t.Errorf("second run: %d events, want 2", res.Events)
	}
	if !strings.Contains(res.Keys[0], "provider=b/") || !strings.Contains(res.Keys[1], "provider=a/") {
		t.Errorf("second run: keys %v, want b's batch then a's", res.Keys)
	}
	var left []string
	rows, _ := f.pool.Query(ctx, `SELECT event_id FROM webhook_events WHERE archived_at IS NULL ORDER BY event_id`)
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		left = append(left, id)
	}
	rows.Close()
	if !slices.Equal(left, []string{"dead", "pending", "recent"}) {
		t.Fatalf("left in Postgres: %v", left)
	}
	// The age is measured on the archiver's clock: an hour later, recent
	// is old enough.
	later := f.archiver(func(c *archive.Config, d *archive.Deps) {
		d.Clock = clockFunc(func() time.Time { return time.Now().Add(time.Hour) })
	})
	if res := f.run(later); res.Events != 1 {
		t.Fatalf("an hour later: %+v", res)
	}
	f.check()
}

func TestMaxBatchBytes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for i := range 5 {
		f.insert("a", fmt.Sprintf("e%d", i), bytes.Repeat([]byte("x"), 1000))
	}
	f.process(2 * time.Hour)
	// 2500 bytes per batch: two bodies each, the last alone; a body larger
	// than the budget still makes a batch of its own.
	res := f.run(f.archiver(func(c *archive.Config, d *archive.Deps) { c.MaxBatchBytes = 2500 }))
	if res.Batches != 3 || res.Events != 5 {
		t.Fatalf("run: %+v", res)
	}
	f.insert("a", "big", bytes.Repeat([]byte("y"), 5000))
	f.process(2 * time.Hour)
	if res := f.run(f.archiver(func(c *archive.Config, d *archive.Deps) { c.MaxBatchBytes = 2500 })); res.Batches != 1 || res.Events != 1 {
		t.Fatalf("big body: %+v", res)
	}
	f.check()
}

func TestDeadlineReserve(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.insert("a", "e1", []byte(`{}`))
	f.process(2 * time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// 5 s left is less than the reserve (15 s).
	res, err := f.archiver(nil).RunOnce(ctx)
	if err != nil || res.Events != 0 || !res.Truncated {
		t.Fatalf("run with less time than the reserve: %+v, %v", res, err)
	}
}

// TestKilledBetweenUploadAndMark kills a real archiver process right after
// its upload is confirmed, then runs again.
func TestKilledBetweenUploadAndMark(t *testing.T) {
	tier.Heavy(t, "kills an archiver process")
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	bodies := f.bulkInsert("stripe", 3*childBatch+10, 200)
	f.process(2 * time.Hour)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=1", envChildDB+"="+f.url,
		envChildS3+"="+f.s3cfg.Endpoint, envChildBkt+"="+f.s3cfg.Bucket)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want killed by SIGKILL\n%s", err, stderr.String())
	}

	// The object is in S3, pending in the manifest; every payload is
	// still in Postgres.
	objs := f.objects()
	if len(objs) != 1 {
		t.Fatalf("after the crash the bucket holds %v", objs)
	}
	crashKey := objs[0].Key
	if o, err := f.store.ArchiveObjectGet(ctx, crashKey); err != nil || o.CommittedAt != nil {
		t.Fatalf("manifest of %s: %+v, %v", crashKey, o, err)
	}
	if n := f.int(`SELECT count(*) FROM webhook_events WHERE body IS NOT NULL AND payload IS NOT NULL AND archived_at IS NULL`); n != int64(len(bodies)) {
		t.Fatalf("after the crash %d of %d events keep their payload", n, len(bodies))
	}

	// The killed child's session ends when its server process notices
	// the closed socket, an instant later; until then its row locks would
	// make the re-run skip the first batch.
	poll.Until(t, 30*time.Second, func() (bool, string) {
		n := f.int(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'`)
		return n == 0, fmt.Sprintf("%d sessions still in a transaction", n)
	})
	// The re-run makes the same first batch, so it writes the same key.
	a := f.archiver(func(c *archive.Config, d *archive.Deps) { c.BatchSize = childBatch; c.MinAge = childMinAge })
	res := f.run(a)
	if res.Events != len(bodies) || res.Keys[0] != crashKey || res.Swept != 0 {
		t.Fatalf("re-run: %+v (crash left %s)", res, crashKey)
	}
	if got := f.check(); got != len(bodies) {
		t.Fatalf("%d events archived", got)
	}
	if objs := f.objects(); len(objs) != 4 {
		t.Fatalf("bucket holds %d objects, want 4", len(objs))
	}
	for id, want := range bodies {
		if got := f.readBody(a, "stripe", id); !bytes.Equal(got, want) {
			t.Fatalf("%s: read back differs", id)
		}
	}
}

// TestAbortedBatchThenDifferentBatch: an upload whose batch never commits,
// then a run whose first batch differs (more events arrived): the object of
// the failed attempt is an orphan, and the sweep deletes it.
func TestAbortedBatchThenDifferentBatch(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for i := range 5 {
		f.insert("a", fmt.Sprintf("e%d", i), []byte(`{"n":1}`))
	}
	f.process(2 * time.Hour)

	// A batch that fails after its upload in a live process: the run's
	// own sweep removes the object at once.
	a := f.archiver(nil)
	archive.SetAfterConfirm(a, func(context.Context, string) error { return errors.New("failed after upload") })
	if res, err := a.RunOnce(context.Background()); err == nil || res.Swept != 1 {
		t.Fatalf("failed run: %+v, %v", res, err)
	}
	if objs := f.objects(); len(objs) != 0 {
		t.Fatalf("after a failed run: %v", objs)
	}

	// One that dies after its upload leaves the object behind.
	crashed := f.archiver(nil)
	archive.CrashAfterUpload(crashed)
	_, _ = crashed.RunOnce(context.Background())
	if objs := f.objects(); len(objs) != 1 || !strings.HasSuffix(objs[0].Key, "/1-5.jsonl.gz") {
		t.Fatalf("after a crash: %v", objs)
	}
	// More events arrive: the next batch is 1-8, another key.
	for i := 5; i < 8; i++ {
		f.insert("a", fmt.Sprintf("e%d", i), []byte(`{"n":2}`))
	}
	f.process(2 * time.Hour)
	// A later run, past the grace a live batch's pending row is given.
	res := f.run(f.archiver(func(c *archive.Config, d *archive.Deps) {
		d.Clock = clockFunc(func() time.Time { return time.Now().Add(archive.DefaultPendingGrace + time.Second) })
	}))
	if res.Events != 8 || res.Swept != 1 || !strings.HasSuffix(res.Keys[0], "/1-8.jsonl.gz") {
		t.Fatalf("re-run: %+v", res)
	}
	if got := f.check(); got != 8 {
		t.Fatalf("%d archived", got)
	}
}

func TestS3StoppedDuringRun(t *testing.T) {
	tier.Heavy(t, "an S3 outage")
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	bodies := f.bulkInsert("stripe", 30, 100)
	f.process(2 * time.Hour)

	// S3 goes down after the first batch of three.
	a := f.archiver(func(c *archive.Config, d *archive.Deps) { c.BatchSize = 10 })
	var once sync.Once
	archive.SetAfterCommit(a, func(context.Context, string) {
		once.Do(func() {
			if err := f.srv.Stop(); err != nil {
				t.Error(err)
			}
		})
	})
	res, err := a.RunOnce(ctx)
	if err == nil || inbox.CauseOf(err) != inbox.CauseArchiveStoreUnavailable || !res.StoreUnavailable {
		t.Fatalf("run with S3 down: %+v, %v (cause %s)", res, err, inbox.CauseOf(err))
	}
	if res.Events != 10 || res.Batches != 1 {
		t.Fatalf("run with S3 down archived %+v", res)
	}
	// Nothing beyond the committed batch was cleared.
	if n := f.int(`SELECT count(*) FROM webhook_events WHERE body IS NOT NULL AND payload IS NOT NULL AND archived_at IS NULL`); n != 20 {
		t.Fatalf("%d events keep their payload, want 20", n)
	}
	// The run says so: its log line carries the cause and the metric, as
	// valid EMF.
	recs := f.logs.records(t, "archive: run failed")
	if len(recs) != 1 || recs[0]["cause"] != "archive_store_unavailable" ||
		recs[0][archive.MetricStoreUnavailable] != 1.0 || recs[0][archive.MetricRunFailed] != 1.0 || recs[0][archive.MetricEvents] != 10.0 {
		t.Fatalf("run log: %v", recs)
	}
	if err := emftest.Validate(f.logs.line(t, "archive: run failed")); err != nil {
		t.Fatalf("run log is not EMF: %v", err)
	}
	// The archived events cannot be read while S3 is down, and say why;
	// those still in Postgres can.
	if _, err := readBody(ctx, a, f.store, "stripe", "evt_1"); inbox.CauseOf(err) != inbox.CauseArchiveStoreUnavailable {
		t.Fatalf("read while S3 is down: %v", err)
	}
	var inPG string
	_ = f.pool.QueryRow(ctx, `SELECT event_id FROM webhook_events WHERE archived_at IS NULL LIMIT 1`).Scan(&inPG)
	if got := f.readBody(a, "stripe", inPG); !bytes.Equal(got, bodies[inPG]) {
		t.Fatal("body in Postgres unreadable while S3 is down")
	}

	// Back up: the next run completes.
	if err := f.srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The batch that failed was left pending (no sweep runs while S3 is
	// down); the re-run chooses the same batch, so it takes the record
	// over and writes the same key: nothing to sweep.
	res = f.run(f.archiver(func(c *archive.Config, d *archive.Deps) { c.BatchSize = 10 }))
	if res.Events != 20 || res.Batches != 2 || res.Swept != 0 {
		t.Fatalf("run after restart: %+v", res)
	}
	if n := len(f.objects()); n != 3 {
		t.Fatalf("%d objects, want 3", n)
	}
	if got := f.check(); got != 30 {
		t.Fatalf("%d archived", got)
	}
	for id, want := range bodies {
		if got := f.readBody(a, "stripe", id); !bytes.Equal(got, want) {
			t.Fatalf("%s differs", id)
		}
	}
}

func TestS3DownFromTheStart(t *testing.T) {
	tier.Heavy(t, "an S3 outage")
	t.Parallel()
	f := setup(t)
	f.bulkInsert("stripe", 10, 100)
	f.process(2 * time.Hour)
	if err := f.srv.Stop(); err != nil {
		t.Fatal(err)
	}
	res, err := f.archiver(nil).RunOnce(context.Background())
	if inbox.CauseOf(err) != inbox.CauseArchiveStoreUnavailable || res.Events != 0 {
		t.Fatalf("run: %+v, %v", res, err)
	}
	if n := f.int(`SELECT count(*) FROM webhook_events WHERE body IS NOT NULL AND payload IS NOT NULL AND archived_at IS NULL`); n != 10 {
		t.Fatalf("%d of 10 keep their payload", n)
	}
	if err := f.srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res := f.run(f.archiver(nil)); res.Events != 10 {
		t.Fatalf("after restart: %+v", res)
	}
	f.check()
}

func TestS3RefusalIsNotAnOutage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.insert("a", "e1", []byte(`{}`))
	f.process(2 * time.Hour)
	cfg := f.s3cfg
	cfg.Bucket = "no-such-bucket"
	a := f.archiver(func(c *archive.Config, d *archive.Deps) { d.Blobs = s3test.Open(t, cfg) })
	res, err := a.RunOnce(context.Background())
	if inbox.CauseOf(err) != inbox.CauseArchiveStoreFailed || res.StoreUnavailable {
		t.Fatalf("run: %+v, %v", res, err)
	}
	if n := f.int(`SELECT count(*) FROM webhook_events WHERE body IS NOT NULL`); n != 1 {
		t.Fatal("payload cleared after a refused upload")
	}
}

// TestSweepStopsOnS3Error: a delete S3 refuses stops the sweep and leaves
// the orphans' manifest rows, so the next sweep deletes them.
func TestSweepStopsOnS3Error(t *testing.T) {
	tier.Heavy(t, "an S3 outage")
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	for _, k := range []string{"x", "y"} {
		if err := f.store.ArchiveObjectPrepare(ctx, k, "a"); err != nil {
			t.Fatal(err)
		}
	}
	// The two pending rows are an earlier run's: past the grace.
	a := f.archiver(func(c *archive.Config, d *archive.Deps) {
		d.Blobs = s3test.Open(t, withOneAttempt(f.s3cfg))
		d.Clock = clockFunc(func() time.Time { return time.Now().Add(archive.DefaultPendingGrace + time.Second) })
	})
	if err := f.srv.Stop(); err != nil {
		t.Fatal(err)
	}
	swept, err := archive.SweepOrphans(ctx, a)
	if inbox.CauseOf(err) != inbox.CauseArchiveStoreUnavailable || len(swept) != 0 {
		t.Fatalf("sweep with S3 down: %v, %v", swept, err)
	}
	if st, err := f.store.ArchiveObjectGetStats(ctx); err != nil || st.PendingObjects != 2 {
		t.Fatalf("pending after the failed sweep: %+v, %v", st, err)
	}
	if err := f.srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if swept, err := archive.SweepOrphans(ctx, a); err != nil || len(swept) != 2 {
		t.Fatalf("second sweep: %v, %v", swept, err)
	}
}

// withOneAttempt makes the S3 client fail at once rather than retry.
func withOneAttempt(cfg blobstore.Config) blobstore.Config {
	cfg.MaxAttempts = 1
	return cfg
}

// TestBatchCommittedByAnotherArchiver: two archivers choose the same
// batch; the other one archives it before this one records its object.
// This one must choose again (finding nothing left), not report a key
// collision.
func TestBatchCommittedByAnotherArchiver(t *testing.T) {
	t.Parallel()
	f := setup(t)
	bodies := f.bulk("stripe", 5, 100, func(int) time.Time { return time.Now().Add(-2 * time.Hour) })
	other := f.archiver(nil)
	slow := f.archiver(nil)
	var chosen []string
	archive.SetAfterChoose(slow, func(ctx context.Context, key string) {
		chosen = append(chosen, key)
		if len(chosen) == 1 {
			if res := f.run(other); res.Events != len(bodies) || res.Keys[0] != key {
				t.Errorf("the other archiver: %+v, want the same batch %s", res, key)
			}
		}
	})
	res, err := slow.RunOnce(context.Background())
	if err != nil || res.Events != 0 || len(chosen) != 1 {
		t.Fatalf("run = %+v, %v (chose %v)", res, err, chosen)
	}
	f.check()
}

func TestConcurrentArchivers(t *testing.T) {
	tier.Heavy(t, "three archivers over 1 800 events")
	t.Parallel()
	f := setup(t)
	// The sources interleave in processing order.
	start := time.Now().Add(-2 * time.Hour)
	for k, p := range []string{"a", "b", "c"} {
		f.bulk(p, 600, 100, func(i int) time.Time {
			return start.Add(time.Duration(i)*time.Second + time.Duration(k)*100*time.Millisecond)
		})
	}
	const archivers = 4
	var wg sync.WaitGroup
	results := make([]archive.Result, archivers)
	errs := make([]error, archivers)
	for i := range archivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := f.archiver(func(c *archive.Config, d *archive.Deps) { c.BatchSize = 50 })
			results[i], errs[i] = a.RunOnce(context.Background())
		}()
	}
	wg.Wait()
	total, batches := 0, 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("archiver %d: %v", i, errs[i])
		}
		total += r.Events
		batches += r.Batches
		t.Logf("archiver %d: %d events in %d objects", i, r.Events, r.Batches)
	}
	// Each archiver stops when it finds nothing unlocked; a run after them
	// finds what they left (normally nothing).
	// Its sweep is a later run's: the pending rows of batches the four
	// abandoned to each other (nothing uploaded) are past the grace.
	rest := f.run(f.archiver(func(c *archive.Config, d *archive.Deps) {
		c.BatchSize, d.Clock = 50, clockFunc(func() time.Time { return time.Now().Add(archive.DefaultPendingGrace + time.Second) })
	}))
	if total+rest.Events != 1800 {
		t.Fatalf("archived %d + %d events, want 1800: an event was archived twice or not at all", total, rest.Events)
	}
	if got := f.check(); got != 1800 {
		t.Fatalf("%d archived", got)
	}
	if n := len(f.objects()); n != batches+rest.Batches {
		t.Fatalf("%d objects for %d batches", n, batches+rest.Batches)
	}
}

func TestExpungeArchived(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	secret := []byte(`{"id":"evt_gdpr","email":"someone@example.com","secret":"s3cr3t-marker"}`)
	f.insert("stripe", "evt_before", []byte(`{"id":"evt_before"}`))
	// The event was also dead-lettered somewhere in its past, then
	// requeued: that copy goes too.
	gdpr := factory.Event(ctx, t, f.store, &factory.EventOpts{Source: "stripe", EventID: "evt_gdpr", Body: secret, State: inbox.StateDead})
	if n, err := f.store.DeadLetterRequeue(ctx, storage.DeadLetterFilter{Source: "stripe"}, storage.BulkOptions{Now: time.Now(), By: inbox.Actor{Name: "test"}}); err != nil || n.Done != 1 {
		t.Fatalf("requeue %d: %d, %v", gdpr.ID, n.Done, err)
	}
	f.insert("stripe", "evt_after", []byte(`{"id":"evt_after"}`))
	f.process(2 * time.Hour)
	a := f.archiver(nil)
	f.run(a)
	var key string
	var off, n int64
	if err := f.pool.QueryRow(ctx, `SELECT archive_key, archive_offset, archive_length FROM webhook_events WHERE event_id = 'evt_gdpr'`).Scan(&key, &off, &n); err != nil {
		t.Fatal(err)
	}

	if _, err := a.Expunge(ctx, "stripe", "evt_gdpr", privacyOfficer); err != nil {
		t.Fatal(err)
	}

	// Unreadable from Postgres and from S3.
	if _, err := readBody(ctx, a, f.store, "stripe", "evt_gdpr"); !errors.Is(err, archive.ErrExpunged) || inbox.CauseOf(err) != inbox.CauseEventExpunged {
		t.Fatalf("read after expunge: %v", err)
	}
	member, err := f.blobs.GetRange(ctx, key, off, n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := archive.DecodeMember(member); !errors.Is(err, archive.ErrEmptyMember) {
		t.Fatalf("the event's old range now decodes to %v", err)
	}
	data, err := f.blobs.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	plain := zcat(t, data)
	if bytes.Contains(plain, []byte("s3cr3t-marker")) || bytes.Contains(data, []byte("s3cr3t-marker")) {
		t.Fatal("the body is still in the object")
	}
	if ls := parseLines(t, plain); len(ls) != 2 || ls[0].EventID != "evt_before" || ls[1].EventID != "evt_after" {
		t.Fatalf("lines after expunge: %+v", ls)
	}
	var dlBody, dlPayload *string
	_ = f.pool.QueryRow(ctx, `SELECT body::text, payload::text FROM webhook_dead_letters`).Scan(&dlBody, &dlPayload)
	if dlBody != nil || dlPayload != nil {
		t.Fatal("the dead-letter copy survived")
	}
	// The neighbours are untouched and still read back.
	if got := f.readBody(a, "stripe", "evt_after"); string(got) != `{"id":"evt_after"}` {
		t.Fatalf("neighbour: %q", got)
	}
	if o, err := f.store.ArchiveObjectGet(ctx, key); err != nil || o.RewrittenAt == nil || o.Size != int64(len(data)) {
		t.Fatalf("manifest after rewrite: %+v, %v", o, err)
	}

	// The dedup row remains: a redelivery is still a duplicate.
	ev, err := f.store.EventGetByKey(ctx, "stripe", "evt_gdpr")
	if err != nil {
		t.Fatalf("row after expunge: %v", err)
	}
	if ev.Body != nil {
		t.Errorf("row after expunge: Body %q, want none", ev.Body)
	}
	if ev.Payload != nil {
		t.Errorf("row after expunge: Payload %s, want none", ev.Payload)
	}
	if len(ev.BodySHA256) != 32 {
		t.Errorf("row after expunge: BodySHA256 of %d bytes, want the receipt's 32", len(ev.BodySHA256))
	}
	res, err := f.store.EventInsert(ctx, storage.EventInsertParams{Source: "stripe", EventID: "evt_gdpr", EventType: "x", Body: secret})
	if err != nil || res.Inserted {
		t.Fatalf("redelivery after expunge: %+v, %v", res, err)
	}

	// Again: nothing to do, no error.
	if _, err := a.Expunge(ctx, "stripe", "evt_gdpr", privacyOfficer); err != nil {
		t.Fatalf("second expunge: %v", err)
	}
	if _, err := a.Expunge(ctx, "stripe", "evt_nope", privacyOfficer); inbox.CauseOf(err) != inbox.CauseEventNotFound {
		t.Fatalf("expunge of a missing event: %v", err)
	}
	f.check()
}

func TestExpungeNotArchived(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.insert("stripe", "evt_1", []byte(`{"secret":"x"}`))
	f.process(2 * time.Hour)
	a := f.archiver(nil)
	if _, err := a.Expunge(ctx, "stripe", "evt_1", privacyOfficer); err != nil {
		t.Fatal(err)
	}
	if _, err := readBody(ctx, a, f.store, "stripe", "evt_1"); !errors.Is(err, archive.ErrExpunged) {
		t.Fatalf("read: %v", err)
	}
	// Nothing left to archive.
	if res := f.run(a); res.Events != 0 || len(f.objects()) != 0 {
		t.Fatalf("run after expunge: %+v", res)
	}
	res, err := f.store.EventInsert(ctx, storage.EventInsertParams{Source: "stripe", EventID: "evt_1", Body: []byte(`{"secret":"x"}`)})
	if err != nil || res.Inserted {
		t.Fatalf("redelivery: %+v, %v", res, err)
	}
}

// TestExpungeRemovesOrphanCopy: a crashed batch left an object holding the
// body of an event that is not archived; expunging that event removes it.
func TestExpungeRemovesOrphanCopy(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.insert("stripe", "evt_1", []byte(`{"secret":"orphan-marker"}`))
	f.process(2 * time.Hour)
	crashed := f.archiver(nil)
	archive.CrashAfterUpload(crashed)
	_, _ = crashed.RunOnce(ctx)
	if objs := f.objects(); len(objs) != 1 {
		t.Fatalf("after a crash: %v", objs)
	}
	if _, err := f.archiver(nil).Expunge(ctx, "stripe", "evt_1", privacyOfficer); err != nil {
		t.Fatal(err)
	}
	if objs := f.objects(); len(objs) != 0 {
		t.Fatalf("the orphan copy survived the expunge: %v", objs)
	}
	f.check()
}

func TestConcurrentExpungesInOneObject(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	bodies := f.bulkInsert("stripe", 40, 100)
	f.process(2 * time.Hour)
	a := f.archiver(nil)
	f.run(a)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 1; i <= 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := a.Expunge(ctx, "stripe", fmt.Sprintf("evt_%d", i), privacyOfficer)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Every expunge stuck (none undone by another's rewrite), every other
	// event is intact.
	data, err := f.blobs.Get(ctx, f.objects()[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	ls := lines(t, data)
	if len(ls) != 20 {
		t.Fatalf("%d lines left, want 20", len(ls))
	}
	for i := 1; i <= 40; i++ {
		id := fmt.Sprintf("evt_%d", i)
		got, err := readBody(ctx, a, f.store, "stripe", id)
		if i <= 20 && !errors.Is(err, archive.ErrExpunged) {
			t.Fatalf("%s: %v", id, err)
		}
		if i > 20 && (err != nil || !bytes.Equal(got, bodies[id])) {
			t.Fatalf("%s: %v", id, err)
		}
	}
	f.check()
}

func TestCorruptArchiveIsRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.insert("stripe", "evt_1", []byte(`{"id":"evt_1"}`))
	f.insert("stripe", "evt_2", []byte(`{"id":"evt_2"}`))
	f.process(2 * time.Hour)
	a := f.archiver(nil)
	key := f.run(a).Keys[0]
	data, _ := f.blobs.Get(ctx, key)
	// Swap the two members: each event's range now holds the other one.
	var off2 int64
	_ = f.pool.QueryRow(ctx, `SELECT archive_offset FROM webhook_events WHERE event_id = 'evt_2'`).Scan(&off2)
	swapped := append(append([]byte{}, data[off2:]...), data[:off2]...)
	if _, err := f.blobs.Put(ctx, key, swapped, archive.ContentType); err != nil {
		t.Fatal(err)
	}
	if _, err := readBody(ctx, a, f.store, "stripe", "evt_1"); !errors.Is(err, archive.ErrCorrupt) || inbox.CauseOf(err) != inbox.CauseArchiveCorrupt {
		t.Fatalf("read of a corrupt archive: %v", err)
	}
	// An expunge must not overwrite what is not its event.
	if _, err := a.Expunge(ctx, "stripe", "evt_1", privacyOfficer); inbox.CauseOf(err) != inbox.CauseArchiveCorrupt {
		t.Fatalf("expunge in a corrupt archive: %v", err)
	}
	if ev, _ := f.store.EventGetByKey(ctx, "stripe", "evt_1"); f.int(`SELECT count(*) FROM webhook_events WHERE expunged_at IS NOT NULL`) != 0 {
		t.Fatalf("expunge half done: %+v", ev)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := archive.New(archive.Config{}, archive.Deps{}); err == nil {
		t.Fatal("no store accepted")
	}
	if _, err := archive.New(archive.Config{}, archive.Deps{Store: &storage.Store{}}); err == nil {
		t.Fatal("no bucket accepted")
	}
	if _, err := archive.New(archive.Config{BatchSize: -1}, archive.Deps{Store: &storage.Store{}, Blobs: &blobstore.Store{}}); err == nil {
		t.Fatal("negative batch size accepted")
	}
}

// TestExpungeBeforeProcessing: an event erased before it was processed
// leaves the drain (outcome "expunged") instead of reaching a handler
// without its body.
func TestExpungeBeforeProcessing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.insert("stripe", "evt_early", []byte(`{"secret":"x"}`))
	if _, err := f.archiver(nil).Expunge(ctx, "stripe", "evt_early", privacyOfficer); err != nil {
		t.Fatal(err)
	}
	var outcome string
	var due bool
	err := f.pool.QueryRow(ctx, `SELECT outcome, processed_at IS NULL FROM webhook_events WHERE event_id = 'evt_early'`).Scan(&outcome, &due)
	if err != nil || outcome != "expunged" || due {
		t.Fatalf("outcome = %q, still due = %v, %v", outcome, due, err)
	}
}

// privacyOfficer is who the tests' expunges are recorded as.
var privacyOfficer = inbox.Actor{Name: "dpo@test", Reason: "erasure request"}
