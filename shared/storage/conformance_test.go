package storage_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The conformance suite: every query of the project runs, with its results
// checked, in every query mode the functions may be configured with
// (DATABASE_QUERY_MODE): behind RDS Proxy or PgBouncer they run without
// prepared statements (exec), where a value pgx would send in binary in one
// mode travels as text in another. A pgx tracer records the name of every
// statement that runs (generated SQL starts with its "-- name:" line), and
// the suite fails when a query declared anywhere in shared/ (but the
// application's handler packages) did not run in every mode: a new query
// without a conformance case fails here.
//
// Under -short it runs in the default mode (cache_statement) alone, a fifth
// of the work: the inner loop still fails on a query no case runs, and
// `make test` runs every mode.

// conformanceCase exercises a group of queries on a database of its own.
type conformanceCase struct {
	name string
	run  func(t *testing.T, e *env)
}

// env is what a case runs with: a store on a pool in one query mode.
type env struct {
	ctx   context.Context
	mode  string
	store *storage.Store
	pool  *pgxpool.Pool
	// now is the database's clock when the case started.
	now time.Time
}

func TestConformance(t *testing.T) {
	t.Parallel()
	rec := &recorder{seen: map[string]map[string]bool{}}
	modes := slices.Sorted(maps.Keys(storage.QueryModes))
	if testing.Short() {
		modes = []string{"cache_statement"}
	}
	t.Run("modes", func(t *testing.T) {
		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) {
				t.Parallel()
				for _, c := range conformanceCases {
					t.Run(c.name, func(t *testing.T) {
						t.Parallel()
						c.run(t, newEnv(t, mode, rec))
					})
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	declared := declaredQueries(t)
	if len(declared) < 40 {
		t.Fatalf("found only %d declared queries in shared/: the search is broken", len(declared))
	}
	for _, mode := range modes {
		for _, name := range declared {
			if !rec.ran(mode, name) {
				t.Errorf("query %s never ran in query mode %s: add it to a conformance case", name, mode)
			}
		}
	}
}

// recorder notes which named statements ran in which mode.
type recorder struct {
	mu   sync.Mutex
	seen map[string]map[string]bool
}

var nameLine = regexp.MustCompile(`^-- name: (\w+) :`)

func (r *recorder) add(mode, sql string) {
	m := nameLine.FindStringSubmatch(sql)
	if m == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[mode] == nil {
		r.seen[mode] = map[string]bool{}
	}
	r.seen[mode][m[1]] = true
}

func (r *recorder) ran(mode, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[mode][name]
}

// tracer is the pgx hook that feeds the recorder.
type tracer struct {
	rec  *recorder
	mode string
}

func (tr tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	tr.rec.add(tr.mode, data.SQL)
	return ctx
}

func (tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// declaredQueries returns the name of every query of shared/ but the
// application's handler packages (shared/handlers), which a fork adds and
// changes and whose own tests run their queries as the processor's role:
// sqlc's generated code and the hand-written queries carry the same
// "-- name:" line.
func declaredQueries(t *testing.T) []string {
	t.Helper()
	decl := regexp.MustCompile("(?m)^(?:const \\w+ = `)?-- name: (\\w+) :")
	names := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path == filepath.Join("..", "handlers") {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(src, -1) {
			names[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(names))
}

func newEnv(t *testing.T, mode string, rec *recorder) *env {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = storage.QueryModes[mode]
	cfg.ConnConfig.Tracer = tracer{rec: rec, mode: mode}
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "10s"
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := &env{ctx: t.Context(), mode: mode, store: storage.New(pool), pool: pool}
	if e.now, err = e.store.PGNow(e.ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var conformanceCases = []conformanceCase{
	{"webhook_events/insert", testEventInsert},
	{"webhook_events/insert_race", testEventInsertRace},
	{"webhook_events/insert_guard", testEventInsertGuard},
	{"webhook_events/insert_guard_race", testEventInsertGuardRace},
	{"webhook_events/get", testEventGet},
	{"webhook_events/processing", testEventProcessing},
	{"webhook_events/interrupted", testEventInterrupted},
	{"webhook_events/next_wake", testEventNextWake},
	{"webhook_events/list", testEventList},
	{"webhook_events/search", testEventSearch},
	{"webhook_events/replay", testEventReplay},
	{"webhook_events/replay in calls", testEventReplayInCalls},
	{"webhook_dead_letters", testDeadLetters},
	{"webhook_dead_letters/open_stats", testDeadLetterOpenStats},
	{"webhook_dead_letters/page", testDeadLetterPage},
	{"webhook_dead_letters/resolve", testDeadLetterResolve},
	{"webhook_dead_letters/requeue in chunks", testDeadLetterRequeueInChunks},
	{"webhook_events/discard", testEventDiscard},
	{"webhook_operator_actions/page", testOperatorActionPage},
	{"webhook_events/by_event_id", testEventListByEventID},
	{"webhook_events/list_window", testEventListWindow},
	{"webhook_archive_objects/batch", testArchiveBatch},
	{"webhook_archive_objects/retention", testBodyRetention},
	{"webhook_archive_objects/batch_changed", testArchiveBatchChanged},
	{"webhook_archive_objects/orphans", testArchiveOrphans},
	{"webhook_archive_objects/expunge", testArchiveExpunge},
	{"webhook_rejections", testRejections},
	{"webhook_source_activity", testSourceActivity},
	{"webhook_quarantine", testQuarantine},
	{"time_buckets", testTimeBuckets},
	{"webhook_payload_mismatches", testPayloadMismatches},
	{"pg_misc", testPGMisc},
	{"webhook_pauses", testPauses},
}

// The receiver's insert: new, duplicate, duplicate with another body, and
// bodies JSONB cannot hold (stored raw-only, never refused), on the pool
// and in a transaction (where the fallback runs under a savepoint).
func testEventInsert(t *testing.T, e *env) {
	s := e.store
	body := []byte(`{"id":"evt_1","n":"\u0000"}`) // JSON that JSONB refuses
	p := storage.EventInsertParams{Source: "shop", SourceKind: "shopify", EventID: "evt_1", EventType: "orders/create", Body: body,
		Metadata: map[string]string{"shopify_event_id": "98880550-7158-44d4-b7cd-2c97c8a091b5", "odd": "a\x00b"}}
	res := must[storage.EventInsertResult](t)(s.EventInsert(e.ctx, p))
	if !res.Inserted || res.PayloadStored || res.ID == 0 {
		t.Fatalf("insert: %+v", res)
	}
	ev := must[*inbox.Event](t)(s.EventGetByKey(e.ctx, "shop", "evt_1"))
	if !field.Check(t, "stored",
		field.Is("Body", string(ev.Body), bytes.Equal(ev.Body, body), "the body sent"),
		field.Is("Payload", string(ev.Payload), ev.Payload == nil, "nil"),
		field.Is(`Metadata["shopify_event_id"]`, ev.Metadata["shopify_event_id"], ev.Metadata["shopify_event_id"] != "", "set"),
		field.Eq(`Metadata["odd"]`, ev.Metadata["odd"], "ab"),
		field.Eq("SourceKind", ev.SourceKind, "shopify"),
		field.Eq("Type", ev.Type, "orders/create"),
		field.Eq("BodySize", ev.BodySize, len(body)),
		field.Eq("State", ev.State(e.now), inbox.StatePending),
	) {
		t.FailNow()
	}
	if sum := sha256.Sum256(body); !bytes.Equal(ev.BodySHA256, sum[:]) {
		t.Fatal("stored hash is not the body's")
	}
	byID := must[*inbox.Event](t)(s.EventGetByID(e.ctx, res.ID))
	if byID.EventID != "evt_1" || byID.Source != "shop" {
		t.Fatalf("by id: %+v", byID)
	}
	same := must[storage.EventInsertResult](t)(s.EventInsert(e.ctx, p))
	if same.Inserted || same.Mismatch() || same.ID != res.ID {
		t.Fatalf("duplicate: %+v", same)
	}
	p.Body = []byte(`{"id":"evt_1"}`)
	dup := must[storage.EventInsertResult](t)(s.EventInsert(e.ctx, p))
	if dup.Inserted || !dup.Mismatch() || dup.ID != res.ID {
		t.Fatalf("duplicate with another body: %+v", dup)
	}
	// Bodies that are not JSONB-able are stored raw-only, whether they look
	// like JSON (Postgres refuses them) or not.
	for i, b := range []string{`{"id":"x",`, `[1,2`, `payload=%7B%7D&x=1`, ``, `{"a":1}`} {
		id := "e" + string(rune('0'+i))
		r := must[storage.EventInsertResult](t)(s.EventInsert(e.ctx, storage.EventInsertParams{Source: "raw", EventID: id, Body: []byte(b)}))
		if !r.Inserted || r.PayloadStored != (b == `{"a":1}`) {
			t.Fatalf("body %q: %+v", b, r)
		}
		got := must[*inbox.Event](t)(s.EventGetByKey(e.ctx, "raw", id))
		if string(got.Body) != b || (got.Payload == nil) == (b == `{"a":1}`) {
			t.Fatalf("body %q read back as %q, payload %q", b, got.Body, got.Payload)
		}
	}
	// In a transaction, a refused payload does not abort the transaction.
	tx := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer tx.Rollback(e.ctx)
	r := must[storage.EventInsertResult](t)(tx.EventInsert(e.ctx, storage.EventInsertParams{Source: "tx", EventID: "nul", Body: []byte(`{"n":"\u0000"}`)}))
	r2 := must[storage.EventInsertResult](t)(tx.EventInsert(e.ctx, storage.EventInsertParams{Source: "tx", EventID: "ok", Body: []byte(`{"n":1}`)}))
	check(t, tx.Commit(e.ctx))
	if !field.Check(t, "in a transaction",
		field.Eq("first Inserted", r.Inserted, true),
		field.Eq("first PayloadStored", r.PayloadStored, false),
		field.Eq("second Inserted", r2.Inserted, true),
		field.Eq("second PayloadStored", r2.PayloadStored, true),
	) {
		t.FailNow()
	}
}

// Two receivers insert the same event at once: the second waits for the
// first's row, sees it only after its own snapshot, and re-reads it.
func testEventInsertRace(t *testing.T, e *env) {
	s := e.store
	p := storage.EventInsertParams{Source: "race", EventID: "evt_race", Body: []byte(`{"id":"evt_race"}`)}
	first := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer first.Rollback(e.ctx)
	won := must[storage.EventInsertResult](t)(first.EventInsert(e.ctx, p))
	done := make(chan storage.EventInsertResult, 1)
	errc := make(chan error, 1)
	go func() {
		res, err := s.EventInsert(e.ctx, p)
		errc <- err
		done <- res
	}()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		var waiting int
		// A wait on another transaction's row has no database in
		// pg_locks: join the sessions of this test's database.
		err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE NOT l.granted AND a.datname = current_database()`).Scan(&waiting)
		return err == nil && waiting > 0, "the second insert is not waiting on the first"
	})
	check(t, first.Commit(e.ctx))
	check(t, <-errc)
	lost := <-done
	if !field.Check(t, "the second insert",
		field.Eq("Inserted", lost.Inserted, false),
		field.Eq("ID", lost.ID, won.ID),
		field.Is("StoredSHA256", fmt.Sprintf("%x", lost.StoredSHA256), bytes.Equal(lost.StoredSHA256, won.BodySHA256[:]), fmt.Sprintf("the first's %x", won.BodySHA256)),
		field.Eq("Mismatch()", lost.Mismatch(), false),
	) {
		t.FailNow()
	}
}

// A source whose id the signature does not cover (GuardBody) stores each
// body once: the same body under another id, or with another type, is a
// suspected replay of the stored event, never a new row; the same id is a
// plain duplicate, as for every source. Sources without the guard, and
// other sources, are not affected.
func testEventInsertGuard(t *testing.T, e *env) {
	s := e.store
	body := []byte(`{"action":"opened","issue":{"id":1}}`)
	p := storage.EventInsertParams{Source: "gh", SourceKind: "github", EventID: "d-1", EventType: "issues", Body: body, GuardBody: true}
	first := must[storage.EventInsertResult](t)(s.EventInsert(e.ctx, p))
	if !first.Inserted || first.SuspectedReplay {
		t.Fatalf("first: %+v", first)
	}
	redelivery := must[storage.EventInsertResult](t)(s.EventInsert(e.ctx, p))
	if !field.Check(t, "the sender's redelivery (same id, same body), want a plain duplicate",
		field.Eq("Inserted", redelivery.Inserted, false),
		field.Eq("SuspectedReplay", redelivery.SuspectedReplay, false),
		field.Eq("Mismatch()", redelivery.Mismatch(), false),
		field.Eq("ID", redelivery.ID, first.ID),
	) {
		t.FailNow()
	}
	replay := p
	replay.EventID, replay.EventType = "d-2", "push"
	r := must[storage.EventInsertResult](t)(s.EventInsert(e.ctx, replay))
	if !field.Check(t, "same body under a new id and type, want a suspected replay of d-1",
		field.Eq("Inserted", r.Inserted, false),
		field.Eq("SuspectedReplay", r.SuspectedReplay, true),
		field.Eq("ID", r.ID, first.ID),
		field.Eq("StoredEventID", r.StoredEventID, "d-1"),
		field.Eq("StoredType", r.StoredType, "issues"),
		field.Eq("Mismatch()", r.Mismatch(), false),
	) {
		t.FailNow()
	}
	if _, err := s.EventGetByKey(e.ctx, "gh", "d-2"); !errors.Is(err, storage.ErrEventNotFound) {
		t.Fatalf("the replay was stored: %v", err)
	}
	changed := p
	changed.Body = []byte(`{"action":"closed","issue":{"id":1}}`)
	if m := must[storage.EventInsertResult](t)(s.EventInsert(e.ctx, changed)); m.Inserted || m.SuspectedReplay || !m.Mismatch() {
		t.Fatalf("stored id, another body: %+v, want a payload mismatch", m)
	}
	// Per source, and only where guarded.
	other := replay
	other.Source = "gh-other"
	if o := must[storage.EventInsertResult](t)(s.EventInsert(e.ctx, other)); !o.Inserted {
		t.Fatalf("another source with the body: %+v, want inserted", o)
	}
	unguarded := storage.EventInsertParams{Source: "stripe", EventID: "evt_1", Body: body}
	must[storage.EventInsertResult](t)(s.EventInsert(e.ctx, unguarded))
	unguarded.EventID = "evt_2"
	if u := must[storage.EventInsertResult](t)(s.EventInsert(e.ctx, unguarded)); !u.Inserted {
		t.Fatalf("unguarded source, same body, new id: %+v, want inserted", u)
	}
	// In a transaction too.
	tx := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer tx.Rollback(e.ctx)
	replay.EventID = "d-3"
	if r := must[storage.EventInsertResult](t)(tx.EventInsert(e.ctx, replay)); !r.SuspectedReplay || r.StoredEventID != "d-1" {
		t.Fatalf("in a transaction: %+v", r)
	}
}

// Concurrent deliveries of one body under different ids: exactly one is
// stored, however they interleave. One insert waits on the other's
// uncommitted row and becomes a suspected replay once it commits, or the
// event once it rolls back; a crowd of goroutines stores one row.
func testEventInsertGuardRace(t *testing.T, e *env) {
	s := e.store
	for _, commit := range []bool{true, false} {
		body := []byte(fmt.Sprintf(`{"race":%v}`, commit))
		p := storage.EventInsertParams{Source: "gh", EventID: fmt.Sprintf("first-%v", commit), EventType: "issues", Body: body, GuardBody: true}
		first := must[*storage.Tx](t)(s.Begin(e.ctx))
		won := must[storage.EventInsertResult](t)(first.EventInsert(e.ctx, p))
		done := make(chan storage.EventInsertResult, 1)
		errc := make(chan error, 1)
		go func() {
			q := p
			q.EventID = fmt.Sprintf("second-%v", commit)
			res, err := s.EventInsert(e.ctx, q)
			errc <- err
			done <- res
		}()
		poll.Until(t, 30*time.Second, func() (bool, string) {
			var waiting int
			err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE NOT l.granted AND a.datname = current_database()`).Scan(&waiting)
			return err == nil && waiting > 0, "the second insert is not waiting on the first"
		})
		if commit {
			check(t, first.Commit(e.ctx))
		} else {
			check(t, first.Rollback(e.ctx))
		}
		check(t, <-errc)
		second := <-done
		switch {
		case commit && (second.Inserted || !second.SuspectedReplay || second.ID != won.ID):
			t.Fatalf("after the first committed: %+v, want a suspected replay of %d", second, won.ID)
		case !commit && !second.Inserted:
			t.Fatalf("after the first rolled back: %+v, want inserted", second)
		}
	}

	const n = 16
	body := []byte(`{"crowd":true}`)
	results := make(chan storage.EventInsertResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := s.EventInsert(e.ctx, storage.EventInsertParams{Source: "crowd", EventID: fmt.Sprintf("d-%d", i), Body: body, GuardBody: true})
			if err != nil {
				t.Error(err)
			}
			results <- res
		})
	}
	wg.Wait()
	close(results)
	var inserted, replays int
	for r := range results {
		switch {
		case r.Inserted:
			inserted++
		case r.SuspectedReplay:
			replays++
		}
	}
	var rows int
	check(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM webhook_events WHERE provider = 'crowd'`).Scan(&rows))
	if inserted != 1 || replays != n-1 || rows != 1 {
		t.Fatalf("%d concurrent deliveries of one body: %d inserted, %d suspected replays, %d rows; want 1, %d, 1", n, inserted, replays, rows, n-1)
	}
}

func testEventGet(t *testing.T, e *env) {
	s := e.store
	if _, err := s.EventGetByID(e.ctx, 999); !errors.Is(err, storage.ErrEventNotFound) {
		t.Fatalf("by id: %v", err)
	}
	if _, err := s.EventGetByKey(e.ctx, "a", "nope"); !errors.Is(err, storage.ErrEventNotFound) {
		t.Fatalf("by key: %v", err)
	}
	tx := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer tx.Rollback(e.ctx)
	if _, err := tx.EventGetByKeyForUpdate(e.ctx, "a", "nope"); !errors.Is(err, storage.ErrEventNotFound) {
		t.Fatalf("for update: %v", err)
	}
	// Every column the factory sets comes back.
	want := factory.Event(e.ctx, t, tx, &factory.EventOpts{Source: "billing", SourceKind: "standard", Type: "invoice.paid",
		State: inbox.StateRetrying, Metadata: map[string]string{"k": "v"}, Now: e.now})
	got := must[*inbox.Event](t)(tx.EventGetByKeyForUpdate(e.ctx, "billing", want.EventID))
	if !field.Check(t, "read back",
		field.Eq("ID", got.ID, want.ID),
		field.Eq("Attempts", got.Attempts, 1),
		field.Eq("FailedAttempts", got.FailedAttempts, 1),
		field.Eq("Solo", got.Solo, true),
		field.Is("LastAttemptAt", got.LastAttemptAt, got.LastAttemptAt != nil, "set"),
		field.Is("LastError", got.LastError, got.LastError != "", "set"),
		field.Eq(`Metadata["k"]`, got.Metadata["k"], "v"),
		field.Eq("State", got.State(e.now), inbox.StateRetrying),
	) {
		t.FailNow()
	}
	h := must[[]inbox.Attempt](t)(tx.AttemptListByEvent(e.ctx, want.ID))
	if len(h) != 1 || h[0].Cause != inbox.CauseHandlerFailed || h[0].Outcome != inbox.AttemptFailed {
		t.Fatalf("history %+v", h)
	}
}

// A processor's life: claim in a transaction, record the claim, fail one
// event, release the claim; claim the failed one alone when due, apply it.
func testEventProcessing(t *testing.T, e *env) {
	s := e.store
	now := e.now.Add(time.Minute)
	evs := factory.Events(e.ctx, t, s, 3, &factory.EventOpts{Source: "shop", Now: e.now})
	backlog := must[storage.Backlog](t)(s.EventGetBacklog(e.ctx, now))
	if !field.Check(t, "backlog",
		field.Eq("Count", backlog.Count, 3),
		field.Eq("Due", backlog.Due, 3),
		field.Is("OldestDueAt", backlog.OldestDueAt, backlog.OldestDueAt != nil, "set"),
		field.Eq("OldestDueAge(now)", backlog.OldestDueAge(now), time.Minute),
	) {
		t.FailNow()
	}
	if due := must[storage.Due](t)(s.EventGetDue(e.ctx, now)); !due.Batch || due.Solo || due.Expired {
		t.Fatalf("due = %+v", due)
	}
	tx := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer tx.Rollback(e.ctx)
	// The budget holds the first body alone: the second is read later.
	budget := int64(evs[0].BodySize)
	got := must[storage.Claimed](t)(tx.EventClaimBatch(e.ctx, storage.ClaimParams{Now: now, Max: 2, BodyBudget: budget}))
	if len(got.Pauses) != 0 {
		t.Fatalf("pauses in force: %q, want none", got.Pauses)
	}
	claimed := got.Events
	if len(claimed) != 2 {
		t.Fatalf("claimed %d events, want 2: %+v", len(claimed), claimed)
	}
	if !field.Check(t, "claim",
		field.Eq("[0].ID", claimed[0].ID, evs[0].ID),
		field.Eq("[1].ID", claimed[1].ID, evs[1].ID),
		field.Eq("[0].BodyLoaded", claimed[0].BodyLoaded, true),
		field.Eq("[1].BodyLoaded", claimed[1].BodyLoaded, false),
		field.Eq("[0].HasPayload", claimed[0].HasPayload, true),
		field.Eq("[0].Body", string(claimed[0].Body), string(evs[0].Body)),
		field.Is("[0].Payload", string(claimed[0].Payload), claimed[0].Payload == nil, "nil"),
		field.Is("[1].Body", string(claimed[1].Body), claimed[1].Body == nil, "nil"),
	) {
		t.FailNow()
	}
	bodies := must[map[int64][]byte](t)(tx.EventListBodies(e.ctx, []int64{evs[1].ID}))
	if string(bodies[evs[1].ID]) != string(evs[1].Body) {
		t.Fatalf("bodies = %v", bodies)
	}
	claim := storage.Claim{Processor: "p", Token: "p#1", EventIDs: []int64{evs[0].ID, evs[1].ID}, ClaimedAt: now, LockedUntil: now.Add(time.Minute)}
	check(t, s.ClaimSet(e.ctx, claim))
	stats := must[storage.BacklogStats](t)(s.EventGetBacklogStats(e.ctx, now))
	if !field.Check(t, "stats",
		field.Eq("Count", stats.Count, 3),
		field.Eq("Due", stats.Due, 1),
		field.Eq("InFlight", stats.InFlight, 2),
		field.Eq("Retrying", stats.Retrying, 0),
		field.Is("OldestCreatedAt", stats.OldestCreatedAt, stats.OldestCreatedAt != nil, "set"),
	) {
		t.FailNow()
	}
	if live := must[[]storage.Claim](t)(s.ClaimListLive(e.ctx, now)); len(live) != 1 || live[0].Token != "p#1" || len(live[0].EventIDs) != 2 {
		t.Fatalf("live claims = %+v", live)
	}
	// Another transaction takes the third event only: the claim's are
	// locked, and recorded.
	other := must[*storage.Tx](t)(s.Begin(e.ctx))
	if c := must[storage.Claimed](t)(other.EventClaimBatch(e.ctx, storage.ClaimParams{Now: now, Max: 10, BodyBudget: 1 << 20})).Events; len(c) != 1 || c[0].ID != evs[2].ID {
		t.Fatalf("concurrent claim = %+v", c)
	}
	check(t, other.Rollback(e.ctx))
	n := must[int](t)(tx.EventFinish(e.ctx, storage.EventFinishParams{Processor: "p", BatchSize: 2, Results: []storage.AttemptResult{
		{ID: evs[0].ID, Outcome: inbox.AttemptFailed, Cause: inbox.CauseHandlerFailed, Error: "boom", StartedAt: now, FinishedAt: now, NextAttemptAt: now.Add(time.Second)},
		{ID: evs[1].ID, Outcome: inbox.AttemptHandled, StartedAt: now, FinishedAt: now},
	}}))
	if n != 2 {
		t.Fatalf("recorded %d", n)
	}
	if ok := must[bool](t)(tx.ClaimRelease(e.ctx, "p", "p#2", now)); ok {
		t.Fatal("released a claim by a foreign token")
	}
	if ok := must[bool](t)(tx.ClaimRelease(e.ctx, "p", "p#1", now)); !ok {
		t.Fatal("release: not ours")
	}
	check(t, tx.Commit(e.ctx))
	failed := must[*inbox.Event](t)(s.EventGetByID(e.ctx, evs[0].ID))
	if !field.Check(t, "after failure",
		field.Eq("LastError", failed.LastError, "boom"),
		field.Eq("Attempts", failed.Attempts, 1),
		field.Eq("FailedAttempts", failed.FailedAttempts, 1),
		field.Eq("Solo", failed.Solo, true),
		field.Eq("ClaimedBy", failed.ClaimedBy, ""),
		field.Eq("State", failed.State(now), inbox.StateRetrying),
		field.Is("NextAttemptAt", failed.NextAttemptAt, failed.NextAttemptAt.Equal(now.Add(time.Second)), "a second after the failure"),
	) {
		t.FailNow()
	}
	if done := must[*inbox.Event](t)(s.EventGetByID(e.ctx, evs[1].ID)); done.State(now) != inbox.StateProcessed || done.Attempts != 1 {
		t.Fatalf("processed: %+v", done)
	}
	// The failed event is no batch's any more: it runs alone, when due.
	later := now.Add(2 * time.Second)
	if due := must[storage.Due](t)(s.EventGetDue(e.ctx, later)); !due.Batch || !due.Solo {
		t.Fatalf("due = %+v", due)
	}
	tx = must[*storage.Tx](t)(s.Begin(e.ctx))
	if c := must[storage.Claimed](t)(tx.EventClaimBatch(e.ctx, storage.ClaimParams{Now: later, Max: 10, BodyBudget: 1 << 20})).Events; len(c) != 1 || c[0].ID != evs[2].ID {
		t.Fatalf("batch claim = %+v", c)
	}
	solo := must[storage.Claimed](t)(tx.EventClaimSolo(e.ctx, later, 1<<20)).Events
	if len(solo) != 1 {
		t.Fatalf("solo claim of %d events, want 1: %+v", len(solo), solo)
	}
	if !field.Check(t, "solo claim",
		field.Eq("ID", solo[0].ID, evs[0].ID),
		field.Eq("FailedAttempts", solo[0].FailedAttempts, 1),
		field.Eq("BodyLoaded", solo[0].BodyLoaded, true),
	) {
		t.FailNow()
	}
	n = must[int](t)(tx.EventFinish(e.ctx, storage.EventFinishParams{Processor: "p", BatchSize: 1, Results: []storage.AttemptResult{
		{ID: evs[0].ID, Outcome: inbox.AttemptHandled, StartedAt: later, FinishedAt: later},
		{ID: evs[2].ID, Outcome: inbox.AttemptUnhandled, StartedAt: later, FinishedAt: later},
	}}))
	check(t, tx.Commit(e.ctx))
	done := must[*inbox.Event](t)(s.EventGetByID(e.ctx, evs[0].ID))
	if !field.Check(t, "processed",
		field.Eq("EventFinish's rows", n, 2),
		field.Eq("Outcome", done.Outcome, inbox.OutcomeHandled),
		field.Is("ProcessedAt", done.ProcessedAt, done.ProcessedAt != nil, "set"),
		field.Eq("Attempts", done.Attempts, 2),
		field.Eq("State", done.State(later), inbox.StateProcessed),
	) {
		t.FailNow()
	}
	// Once processed, nothing records on it any more.
	if n := must[int](t)(s.EventFinish(e.ctx, storage.EventFinishParams{Processor: "p", BatchSize: 1, Results: []storage.AttemptResult{
		{ID: evs[0].ID, Outcome: inbox.AttemptHandled, StartedAt: later, FinishedAt: later}}})); n != 0 {
		t.Fatal("recorded twice")
	}
	if ok := must[bool](t)(s.EventLockClaimed(e.ctx, evs[0].ID)); ok {
		t.Fatal("a processed event locked for a fallback")
	}
	h := must[[]inbox.Attempt](t)(s.AttemptListByEvent(e.ctx, evs[0].ID))
	if len(h) != 2 {
		t.Fatalf("history of %d attempts, want 2: %+v", len(h), h)
	}
	if !field.Check(t, "history",
		field.Eq("[0].Outcome", h[0].Outcome, inbox.AttemptFailed),
		field.Eq("[0].BatchSize", h[0].BatchSize, 2),
		field.Eq("[1].Outcome", h[1].Outcome, inbox.AttemptHandled),
		field.Eq("[1].Processor", h[1].Processor, "p"),
	) {
		t.FailNow()
	}
	if b := must[storage.Backlog](t)(s.EventGetBacklog(e.ctx, later)); b.Count != 0 || b.OldestDueAt != nil {
		t.Fatalf("backlog after = %+v", b)
	}
}

// The next wake-up is the earliest next attempt of a waiting event or end
// of a live claim's lease; processed and dead events never count.
func testEventNextWake(t *testing.T, e *env) {
	s := e.store
	if next := must[*time.Time](t)(s.EventGetNextWake(e.ctx)); next != nil {
		t.Fatalf("empty: %v", next)
	}
	factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "a", State: inbox.StateProcessed, Now: e.now})
	factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "a", State: inbox.StateDead, Now: e.now})
	if next := must[*time.Time](t)(s.EventGetNextWake(e.ctx)); next != nil {
		t.Fatalf("only processed and dead events: %v", next)
	}
	retry := e.now.Add(time.Hour)
	factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "a", State: inbox.StateRetrying, NextAttemptAt: retry, Now: e.now})
	if next := must[*time.Time](t)(s.EventGetNextWake(e.ctx)); next == nil || !next.Equal(retry) {
		t.Fatalf("a retry at %s: %v", retry, next)
	}
	lease := e.now.Add(10 * time.Minute)
	factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "a", State: inbox.StateInFlight, NextAttemptAt: e.now.Add(2 * time.Hour),
		ClaimedUntil: &lease, Now: e.now})
	if next := must[*time.Time](t)(s.EventGetNextWake(e.ctx)); next == nil || !next.Equal(lease) {
		t.Fatalf("a lease ending at %s: %v", lease, next)
	}
	due := e.now.Add(-time.Minute)
	factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "a", NextAttemptAt: due, Now: e.now})
	if next := must[*time.Time](t)(s.EventGetNextWake(e.ctx)); next == nil || !next.Equal(due) {
		t.Fatalf("a due event at %s: %v", due, next)
	}
}

// A claim whose processor died is found past its lease; its events'
// attempts are recorded as interrupted, charged only to an event that ran
// alone, and such an event dies when that spends its attempts.
func testEventInterrupted(t *testing.T, e *env) {
	s := e.store
	now := e.now.Add(time.Minute)
	evs := factory.Events(e.ctx, t, s, 3, &factory.EventOpts{Now: e.now})
	batch := storage.Claim{Processor: "dead-a", Token: "a#1", EventIDs: []int64{evs[0].ID, evs[1].ID}, ClaimedAt: now, LockedUntil: now.Add(time.Minute)}
	alone := storage.Claim{Processor: "dead-b", Token: "b#1", EventIDs: []int64{evs[2].ID}, ClaimedAt: now, LockedUntil: now.Add(time.Minute)}
	check(t, s.ClaimSet(e.ctx, batch))
	check(t, s.ClaimSet(e.ctx, alone))
	tx := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer tx.Rollback(e.ctx)
	if c := must[[]storage.Claim](t)(tx.ClaimLockExpired(e.ctx, now, 10, time.Second)); len(c) != 0 {
		t.Fatalf("expired inside the lease: %+v", c)
	}
	later := now.Add(time.Minute)
	if due := must[storage.Due](t)(s.EventGetDue(e.ctx, later)); !due.Expired || due.Batch || due.Solo {
		t.Fatalf("due = %+v: the claims' events are theirs until recovered", due)
	}
	expired := must[[]storage.Claim](t)(tx.ClaimLockExpired(e.ctx, later, 10, time.Second))
	if len(expired) != 2 || !expired[0].ClaimedAt.Equal(now) {
		t.Fatalf("expired = %+v", expired)
	}
	// A fallback's lock keeps a recovery off a claim.
	other := must[*storage.Tx](t)(s.Begin(e.ctx))
	if c := must[[]storage.Claim](t)(other.ClaimLockExpired(e.ctx, later, 10, time.Second)); len(c) != 0 {
		t.Fatalf("claims locked twice: %+v", c)
	}
	check(t, other.Rollback(e.ctx))
	var attempts []storage.InterruptedAttempt
	for _, c := range expired {
		for _, id := range c.EventIDs {
			attempts = append(attempts, storage.InterruptedAttempt{ID: id, StartedAt: c.ClaimedAt, Processor: c.Processor, BatchSize: len(c.EventIDs)})
		}
	}
	rec := must[[]storage.RecordedInterruption](t)(tx.EventRecordInterrupted(e.ctx, storage.EventRecordInterruptedParams{
		Now: later, MaxAttempts: 1, Cause: inbox.CauseLeaseExpired, Error: "gone", Attempts: attempts}))
	deadIDs := []int64{}
	for _, r := range rec {
		if r.Dead {
			deadIDs = append(deadIDs, r.ID)
		}
		if r.Attempt != 1 || r.Source == "" || r.EventID == "" {
			t.Fatalf("recorded %+v", r)
		}
	}
	if len(rec) != 3 || len(deadIDs) != 1 || deadIDs[0] != evs[2].ID {
		t.Fatalf("recorded %+v", rec)
	}
	dls := must[map[int64]int64](t)(tx.EventDeadLetter(e.ctx, deadIDs))
	for _, c := range expired {
		if ok := must[bool](t)(tx.ClaimRelease(e.ctx, c.Processor, c.Token, later)); !ok {
			t.Fatalf("release %s", c.Token)
		}
	}
	check(t, tx.Commit(e.ctx))
	if dls[evs[2].ID] == 0 {
		t.Fatalf("dead letters = %v", dls)
	}
	inBatch := must[*inbox.Event](t)(s.EventGetByID(e.ctx, evs[0].ID))
	if !field.Check(t, "interrupted in a batch",
		field.Eq("Attempts", inBatch.Attempts, 1),
		field.Eq("FailedAttempts", inBatch.FailedAttempts, 0),
		field.Eq("Solo", inBatch.Solo, true),
		field.Eq("DeadAt", inBatch.DeadAt, nil),
		field.Eq("State", inBatch.State(later), inbox.StatePending),
	) {
		t.FailNow()
	}
	dead := must[*inbox.Event](t)(s.EventGetByID(e.ctx, evs[2].ID))
	if dead.DeadAt == nil || dead.FailedAttempts != 1 || dead.State(later) != inbox.StateDead {
		t.Fatalf("interrupted alone: %+v", dead)
	}
	dl := must[[]*inbox.DeadLetter](t)(s.DeadLetterListByEvent(e.ctx, evs[2].ID))
	if len(dl) != 1 || len(dl[0].Errors) != 1 || dl[0].Errors[0].Cause != inbox.CauseLeaseExpired {
		t.Fatalf("dead letter = %+v", dl)
	}
	h := must[[]inbox.Attempt](t)(s.AttemptListByEvent(e.ctx, evs[0].ID))
	if len(h) != 1 {
		t.Fatalf("history of %d attempts, want 1: %+v", len(h), h)
	}
	if !field.Check(t, "history",
		field.Eq("Outcome", h[0].Outcome, inbox.AttemptInterrupted),
		field.Eq("FinishedAt", h[0].FinishedAt, nil),
		field.Eq("BatchSize", h[0].BatchSize, 2),
		field.Eq("Processor", h[0].Processor, "dead-a"),
	) {
		t.FailNow()
	}
	// Empty claims of processors long gone are swept.
	if n := must[int](t)(s.ClaimDeleteIdle(e.ctx, later.Add(time.Hour))); n != 2 {
		t.Fatalf("swept %d idle claims", n)
	}
	// A fallback relocks one event at a time.
	tx = must[*storage.Tx](t)(s.Begin(e.ctx))
	if ok := must[bool](t)(tx.EventLockClaimed(e.ctx, evs[0].ID)); !ok {
		t.Fatal("a live event was not locked")
	}
	check(t, tx.Rollback(e.ctx))
	if ok := must[bool](t)(s.ClaimLock(e.ctx, "dead-a", "a#1")); ok {
		t.Fatal("a swept claim was locked")
	}
}

// The list's state filter selects exactly the events inbox.Event.State
// names, for every state, and pages backwards.
func testEventList(t *testing.T, e *env) {
	s := e.store
	byState := map[inbox.EventState]int64{}
	for _, st := range inbox.EventStates() {
		byState[st] = factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "shop", State: st, Now: e.now}).ID
	}
	factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "other", Now: e.now})
	for _, st := range inbox.EventStates() {
		got := must[[]*inbox.Event](t)(s.EventList(e.ctx, storage.EventFilter{Source: "shop", State: st}, e.now, 10))
		if len(got) != 1 {
			t.Errorf("state %s: %d events, want 1", st, len(got))
			continue
		}
		field.Check(t, "state "+string(st),
			field.Eq("ID", got[0].ID, byState[st]),
			field.Eq("State", got[0].State(e.now), st),
			field.Is("Body", string(got[0].Body), got[0].Body == nil, "nil"),
			field.Is("Payload", string(got[0].Payload), got[0].Payload == nil, "nil"),
		)
	}
	all := must[[]*inbox.Event](t)(s.EventList(e.ctx, storage.EventFilter{Source: "shop", CreatedFrom: e.now.Add(-time.Hour)}, e.now, 3))
	if len(all) != 3 || all[0].ID <= all[1].ID {
		t.Fatalf("first page: %d events", len(all))
	}
	next := must[[]*inbox.Event](t)(s.EventList(e.ctx, storage.EventFilter{Source: "shop", BeforeID: all[2].ID}, e.now, 10))
	if len(next) != len(byState)-3 {
		t.Fatalf("second page: %d events", len(next))
	}
	if none := must[[]*inbox.Event](t)(s.EventList(e.ctx, storage.EventFilter{EventType: "nope", CreatedTo: e.now}, e.now, 10)); len(none) != 0 {
		t.Fatalf("type filter: %d events", len(none))
	}
	if _, err := s.EventList(e.ctx, storage.EventFilter{State: "bogus"}, e.now, 10); err == nil {
		t.Fatal("unknown state accepted")
	}
	// Processed without a handler: only those, archived or not.
	unhandled := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "shop", State: inbox.StateProcessed, Outcome: inbox.OutcomeUnhandled, Now: e.now})
	got := must[[]*inbox.Event](t)(s.EventList(e.ctx, storage.EventFilter{Source: "shop", Outcome: inbox.OutcomeUnhandled}, e.now, 10))
	if len(got) != 1 || got[0].ID != unhandled.ID {
		t.Fatalf("outcome unhandled: %d events", len(got))
	}
	handled := must[[]*inbox.Event](t)(s.EventList(e.ctx, storage.EventFilter{Source: "shop", Outcome: inbox.OutcomeHandled}, e.now, 10))
	for _, ev := range handled {
		if ev.ID == unhandled.ID || ev.ProcessedAt == nil {
			t.Fatalf("outcome handled lists event %d", ev.ID)
		}
	}
	if _, err := s.EventList(e.ctx, storage.EventFilter{Outcome: "bogus"}, e.now, 10); err == nil {
		t.Fatal("unknown outcome accepted")
	}
	// The same, counted per route (make dev's start-up replay).
	counts := must[[]storage.UnhandledCount](t)(s.EventCountUnhandledByRoute(e.ctx))
	if !slices.ContainsFunc(counts, func(c storage.UnhandledCount) bool {
		return c.Source == "shop" && c.EventType == unhandled.Type && c.SourceKind == unhandled.SourceKind && c.Count == 1
	}) {
		t.Fatalf("unhandled per route: %+v", counts)
	}
}

// A search chunk reads exactly the next Chunk events of the window, source
// and type below BeforeID, newest first, and names those whose payload and
// metadata contain what is asked; the list keeps the hits by id and state.
func testEventSearch(t *testing.T, e *env) {
	s := e.store
	from := e.now.Add(-time.Hour)
	var ids []int64
	for i := range 5 {
		opts := &factory.EventOpts{Source: "srch", Body: []byte(fmt.Sprintf(`{"n":%d,"odd":%t}`, i, i%2 == 1)), Now: e.now, CreatedAt: from.Add(time.Duration(i+1) * time.Minute)}
		if i == 3 {
			opts.Metadata = map[string]string{"github_hook_id": "7"}
			opts.State = inbox.StateDead
		}
		ids = append(ids, factory.Event(e.ctx, t, s, opts).ID)
	}
	factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "other", Body: []byte(`{"odd":true}`), Now: e.now, CreatedAt: from.Add(3 * time.Minute)})
	q := storage.EventSearch{CreatedFrom: from, CreatedTo: e.now, Source: "srch", Match: `{"odd":true}`, BeforeID: 1 << 62, Chunk: 3}
	r := must[storage.EventSearchResult](t)(s.EventSearchChunk(e.ctx, q))
	field.Check(t, "first chunk", field.Eq("Scanned", r.Scanned, 3), field.Eq("LowestID", r.LowestID, ids[2]),
		field.Eq("LowestCreatedAt", r.LowestCreatedAt.Equal(from.Add(3*time.Minute)), true), field.Printed("Hits", r.Hits, []int64{ids[3]}))
	q.BeforeID = r.LowestID
	r = must[storage.EventSearchResult](t)(s.EventSearchChunk(e.ctx, q))
	field.Check(t, "last chunk", field.Eq("Scanned", r.Scanned, 2), field.Eq("LowestID", r.LowestID, ids[0]), field.Printed("Hits", r.Hits, []int64{ids[1]}))
	q.BeforeID, q.Match, q.Metadata, q.Chunk = 1<<62, "", `{"github_hook_id":"7"}`, 10
	r = must[storage.EventSearchResult](t)(s.EventSearchChunk(e.ctx, q))
	field.Check(t, "by metadata", field.Eq("Scanned", r.Scanned, 5), field.Printed("Hits", r.Hits, []int64{ids[3]}))
	q.CreatedTo = from
	r = must[storage.EventSearchResult](t)(s.EventSearchChunk(e.ctx, q))
	field.Check(t, "an empty window", field.Eq("Scanned", r.Scanned, 0), field.Eq("LowestID", r.LowestID, int64(0)),
		field.Eq("LowestCreatedAt", r.LowestCreatedAt.Equal(q.CreatedFrom), true), field.Printed("Hits", r.Hits, []int64{}))
	// Planned with its window every time, on one connection however
	// often it runs: a generic plan, which PostgreSQL may settle on after
	// five runs of a named statement, walks the primary key whatever the
	// window, and a small window's last chunk would read every older event.
	tx := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer func() { _ = tx.Rollback(e.ctx) }()
	for range 8 {
		must[storage.EventSearchResult](t)(tx.EventSearchChunk(e.ctx, q))
	}
	var generic int64
	if err := tx.Pgx().QueryRow(e.ctx, `SELECT coalesce(sum(generic_plans), 0)::bigint FROM pg_prepared_statements
		 WHERE statement LIKE '-- name: EventSearchChunk %'`).Scan(&generic); err != nil {
		t.Fatal(err)
	}
	field.Check(t, "plans", field.Eq("generic plans of the search chunk", generic, int64(0)))
	// The list by ids: alone, and after the state's own parameter.
	got := must[[]*inbox.Event](t)(s.EventList(e.ctx, storage.EventFilter{IDs: []int64{ids[1], ids[3]}}, e.now, 10))
	if len(got) != 2 || got[0].ID != ids[3] || got[1].ID != ids[1] {
		t.Fatalf("list by ids: %d events", len(got))
	}
	got = must[[]*inbox.Event](t)(s.EventList(e.ctx, storage.EventFilter{IDs: []int64{ids[1], ids[3]}, State: inbox.StatePending}, e.now, 10))
	if len(got) != 1 || got[0].ID != ids[1] {
		t.Fatalf("list by ids, pending: %d events", len(got))
	}
}

// The real run resets, in chunks, exactly what the dry run counted, each
// event once, and reports its progress; archived events are replayed too,
// and counted apart; every event keeps its attempts.
func testEventReplay(t *testing.T, e *env) {
	s := e.store
	now := e.now
	processed := func(source string, n int, at time.Time) []*inbox.Event {
		return factory.Events(e.ctx, t, s, n, &factory.EventOpts{Source: source, State: inbox.StateProcessed, ProcessedAt: &at, Now: now})
	}
	processed("a", 4, now.Add(-2*time.Hour)) // out of the window
	late := processed("a", 5, now.Add(-time.Minute))
	processed("b", 2, now.Add(-time.Minute))
	factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "a", State: inbox.StateArchived, ProcessedAt: new(now.Add(-time.Minute)), Now: now})

	if _, err := s.EventReplay(e.ctx, storage.ReplayFilter{}, storage.ReplayOptions{Now: now, DryRun: true}); err != storage.ErrEmptyReplayFilter {
		t.Fatalf("empty filter: %v", err)
	}
	f := storage.ReplayFilter{Source: "a", Outcome: inbox.OutcomeHandled, ProcessedFrom: now.Add(-time.Hour), ProcessedTo: now}
	dry := must[storage.ReplayResult](t)(s.EventReplay(e.ctx, f, storage.ReplayOptions{Now: now, DryRun: true}))
	if dry.Matched != 6 || dry.Replayed != 0 || dry.Archived != 1 {
		t.Fatalf("dry run = %+v", dry)
	}
	if _, err := s.EventReplay(e.ctx, f, storage.ReplayOptions{Now: now}); err != storage.ErrNoActor {
		t.Fatalf("replay without an actor: %v", err)
	}
	// A confirmed count the selection no longer has: refused before
	// anything is recorded or reset (the replay below resets all six).
	if stale, err := s.EventReplay(e.ctx, f, storage.ReplayOptions{Now: now, By: inbox.Actor{Name: "ops@test"}, Max: 10, Expect: new(5)}); err != storage.ErrCountChanged ||
		stale.Matched != 6 || stale.Replayed != 0 || stale.ActionID != 0 {
		t.Fatalf("replay with a stale count = %+v, %v", stale, err)
	}
	res := must[storage.ReplayResult](t)(s.EventReplay(e.ctx, f, storage.InChunks(storage.ReplayOptions{Now: now, By: inbox.Actor{Name: "ops@test", Reason: "incident 42"}}, 2)))
	if res.Matched != dry.Matched || res.Replayed != dry.Matched || res.Archived != 1 {
		t.Fatalf("replay = %+v", res)
	}
	for _, ev := range late {
		got := must[*inbox.Event](t)(s.EventGetByID(e.ctx, ev.ID))
		if !field.Check(t, "replayed event",
			field.Eq("ProcessedAt", got.ProcessedAt, nil),
			field.Eq("Outcome", got.Outcome, ""),
			field.Eq("Attempts", got.Attempts, 1),
			field.Eq("FailedAttempts", got.FailedAttempts, 0),
			field.Is("NextAttemptAt", got.NextAttemptAt, got.NextAttemptAt.Equal(now), "now"),
		) {
			t.FailNow()
		}
	}
	// The replay is recorded, each event linked to the record.
	acts := must[[]inbox.OperatorAction](t)(s.OperatorActionList(e.ctx, time.Time{}, 10))
	if len(acts) != 1 {
		t.Fatalf("%d actions, want 1: %+v", len(acts), acts)
	}
	if !field.Check(t, "action",
		field.Eq("ID", acts[0].ID, res.ActionID),
		field.Eq("Action", acts[0].Action, inbox.ActionReplay),
		field.Eq("Actor", acts[0].Actor, "ops@test"),
		field.Eq("Reason", acts[0].Reason, "incident 42"),
		field.Eq("Events", acts[0].Events, 6),
		field.Is("DBUser", acts[0].DBUser, acts[0].DBUser != "", "set"),
		field.Is("Filter", string(acts[0].Filter), strings.Contains(string(acts[0].Filter), `"source": "a"`), `"source": "a" in it`),
	) {
		t.FailNow()
	}
	if byEvent := must[[]inbox.OperatorAction](t)(s.OperatorActionListByEvent(e.ctx, late[0].ID)); len(byEvent) != 1 || byEvent[0].ID != res.ActionID {
		t.Fatalf("actions of an event = %+v", byEvent)
	}
	// The backlog holds exactly them, all due.
	b := must[storage.Backlog](t)(s.EventGetBacklog(e.ctx, now))
	if !field.Check(t, "backlog",
		field.Eq("Count", b.Count, 6),
		field.Eq("Due", b.Due, 6),
		field.Is("OldestDueAt", b.OldestDueAt, b.OldestDueAt != nil && b.OldestDueAt.Equal(now), "now"),
		field.Eq("OldestDueAge(now+1m)", b.OldestDueAge(now.Add(time.Minute)), time.Minute),
	) {
		t.FailNow()
	}
	// By id, one event.
	one := must[storage.ReplayResult](t)(s.EventReplay(e.ctx, storage.ReplayFilter{ID: processed("c", 1, now)[0].ID}, storage.ReplayOptions{Now: now, By: inbox.Actor{Name: "ops@test", Reason: "incident 42"}}))
	if one.Replayed != 1 || one.Next != nil {
		t.Fatalf("by id = %+v", one)
	}
}

// A replay done in several calls (Max): each call resets at most Max
// events, in id order, under the first call's record; the cursor never
// goes back, so an event reset and processed again meanwhile is not
// replayed twice, and an event processed after the first call's selection
// with a higher id is not taken.
func testEventReplayInCalls(t *testing.T, e *env) {
	s := e.store
	now := e.now
	by := inbox.Actor{Name: "ops@test", Reason: "in calls"}
	evs := factory.Events(e.ctx, t, s, 5, &factory.EventOpts{Source: "d", State: inbox.StateProcessed, Now: now})
	f := storage.ReplayFilter{Source: "d"}
	first := must[storage.ReplayResult](t)(s.EventReplay(e.ctx, f, storage.ReplayOptions{Now: now, By: by, Max: 2}))
	wantNext := storage.ReplayCursor{ActionID: first.ActionID, After: evs[1].ID, Through: evs[4].ID}
	if !field.Check(t, "first call",
		field.Eq("Matched", first.Matched, 5),
		field.Eq("Replayed", first.Replayed, 2),
		field.Is("ActionID", first.ActionID, first.ActionID != 0, "set"),
		field.Is("Next", first.Next, first.Next != nil && *first.Next == wantNext, fmt.Sprintf("&%+v", wantNext)),
	) {
		t.FailNow()
	}
	// Meanwhile the processor applies the first two again, and a new
	// event of the source is processed: neither belongs to the rest.
	if again := factory.ProcessDue(e.ctx, t, s, now); len(again) != 2 {
		t.Fatalf("processed again = %d events", len(again))
	}
	factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "d", State: inbox.StateProcessed, Now: now})
	if _, err := s.EventReplay(e.ctx, f, storage.ReplayOptions{Now: now, By: by, Max: 2, Continue: first.Next, DryRun: true}); err == nil {
		t.Fatal("a dry continuation was accepted")
	}
	total, next := first.Replayed, first.Next
	for next != nil {
		r := must[storage.ReplayResult](t)(s.EventReplay(e.ctx, f, storage.ReplayOptions{Now: now, By: by, Max: 2, Continue: next}))
		if r.ActionID != first.ActionID || r.Matched != 0 {
			t.Fatalf("continuation = %+v", r)
		}
		total, next = total+r.Replayed, r.Next
	}
	if total != 5 {
		t.Fatalf("replayed %d in all, want 5", total)
	}
	acts := must[[]inbox.OperatorAction](t)(s.OperatorActionListByEvent(e.ctx, evs[4].ID))
	if len(acts) != 1 || acts[0].ID != first.ActionID || acts[0].Events != 5 {
		t.Fatalf("the record = %+v", acts)
	}
	if again := must[[]inbox.OperatorAction](t)(s.OperatorActionListByEvent(e.ctx, evs[0].ID)); len(again) != 1 {
		t.Fatalf("the first event was replayed %d times", len(again))
	}
}

func testDeadLetters(t *testing.T, e *env) {
	s := e.store
	now := e.now
	dead := factory.Events(e.ctx, t, s, 2, &factory.EventOpts{Source: "shop", Type: "order", State: inbox.StateDead, Now: now})
	factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "other", Type: "x", State: inbox.StateDead, Now: now})
	if _, err := s.DeadLetterList(e.ctx, storage.DeadLetterFilter{}, 10); err != storage.ErrEmptyFilter {
		t.Fatalf("empty filter: %v", err)
	}
	f := storage.DeadLetterFilter{Source: "shop", EventType: "order", DeadFrom: now.Add(-time.Hour), DeadTo: now.Add(time.Hour)}
	list := must[[]*inbox.DeadLetter](t)(s.DeadLetterList(e.ctx, f, 10))
	if len(list) != 2 {
		t.Fatalf("%d dead letters, want 2: %+v", len(list), list)
	}
	if !field.Check(t, "first dead letter",
		field.Eq("EventPK", list[0].EventPK, dead[0].ID),
		field.Eq("Attempts", list[0].Attempts, 3),
		field.Eq("len(Errors)", len(list[0].Errors), 3),
		field.Is("Body", list[0].Body, list[0].Body != nil, "set"),
		field.Is("Payload", list[0].Payload, list[0].Payload != nil, "set"),
	) {
		t.FailNow()
	}
	if n := must[int](t)(s.DeadLetterCountRequeueable(e.ctx, storage.DeadLetterFilter{ID: list[0].ID})); n != 1 {
		t.Fatalf("count by id = %d", n)
	}
	counts := must[[]storage.DeadLetterCount](t)(s.DeadLetterCountByType(e.ctx))
	if len(counts) != 2 {
		t.Fatalf("%d counts by type, want 2: %+v", len(counts), counts)
	}
	if !field.Check(t, "first count by type",
		field.Eq("Source", counts[0].Source, "shop"),
		field.Eq("Count", counts[0].Count, 2),
		field.Is("OldestDeadAt", counts[0].OldestDeadAt, !counts[0].OldestDeadAt.IsZero(), "set"),
	) {
		t.FailNow()
	}
	if _, err := s.DeadLetterRequeue(e.ctx, f, storage.BulkOptions{Now: now, By: inbox.Actor{}}); err != storage.ErrNoActor {
		t.Fatalf("requeue without an actor: %v", err)
	}
	if n := must[storage.BulkResult](t)(s.DeadLetterRequeue(e.ctx, f, storage.BulkOptions{Now: now, By: inbox.Actor{Name: "ops@test", Reason: "incident 42"}})); n.Done != 2 {
		t.Fatalf("requeued %d", n.Done)
	}
	if n := must[int](t)(s.DeadLetterCountRequeueable(e.ctx, f)); n != 0 {
		t.Fatalf("still requeueable: %d", n)
	}
	back := must[*inbox.Event](t)(s.EventGetByID(e.ctx, dead[0].ID))
	if !field.Check(t, "requeued event",
		field.Eq("DeadAt", back.DeadAt, nil),
		field.Eq("Attempts", back.Attempts, 3),
		field.Eq("FailedAttempts", back.FailedAttempts, 0),
		field.Eq("Solo", back.Solo, true),
		field.Eq("State", back.State(now), inbox.StatePending),
	) {
		t.FailNow()
	}
	acts := must[[]inbox.OperatorAction](t)(s.OperatorActionListByEvent(e.ctx, dead[0].ID))
	if len(acts) != 1 {
		t.Fatalf("%d requeue records, want 1: %+v", len(acts), acts)
	}
	if !field.Check(t, "requeue record",
		field.Eq("Action", acts[0].Action, inbox.ActionRequeue),
		field.Eq("Events", acts[0].Events, 2),
		field.Is("Filter", string(acts[0].Filter), strings.Contains(string(acts[0].Filter), `"event_type": "order"`), `"event_type": "order" in it`),
	) {
		t.FailNow()
	}
	// An action changing named events (an expunge's way) records them all.
	id := must[int64](t)(s.OperatorActionRecord(e.ctx, inbox.ActionExpunge, inbox.Actor{Name: "ops@test", Reason: "incident 42"}, map[string]any{"id": dead[1].ID}, []int64{dead[1].ID}))
	if acts := must[[]inbox.OperatorAction](t)(s.OperatorActionListByEvent(e.ctx, dead[1].ID)); len(acts) != 2 || acts[1].ID != id || acts[1].Events != 1 {
		t.Fatalf("actions of the expunged event = %+v", acts)
	}
	if _, err := s.OperatorActionRecord(e.ctx, inbox.ActionExpunge, inbox.Actor{Name: strings.Repeat("x", 201)}, nil, nil); err == nil {
		t.Fatal("an actor's name of 201 bytes was recorded")
	}
	history := must[[]*inbox.DeadLetter](t)(s.DeadLetterListByEvent(e.ctx, dead[0].ID))
	if len(history) != 1 || history[0].RequeuedAt == nil {
		t.Fatalf("history = %+v", history)
	}
	if n := must[int](t)(s.DeadLetterExpunge(e.ctx, dead[0].ID)); n != 1 {
		t.Fatalf("dead letters expunged: %d, want 1", n)
	}
	h := must[[]*inbox.DeadLetter](t)(s.DeadLetterListByEvent(e.ctx, dead[0].ID))
	if !field.Check(t, "after expunge",
		field.Is("Body", h[0].Body, h[0].Body == nil, "nil"),
		field.Is("Payload", h[0].Payload, h[0].Payload == nil, "nil"),
		field.Is("len(Errors)", len(h[0].Errors), len(h[0].Errors) != 0, "some"),
		field.Eq("LastError", h[0].LastError, storage.Redacted),
	) {
		t.FailNow()
	}
	for _, x := range h[0].Errors {
		if x.Error != storage.Redacted || x.Cause == "" || x.Attempt == 0 {
			t.Fatalf("history after expunge: %+v", h[0].Errors)
		}
	}
	// Again: nothing left to erase.
	if n := must[int](t)(s.DeadLetterExpunge(e.ctx, dead[0].ID)); n != 0 {
		t.Fatalf("dead letters expunged again: %d, want 0", n)
	}
}

// archiveReady stores n events of source "a" processed an hour ago.
func archiveReady(t *testing.T, e *env, n int) []*inbox.Event {
	t.Helper()
	return factory.Events(e.ctx, t, e.store, n, &factory.EventOpts{Source: "a", State: inbox.StateProcessed,
		ProcessedAt: new(e.now.Add(-time.Hour)), Now: e.now})
}

func archiveParams(e *env) storage.EventArchiveParams {
	return storage.EventArchiveParams{ProcessedBefore: e.now, Limit: 10}
}

// A whole batch as the archiver runs it: choose, prepare, lock, mark,
// commit.
func testArchiveBatch(t *testing.T, e *env) {
	s := e.store
	evs := archiveReady(t, e, 3)
	if n := must[int64](t)(s.EventCountArchivable(e.ctx, e.now)); n != 3 {
		t.Fatalf("archivable = %d", n)
	}
	c := must[storage.ArchiveCandidates](t)(s.EventListArchiveCandidates(e.ctx, archiveParams(e)))
	if len(c.IDs) != 3 || c.Source != "a" || c.FirstCreatedAt.IsZero() {
		t.Fatalf("candidates %+v", c)
	}
	byBytes := must[storage.ArchiveCandidates](t)(s.EventListArchiveCandidates(e.ctx, storage.EventArchiveParams{ProcessedBefore: e.now, Limit: 10, MaxBytes: 1}))
	if len(byBytes.IDs) != 1 {
		t.Fatalf("a byte budget below one body still takes exactly one event: %+v", byBytes)
	}
	check(t, s.ArchiveObjectPrepare(e.ctx, "k", c.Source))
	tx := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer tx.Rollback(e.ctx)
	check(t, tx.PGSetIdleInTransactionTimeout(e.ctx, time.Minute))
	if ok := must[bool](t)(tx.ArchiveObjectLockPending(e.ctx, "k")); !ok {
		t.Fatal("pending row not locked")
	}
	locked := must[[]*inbox.Event](t)(tx.EventLockForArchive(e.ctx, c.IDs))
	if len(locked) != 3 || locked[0].Body == nil || locked[0].ID != evs[0].ID {
		t.Fatalf("locked %d", len(locked))
	}
	var locs []storage.ArchiveLocation
	for i, ev := range locked {
		locs = append(locs, storage.ArchiveLocation{EventPK: ev.ID, Offset: int64(i * 10), Length: 10})
	}
	// A location outside the batch is refused.
	if err := tx.EventMarkArchived(e.ctx, "k", []storage.ArchiveLocation{{EventPK: 999, Offset: 0, Length: 1}}); err == nil {
		t.Fatal("marked an event that is not in the batch")
	}
	check(t, tx.Rollback(e.ctx))
	tx = must[*storage.Tx](t)(s.Begin(e.ctx))
	must[bool](t)(tx.ArchiveObjectLockPending(e.ctx, "k"))
	must[[]*inbox.Event](t)(tx.EventLockForArchive(e.ctx, c.IDs))
	check(t, tx.EventMarkArchived(e.ctx, "k", locs))
	sum := sha256.Sum256([]byte("object"))
	check(t, tx.ArchiveObjectCommit(e.ctx, inbox.ArchiveObject{Key: "k", EventCount: 3, Size: 30, SHA256: sum[:]}))
	check(t, tx.Commit(e.ctx))
	check(t, tx.Rollback(e.ctx)) // after Commit: nothing, no error

	got := must[*inbox.Event](t)(s.EventGetByKey(e.ctx, "a", evs[1].EventID))
	if !field.Check(t, "archived event",
		field.Is("Body", string(got.Body), got.Body == nil, "nil"),
		field.Is("Payload", string(got.Payload), got.Payload == nil, "nil"),
		field.Eq("ArchiveKey", got.ArchiveKey, "k"),
		field.Eq("ArchiveOffset", got.ArchiveOffset, 10),
		field.Eq("ArchiveLength", got.ArchiveLength, 10),
		field.Eq("State", got.State(e.now), inbox.StateArchived),
	) {
		t.FailNow()
	}
	o := must[*inbox.ArchiveObject](t)(s.ArchiveObjectGet(e.ctx, "k"))
	if !field.Check(t, "manifest",
		field.Is("CommittedAt", o.CommittedAt, o.CommittedAt != nil, "set"),
		field.Eq("EventCount", o.EventCount, 3),
		field.Eq("Size", o.Size, 30),
		field.Eq("Source", o.Source, "a"),
	) {
		t.FailNow()
	}
	if err := s.ArchiveObjectPrepare(e.ctx, "k", "a"); !errors.Is(err, storage.ErrArchiveObjectCommitted) {
		t.Fatalf("prepare of a committed key: %v", err)
	}
	st := must[storage.ArchiveObjectStats](t)(s.ArchiveObjectGetStats(e.ctx))
	if !field.Check(t, "object stats",
		field.Eq("Objects", st.Objects, 1),
		field.Eq("ObjectBytes", st.ObjectBytes, 30),
		field.Eq("ArchivedEvents", st.ArchivedEvents, 3),
		field.Eq("PendingObjects", st.PendingObjects, 0),
	) {
		t.FailNow()
	}
	archiveReady(t, e, 2)
	pr := must[storage.ArchiveProgress](t)(s.EventGetArchiveProgress(e.ctx, e.now))
	if pr.Waiting != 2 || pr.Due != 2 || pr.OldestProcessedAt == nil {
		t.Fatalf("progress %+v", pr)
	}
}

// The retention pass: an object is found past retention only once its
// newest event is, its events are marked (and their bodies cleared, the
// dead letters' copies too) once, and bodies still in Postgres of
// processed events past it are cleared; an expired event is no longer
// replayable, and a dead one keeps its body.
func testBodyRetention(t *testing.T, e *env) {
	s := e.store
	old, newer := e.now.Add(-40*24*time.Hour), e.now.Add(-39*24*time.Hour)
	var evs []*inbox.Event
	for _, at := range []time.Time{old, newer} {
		evs = append(evs, factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "r", State: inbox.StateProcessed,
			CreatedAt: at, ProcessedAt: new(e.now.Add(-time.Hour)), Now: e.now}))
	}
	if next := must[*time.Time](t)(s.ArchiveObjectGetNextExpiry(e.ctx)); next != nil {
		t.Fatalf("next expiry with no object stored: %v", next)
	}
	ids := []int64{evs[0].ID, evs[1].ID}
	check(t, s.ArchiveObjectPrepare(e.ctx, "r", "r"))
	tx := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer tx.Rollback(e.ctx)
	must[bool](t)(tx.ArchiveObjectLockPending(e.ctx, "r"))
	must[[]*inbox.Event](t)(tx.EventLockForArchive(e.ctx, ids))
	check(t, tx.EventMarkArchived(e.ctx, "r", []storage.ArchiveLocation{{EventPK: ids[0], Offset: 0, Length: 10}, {EventPK: ids[1], Offset: 10, Length: 10}}))
	sum := sha256.Sum256([]byte("object"))
	check(t, tx.ArchiveObjectCommit(e.ctx, inbox.ArchiveObject{Key: "r", EventCount: 2, Size: 20, SHA256: sum[:],
		FirstID: ids[0], LastID: ids[1], LastReceivedAt: &newer}))
	check(t, tx.Commit(e.ctx))
	if next := must[*time.Time](t)(s.ArchiveObjectGetNextExpiry(e.ctx)); next == nil || !next.Equal(newer) {
		t.Fatalf("next expiry = %v, want the newest receipt %v", next, newer)
	}

	// Between its events' receipts: the newer one is within retention.
	if _, ok, err := s.ArchiveObjectLockExpirable(e.ctx, newer); err != nil || ok {
		t.Fatalf("object locked as expirable while an event in it is not: %v, %v", ok, err)
	}
	tx = must[*storage.Tx](t)(s.Begin(e.ctx))
	o, ok, err := tx.ArchiveObjectLockExpirable(e.ctx, newer.Add(time.Second))
	if err != nil || !ok || !field.Check(t, "expirable", field.Eq("Key", o.Key, "r"), field.Eq("FirstID", o.FirstID, ids[0]), field.Eq("LastID", o.LastID, ids[1])) {
		t.Fatalf("expirable: %+v, %v, %v", o, ok, err)
	}
	if n := must[int64](t)(tx.EventExpireArchived(e.ctx, o)); n != 2 {
		t.Fatalf("marked %d, want 2", n)
	}
	check(t, tx.ArchiveObjectMarkExpired(e.ctx, o.Key))
	check(t, tx.Commit(e.ctx))
	if n := must[int64](t)(s.EventExpireArchived(e.ctx, o)); n != 0 {
		t.Fatalf("marked again: %d", n)
	}
	got := must[*inbox.Event](t)(s.EventGetByID(e.ctx, ids[0]))
	field.Check(t, "expired event", field.Is("BodyExpiredAt", got.BodyExpiredAt, got.BodyExpiredAt != nil, "set"),
		field.Eq("ArchiveKey", got.ArchiveKey, "r"), field.Eq("BodySize", got.BodySize, evs[0].BodySize))
	mo := must[*inbox.ArchiveObject](t)(s.ArchiveObjectGet(e.ctx, "r"))
	field.Check(t, "manifest", field.Is("ExpiredAt", mo.ExpiredAt, mo.ExpiredAt != nil, "set"), field.Eq("FirstID", mo.FirstID, ids[0]))
	if st := must[storage.ArchiveObjectStats](t)(s.ArchiveObjectGetStats(e.ctx)); st.Objects != 0 {
		t.Fatalf("stats count the expired object: %+v", st)
	}
	if next := must[*time.Time](t)(s.ArchiveObjectGetNextExpiry(e.ctx)); next != nil {
		t.Fatalf("next expiry with the only object expired: %v", next)
	}
	if _, ok, _ := s.ArchiveObjectLockExpirable(e.ctx, e.now); ok {
		t.Fatal("an expired object is expirable again")
	}
	if dry := must[storage.ReplayResult](t)(s.EventReplay(e.ctx, storage.ReplayFilter{ID: ids[0]}, storage.ReplayOptions{Now: e.now, DryRun: true})); dry.Matched != 0 {
		t.Fatalf("an expired event counts as replayable: %+v", dry)
	}

	// Bodies still in Postgres: the processed one past retention, not the
	// dead one, nor the one within retention.
	inPG := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "p", State: inbox.StateProcessed, CreatedAt: old, Now: e.now})
	dead := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "p", State: inbox.StateDead, CreatedAt: old, Now: e.now})
	fresh := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "p", State: inbox.StateProcessed, Now: e.now})
	// One dead-lettered once, requeued and processed: its dead letter's
	// copy of the body goes with it.
	requeued := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "q", State: inbox.StateDead, CreatedAt: old, Now: e.now})
	if n := must[storage.BulkResult](t)(s.DeadLetterRequeue(e.ctx, storage.DeadLetterFilter{Source: "q"}, storage.BulkOptions{Now: time.Now(), By: inbox.Actor{Name: "test"}})); n.Done != 1 {
		t.Fatalf("requeued %d", n.Done)
	}
	factory.ProcessDue(e.ctx, t, s, e.now)
	if n := must[int64](t)(s.EventExpireBodies(e.ctx, newer, 10)); n != 2 {
		t.Fatalf("cleared %d bodies, want 2", n)
	}
	dls := must[[]*inbox.DeadLetter](t)(s.DeadLetterListByEvent(e.ctx, requeued.ID))
	if len(dls) != 1 || dls[0].Body != nil || dls[0].Payload != nil {
		t.Fatalf("the requeued event's dead letters after the expiry: %+v", dls)
	}
	if n := must[int64](t)(s.EventExpireBodies(e.ctx, newer, 10)); n != 0 {
		t.Fatalf("cleared %d bodies again", n)
	}
	for _, c := range []struct {
		ev      *inbox.Event
		expired bool
	}{{inPG, true}, {dead, false}, {fresh, false}} {
		got := must[*inbox.Event](t)(s.EventGetByID(e.ctx, c.ev.ID))
		field.Check(t, fmt.Sprintf("event %d", c.ev.ID), field.Eq("expired", got.BodyExpiredAt != nil, c.expired),
			field.Eq("body kept", got.Body != nil, !c.expired), field.Eq("EventID", got.EventID, c.ev.EventID))
	}
}

// The batch as chosen cannot be locked when another transaction holds one
// of its events or took its pending row.
func testArchiveBatchChanged(t *testing.T, e *env) {
	s := e.store
	// The sweep takes pending rows recorded before this (the archiver
	// passes its Now less its PendingGrace).
	later := time.Now().Add(time.Hour)
	evs := archiveReady(t, e, 3)
	c := must[storage.ArchiveCandidates](t)(s.EventListArchiveCandidates(e.ctx, archiveParams(e)))
	check(t, s.ArchiveObjectPrepare(e.ctx, "k1", "a"))
	// An expunge holds one event.
	other := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer other.Rollback(e.ctx)
	must[*inbox.Event](t)(other.EventGetByKeyForUpdate(e.ctx, "a", evs[1].EventID))
	tx := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer tx.Rollback(e.ctx)
	if locked := must[[]*inbox.Event](t)(tx.EventLockForArchive(e.ctx, c.IDs)); len(locked) != 2 {
		t.Fatalf("locked %d events with one held elsewhere", len(locked))
	}
	check(t, tx.Rollback(e.ctx))
	// Meanwhile the next choice skips the held event.
	if c2 := must[storage.ArchiveCandidates](t)(s.EventListArchiveCandidates(e.ctx, archiveParams(e))); len(c2.IDs) != 2 {
		t.Fatalf("candidates while one is held: %+v", c2)
	}
	check(t, other.Rollback(e.ctx))
	// A sweep took the pending row between Prepare and the lock.
	sweep := must[*storage.Tx](t)(s.Begin(e.ctx))
	key, ok := must2(t)(sweep.ArchiveObjectLockOrphan(e.ctx, later))
	if !ok || key != "k1" {
		t.Fatalf("orphan = %q %v", key, ok)
	}
	check(t, sweep.ArchiveObjectDelete(e.ctx, key))
	check(t, sweep.Commit(e.ctx))
	tx = must[*storage.Tx](t)(s.Begin(e.ctx))
	if ok := must[bool](t)(tx.ArchiveObjectLockPending(e.ctx, "k1")); ok {
		t.Fatal("locked a swept row")
	}
	check(t, tx.Rollback(e.ctx))
}

func must2(t *testing.T) func(string, bool, error) (string, bool) {
	return func(s string, ok bool, err error) (string, bool) {
		t.Helper()
		check(t, err)
		return s, ok
	}
}

// Pending rows no transaction holds are orphans, oldest first; a held one
// is not.
func testArchiveOrphans(t *testing.T, e *env) {
	s := e.store
	// The sweep takes pending rows recorded before this (the archiver
	// passes its Now less its PendingGrace).
	later := time.Now().Add(time.Hour)
	for _, k := range []string{"x", "y"} {
		check(t, s.ArchiveObjectPrepare(e.ctx, k, "a"))
	}
	holder := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer holder.Rollback(e.ctx)
	if ok := must[bool](t)(holder.ArchiveObjectLockPending(e.ctx, "x")); !ok {
		t.Fatal("x not locked")
	}
	sweep := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer sweep.Rollback(e.ctx)
	// A row recorded since createdBefore is no orphan yet: its batch may
	// be about to lock it.
	if key, ok := must2(t)(sweep.ArchiveObjectLockOrphan(e.ctx, time.Now().Add(-time.Hour))); ok {
		t.Fatalf("a pending row younger than the grace was taken: %q", key)
	}
	key, ok := must2(t)(sweep.ArchiveObjectLockOrphan(e.ctx, later))
	if !ok || key != "y" {
		t.Fatalf("orphan = %q %v, want y (x is held)", key, ok)
	}
	check(t, sweep.ArchiveObjectDelete(e.ctx, key))
	check(t, sweep.Commit(e.ctx))
	check(t, holder.Rollback(e.ctx))
	if st := must[storage.ArchiveObjectStats](t)(s.ArchiveObjectGetStats(e.ctx)); st.PendingObjects != 1 {
		t.Fatalf("pending = %d", st.PendingObjects)
	}
	sweep = must[*storage.Tx](t)(s.Begin(e.ctx))
	if key, ok := must2(t)(sweep.ArchiveObjectLockOrphan(e.ctx, later)); !ok || key != "x" {
		t.Fatalf("orphan = %q %v", key, ok)
	}
	check(t, sweep.ArchiveObjectDelete(e.ctx, "x"))
	check(t, sweep.Commit(e.ctx))
	if _, ok := must2(t)(s.ArchiveObjectLockOrphan(e.ctx, later)); ok {
		t.Fatal("an orphan left")
	}

	// A batch's own abandoned row: skipped while another transaction holds
	// it (an archiver that chose the same batch), taken once free.
	check(t, s.ArchiveObjectPrepare(e.ctx, "z", "a"))
	holder2 := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer holder2.Rollback(e.ctx)
	if ok := must[bool](t)(holder2.ArchiveObjectLockPending(e.ctx, "z")); !ok {
		t.Fatal("z not locked")
	}
	own := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer own.Rollback(e.ctx)
	if ok := must[bool](t)(own.ArchiveObjectLockAbandoned(e.ctx, "z")); ok {
		t.Fatal("a row another transaction holds was taken")
	}
	check(t, holder2.Rollback(e.ctx))
	if ok := must[bool](t)(own.ArchiveObjectLockAbandoned(e.ctx, "z")); !ok {
		t.Fatal("the free abandoned row was not taken")
	}
	check(t, own.ArchiveObjectDelete(e.ctx, "z"))
	check(t, own.Commit(e.ctx))
	if ok := must[bool](t)(s.ArchiveObjectLockAbandoned(e.ctx, "z")); ok {
		t.Fatal("a deleted row was taken")
	}

	// Objects found by listing: a committed one is never taken, one a
	// batch holds is skipped, one no row records is recorded and locked.
	check(t, s.ArchiveObjectPrepare(e.ctx, "done", "a"))
	check(t, s.ArchiveObjectCommit(e.ctx, inbox.ArchiveObject{Key: "done", EventCount: 1, Size: 1, SHA256: make([]byte, 32)}))
	check(t, s.ArchiveObjectPrepare(e.ctx, "held", "a"))
	holder = must[*storage.Tx](t)(s.Begin(e.ctx))
	defer holder.Rollback(e.ctx)
	if ok := must[bool](t)(holder.ArchiveObjectLockPending(e.ctx, "held")); !ok {
		t.Fatal("held not locked")
	}
	if c := must[[]string](t)(s.ArchiveObjectListCommitted(e.ctx, []string{"done", "held", "none"})); len(c) != 1 || c[0] != "done" {
		t.Fatalf("committed = %v", c)
	}
	sweep = must[*storage.Tx](t)(s.Begin(e.ctx))
	defer sweep.Rollback(e.ctx)
	for key, want := range map[string]bool{"held": false, "done": false, "none": true} {
		if err := sweep.ArchiveObjectPrepare(e.ctx, key, "a"); err != nil && !errors.Is(err, storage.ErrArchiveObjectCommitted) {
			t.Fatal(err)
		}
		if ok := must[bool](t)(sweep.ArchiveObjectLockUnrecorded(e.ctx, key)); ok != want {
			t.Fatalf("lock listed %s = %v, want %v", key, ok, want)
		}
	}
	check(t, sweep.ArchiveObjectDelete(e.ctx, "none"))
	check(t, sweep.Commit(e.ctx))
}

// The expunge's statements: lock the event and its object, record the
// rewrite, erase the body and the dead letters' copies.
func testArchiveExpunge(t *testing.T, e *env) {
	s := e.store
	ev := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "a", State: inbox.StateArchived, ArchiveKey: "obj", Now: e.now})
	check(t, s.ArchiveObjectPrepare(e.ctx, "obj", "a"))
	sum := sha256.Sum256([]byte("v1"))
	check(t, s.ArchiveObjectCommit(e.ctx, inbox.ArchiveObject{Key: "obj", EventCount: 1, Size: 2, SHA256: sum[:]}))
	pending := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "a", Now: e.now, State: inbox.StateRetrying, Attempts: 2,
		LastError: "bad amount in {secret}", Metadata: map[string]string{"hook": "secret"}})

	tx := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer tx.Rollback(e.ctx)
	locked := must[*inbox.Event](t)(tx.EventGetByKeyForUpdate(e.ctx, "a", ev.EventID))
	check(t, tx.ArchiveObjectLock(e.ctx, locked.ArchiveKey))
	sum2 := sha256.Sum256([]byte("v2"))
	check(t, tx.ArchiveObjectMarkRewritten(e.ctx, locked.ArchiveKey, 3, sum2[:]))
	if sc := must[storage.EventScrub](t)(tx.EventExpunge(e.ctx, locked.ID)); !field.Check(t, "archived event held",
		field.Eq("Body", sc.Body, false),
		field.Eq("Payload", sc.Payload, false),
		field.Eq("Metadata", sc.Metadata, false),
		field.Eq("LastError", sc.LastError, false),
	) {
		t.FailNow()
	}
	if n := must[int](t)(tx.DeadLetterExpunge(e.ctx, locked.ID)); n != 0 {
		t.Fatalf("dead letters of an event never dead: %d", n)
	}
	if sc := must[storage.EventScrub](t)(tx.EventExpunge(e.ctx, pending.ID)); !field.Check(t, "retrying event held",
		field.Eq("Body", sc.Body, true),
		field.Eq("Payload", sc.Payload, true),
		field.Eq("Metadata", sc.Metadata, true),
		field.Eq("LastError", sc.LastError, true),
	) {
		t.FailNow()
	}
	if n := must[int](t)(tx.AttemptExpunge(e.ctx, pending.ID)); n != 2 {
		t.Fatalf("attempt errors expunged: %d, want 2", n)
	}
	if n := must[int](t)(tx.AttemptExpunge(e.ctx, pending.ID)); n != 0 {
		t.Fatalf("attempt errors expunged again: %d, want 0", n)
	}
	if _, err := tx.EventExpunge(e.ctx, -1); !errors.Is(err, storage.ErrEventNotFound) {
		t.Fatalf("expunge of no event: %v", err)
	}
	check(t, tx.Commit(e.ctx))

	o := must[*inbox.ArchiveObject](t)(s.ArchiveObjectGet(e.ctx, "obj"))
	if o.Size != 3 || !bytes.Equal(o.SHA256, sum2[:]) || o.RewrittenAt == nil {
		t.Fatalf("manifest after rewrite %+v", o)
	}
	got := must[*inbox.Event](t)(s.EventGetByID(e.ctx, ev.ID))
	if got.ExpungedAt == nil || got.Outcome != inbox.OutcomeHandled || got.State(e.now) != inbox.StateExpunged {
		t.Fatalf("expunged archived event %+v", got)
	}
	// An event erased before it was processed leaves the drain.
	got = must[*inbox.Event](t)(s.EventGetByID(e.ctx, pending.ID))
	if !field.Check(t, "expunged pending event",
		field.Is("Body", string(got.Body), got.Body == nil, "nil"),
		field.Is("Payload", string(got.Payload), got.Payload == nil, "nil"),
		field.Is("ProcessedAt", got.ProcessedAt, got.ProcessedAt != nil, "set"),
		field.Eq("Outcome", got.Outcome, inbox.OutcomeExpunged),
		field.Is("Metadata", got.Metadata, got.Metadata == nil, "nil"),
		field.Eq("LastError", got.LastError, storage.Redacted),
	) {
		t.FailNow()
	}
	for _, a := range must[[]inbox.Attempt](t)(s.AttemptListByEvent(e.ctx, pending.ID)) {
		if a.Error != storage.Redacted || a.Cause == "" {
			t.Fatalf("attempt after expunge: %+v", a)
		}
	}
	if b := must[storage.Backlog](t)(s.EventGetBacklog(e.ctx, e.now.Add(time.Hour))); b.Count != 0 {
		t.Fatalf("an expunged event is in the backlog: %+v", b)
	}
}

func testRejections(t *testing.T, e *env) {
	s := e.store
	factory.Rejection(e.ctx, t, s, &factory.RejectionOpts{Source: "shop", Cause: inbox.CauseSignatureMismatch, Suppressed: 4})
	factory.Rejection(e.ctx, t, s, &factory.RejectionOpts{Source: "shop", Cause: inbox.CauseSignatureMismatch})
	factory.Rejection(e.ctx, t, s, &factory.RejectionOpts{Source: "nope", Cause: inbox.CauseUnknownSource, ReceivedAt: e.now.Add(-2 * time.Hour)})
	check(t, s.RejectionInsert(e.ctx, inbox.Rejection{Source: "shop", Cause: inbox.CausePayloadTooLarge, Message: "m", RequestID: "r1", RemoteAddr: "10.0.0.1", BodySize: 9}, 0))
	list := must[[]inbox.Rejection](t)(s.RejectionList(e.ctx, e.now.Add(-time.Hour), 10))
	if len(list) != 3 {
		t.Fatalf("%d rejections, want 3: %+v", len(list), list)
	}
	if !field.Check(t, "first rejection",
		field.Eq("Cause", list[0].Cause, inbox.CausePayloadTooLarge),
		field.Eq("RequestID", list[0].RequestID, "r1"),
		field.Eq("BodySize", list[0].BodySize, 9),
		field.Eq("RemoteAddr", list[0].RemoteAddr, "10.0.0.1"),
	) {
		t.FailNow()
	}
	// The suppressed refusals a record stands for are counted; an hour's
	// window leaves the one two hours old out.
	counts := must[[]storage.RejectionCount](t)(s.RejectionCountByCause(e.ctx, e.now.Add(-time.Hour)))
	want := []storage.RejectionCount{{Source: "shop", Cause: inbox.CauseSignatureMismatch, Count: 6}, {Source: "shop", Cause: inbox.CausePayloadTooLarge, Count: 1}}
	if !slices.Equal(counts, want) {
		t.Fatalf("counts = %+v, want %+v", counts, want)
	}
	if n := len(must[[]storage.RejectionCount](t)(s.RejectionCountByCause(e.ctx, e.now.Add(-3*time.Hour)))); n != 3 {
		t.Fatalf("%d causes in three hours, want 3", n)
	}
	// A ring of 2 keeps the newest 2, whatever was written before.
	for i := range 3 {
		check(t, s.RejectionInsert(e.ctx, inbox.Rejection{Source: "ring", Cause: inbox.CauseNotFound, Message: string(rune('a' + i))}, 2))
	}
	var ring []string
	for _, r := range must[[]inbox.Rejection](t)(s.RejectionList(e.ctx, e.now.Add(-time.Hour), 10)) {
		if r.Source == "ring" {
			ring = append(ring, r.Message)
		}
	}
	if len(ring) != 2 || ring[0] != "c" || ring[1] != "b" {
		t.Fatalf("ring = %v, want [c b]", ring)
	}
}

// The receivers' record of their sources: a first record, a later one that
// never moves a delivery back (containers record in any order) and changes
// a setting, and a source dropped from the document, which stays with its
// last delivery, no longer configured and never silent.
func testSourceActivity(t *testing.T, e *env) {
	s := e.store
	t0 := e.now.Truncate(time.Millisecond)
	if got := must[[]inbox.SourceActivity](t)(s.SourceActivityList(e.ctx)); len(got) != 0 {
		t.Fatalf("activity before any record: %+v", got)
	}
	factory.SourceActivity(e.ctx, t, s, t0,
		storage.SourceRecord{Source: "gh", SilentAfter: 6 * time.Hour, ReceivedAt: t0.Add(-time.Minute)},
		storage.SourceRecord{Source: "stripe"},
	)
	factory.SourceActivity(e.ctx, t, s, t0.Add(time.Minute),
		storage.SourceRecord{Source: "gh", SilentAfter: 90 * time.Minute, ReceivedAt: t0.Add(-time.Hour)},
		storage.SourceRecord{Source: "stripe", ReceivedAt: t0.Add(30 * time.Second)},
		storage.SourceRecord{Source: "zoom", SilentAfter: time.Hour},
	)
	got := must[[]inbox.SourceActivity](t)(s.SourceActivityList(e.ctx))
	if len(got) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(got), got)
	}
	gh, stripe, zoom := got[0], got[1], got[2]
	if !field.Check(t, "gh",
		field.Eq("Source", gh.Source, "gh"),
		field.Eq("Configured", gh.Configured, true),
		field.Eq("SilentAfter", gh.SilentAfter, 90*time.Minute),
		field.Eq("SeenAt", gh.SeenAt.Equal(t0), true),
		field.Eq("LastReceivedAt kept the newer", gh.LastReceivedAt != nil && gh.LastReceivedAt.Equal(t0.Add(-time.Minute)), true),
	) || !field.Check(t, "stripe",
		field.Eq("SilentAfter", stripe.SilentAfter, time.Duration(0)),
		field.Eq("LastReceivedAt", stripe.LastReceivedAt != nil && stripe.LastReceivedAt.Equal(t0.Add(30*time.Second)), true),
	) || !field.Check(t, "zoom",
		field.Eq("SeenAt", zoom.SeenAt.Equal(t0.Add(time.Minute)), true),
		field.Eq("LastReceivedAt", zoom.LastReceivedAt == nil, true),
	) {
		t.FailNow()
	}
	factory.SourceActivity(e.ctx, t, s, t0.Add(2*time.Minute), storage.SourceRecord{Source: "stripe"})
	got = must[[]inbox.SourceActivity](t)(s.SourceActivityList(e.ctx))
	if len(got) != 3 || got[0].Configured || got[0].SilentAfter != 0 || got[0].LastReceivedAt == nil || !got[1].Configured || got[2].Configured {
		t.Fatalf("after gh and zoom left the document: %+v", got)
	}
}

// The counts over time of the console's charts: events by created_at,
// attempts by finished_at and outcome, rejections by received_at and cause
// (suppressed ones included), each in its bucket of the window and
// nothing outside it.
func testTimeBuckets(t *testing.T, e *env) {
	s := e.store
	base := e.now.Truncate(time.Hour).Add(-3 * time.Hour)
	at := func(m int) time.Time { return base.Add(time.Duration(m) * time.Minute) }
	b := storage.Buckets{Since: base, Until: at(180), Width: time.Hour}
	if !field.Check(t, "buckets",
		field.Eq("Len()", b.Len(), 3),
		field.Eq("Index(61m)", b.Index(at(61)), 1),
		field.Eq("Index(-1m)", b.Index(at(-1)), -1),
		field.Eq("Index(180m)", b.Index(at(180)), -1),
	) {
		t.FailNow()
	}
	// Outside the window on both sides: counted nowhere.
	factory.Event(e.ctx, t, s, &factory.EventOpts{CreatedAt: at(-1), Now: at(-1), State: inbox.StateProcessed, ProcessedAt: new(at(-1))})
	factory.Event(e.ctx, t, s, &factory.EventOpts{CreatedAt: at(180), Now: at(180), State: inbox.StateRetrying})
	factory.Event(e.ctx, t, s, &factory.EventOpts{CreatedAt: at(10)})
	factory.Event(e.ctx, t, s, &factory.EventOpts{CreatedAt: at(12), State: inbox.StateProcessed, ProcessedAt: new(at(20))})
	factory.Event(e.ctx, t, s, &factory.EventOpts{CreatedAt: at(70), Now: at(80), State: inbox.StateRetrying})
	factory.Event(e.ctx, t, s, &factory.EventOpts{CreatedAt: at(75), Now: at(130), State: inbox.StateDead, DeadAt: new(at(130))})
	evs := must[[]storage.EventBucket](t)(s.EventCountByBucket(e.ctx, b))
	wantEv := []storage.EventBucket{{At: at(0), Count: 2}, {At: at(60), Count: 2}}
	if len(evs) != 2 {
		t.Fatalf("events by bucket = %+v, want %+v", evs, wantEv)
	}
	if !field.Check(t, "events by bucket",
		field.Is("[0].At", evs[0].At, evs[0].At.Equal(wantEv[0].At), wantEv[0].At.String()),
		field.Eq("[0].Count", evs[0].Count, 2),
		field.Is("[1].At", evs[1].At, evs[1].At.Equal(wantEv[1].At), wantEv[1].At.String()),
		field.Eq("[1].Count", evs[1].Count, 2),
	) {
		t.FailNow()
	}
	att := must[[]storage.AttemptBucket](t)(s.AttemptCountByBucket(e.ctx, b))
	// The dead event's three failed attempts finish at 130 minutes, the
	// last one dead-lettering it.
	want := []storage.AttemptBucket{{At: at(0), Processed: 1}, {At: at(60), Failed: 1}, {At: at(120), Failed: 3, Dead: 1}}
	if len(att) != len(want) {
		t.Fatalf("attempts by bucket = %+v, want %+v", att, want)
	}
	for i := range want {
		if !field.Check(t, fmt.Sprintf("attempts by bucket [%d]", i),
			field.Is("At", att[i].At, att[i].At.Equal(want[i].At), want[i].At.String()),
			field.Eq("Processed", att[i].Processed, want[i].Processed),
			field.Eq("Failed", att[i].Failed, want[i].Failed),
			field.Eq("Dead", att[i].Dead, want[i].Dead),
		) {
			t.FailNow()
		}
	}
	factory.Rejection(e.ctx, t, s, &factory.RejectionOpts{Cause: inbox.CauseSignatureMismatch, ReceivedAt: at(5), Suppressed: 2})
	factory.Rejection(e.ctx, t, s, &factory.RejectionOpts{Cause: inbox.CauseSignatureMismatch, ReceivedAt: at(6)})
	factory.Rejection(e.ctx, t, s, &factory.RejectionOpts{Cause: inbox.CauseUnknownSource, ReceivedAt: at(125)})
	factory.Rejection(e.ctx, t, s, &factory.RejectionOpts{Cause: inbox.CauseUnknownSource, ReceivedAt: at(-5)})
	rej := must[[]storage.RejectionBucket](t)(s.RejectionCountByBucket(e.ctx, b))
	if len(rej) != 2 {
		t.Fatalf("rejections by bucket = %+v, want 2 buckets", rej)
	}
	if !field.Check(t, "rejections by bucket",
		field.Is("[0].At", rej[0].At, rej[0].At.Equal(at(0)), at(0).String()),
		field.Eq("[0].Cause", rej[0].Cause, string(inbox.CauseSignatureMismatch)),
		field.Eq("[0].Count", rej[0].Count, 4),
		field.Is("[1].At", rej[1].At, rej[1].At.Equal(at(120)), at(120).String()),
		field.Eq("[1].Cause", rej[1].Cause, string(inbox.CauseUnknownSource)),
		field.Eq("[1].Count", rej[1].Count, 1),
	) {
		t.FailNow()
	}
	// An empty window or a width under a second is refused before it
	// reaches the database.
	for _, bad := range []storage.Buckets{{Since: base, Until: base, Width: time.Hour}, {Since: base, Until: at(60), Width: time.Millisecond}} {
		if _, err := s.EventCountByBucket(e.ctx, bad); err == nil {
			t.Fatalf("buckets %+v accepted", bad)
		}
	}
}

func testPayloadMismatches(t *testing.T, e *env) {
	s := e.store
	stored, received := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	for range 2 {
		if !must[bool](t)(s.PayloadMismatchInsert(e.ctx, inbox.PayloadMismatch{Source: "shop", EventID: "e1", StoredSHA256: stored[:], ReceivedSHA256: received[:], ReceivedSize: 1})) {
			t.Fatal("a mismatch under the cap was not recorded")
		}
	}
	if !must[bool](t)(s.PayloadMismatchInsert(e.ctx, inbox.PayloadMismatch{Source: "shop", EventID: "e1", Cause: inbox.CauseSuspectedReplay,
		StoredSHA256: stored[:], ReceivedSHA256: stored[:], ReceivedSize: 1, ReceivedEventID: "e9", ReceivedEventType: "push"})) {
		t.Fatal("a suspected replay under the cap was not recorded")
	}
	if n := must[int](t)(s.PayloadMismatchCountByEvent(e.ctx, "shop", "e1")); n != 3 {
		t.Fatalf("count = %d", n)
	}
	list := must[[]inbox.PayloadMismatch](t)(s.PayloadMismatchListByEvent(e.ctx, "shop", "e1"))
	if len(list) != 3 {
		t.Fatalf("%d mismatch records, want 3: %+v", len(list), list)
	}
	if !field.Check(t, "first mismatch record",
		field.Is("ReceivedSHA256", fmt.Sprintf("%x", list[0].ReceivedSHA256), bytes.Equal(list[0].ReceivedSHA256, received[:]), fmt.Sprintf("%x", received)),
		field.Eq("ReceivedSize", list[0].ReceivedSize, 1),
		field.Is("ReceivedAt", list[0].ReceivedAt, !list[0].ReceivedAt.IsZero(), "set"),
		field.Eq("Cause", list[0].Cause, inbox.CausePayloadMismatch),
		field.Eq("ReceivedEventID", list[0].ReceivedEventID, ""),
	) {
		t.FailNow()
	}
	if r := list[2]; r.Cause != inbox.CauseSuspectedReplay || r.ReceivedEventID != "e9" || r.ReceivedEventType != "push" {
		t.Fatalf("replay record = %+v", r)
	}
	by := must[[]storage.PayloadMismatchCount](t)(s.PayloadMismatchCountBySource(e.ctx, e.now.Add(-time.Hour)))
	if len(by) != 2 {
		t.Fatalf("by source = %+v, want 2 rows", by)
	}
	if !field.Check(t, "by source",
		field.Eq("[0].Source", by[0].Source, "shop"),
		field.Eq("[0].Cause", by[0].Cause, inbox.CausePayloadMismatch),
		field.Eq("[0].Count", by[0].Count, 2),
		field.Is("[0].LastAt", by[0].LastAt, !by[0].LastAt.IsZero(), "set"),
		field.Eq("[1].Cause", by[1].Cause, inbox.CauseSuspectedReplay),
		field.Eq("[1].Count", by[1].Count, 1),
	) {
		t.FailNow()
	}
	// The cap: however many anomalies one event meets, PayloadMismatchCap
	// rows are kept; another event still gets its own.
	for range storage.PayloadMismatchCap + 5 {
		must[bool](t)(s.PayloadMismatchInsert(e.ctx, inbox.PayloadMismatch{Source: "shop", EventID: "e2", StoredSHA256: stored[:], ReceivedSHA256: received[:]}))
	}
	if n := must[int](t)(s.PayloadMismatchCountByEvent(e.ctx, "shop", "e2")); n != storage.PayloadMismatchCap {
		t.Fatalf("capped count = %d, want %d", n, storage.PayloadMismatchCap)
	}
	if must[bool](t)(s.PayloadMismatchInsert(e.ctx, inbox.PayloadMismatch{Source: "shop", EventID: "e2", StoredSHA256: stored[:], ReceivedSHA256: received[:]})) {
		t.Fatal("recorded past the cap")
	}
}

func testPGMisc(t *testing.T, e *env) {
	s := e.store
	if role := must[string](t)(s.PGCurrentUser(e.ctx)); role == "" {
		t.Fatal("no current role")
	}
	if now := must[time.Time](t)(s.PGNow(e.ctx)); now.Before(e.now) {
		t.Fatalf("the clock went back: %s < %s", now, e.now)
	}
	sizes := must[[]storage.TableSize](t)(s.PGTableSizes(e.ctx))
	names := map[string]bool{}
	for _, ts := range sizes {
		names[ts.Name] = true
	}
	for _, want := range []string{"webhook_events", "webhook_dead_letters", "webhook_rejections", "webhook_payload_mismatches", "webhook_archive_objects"} {
		if !names[want] {
			t.Errorf("table sizes lack %s", want)
		}
	}
	// Every core table and each of its indexes, by name from the
	// catalogue; an empty database has nothing bloated.
	bloat := map[string]storage.RelationBloat{}
	for _, r := range must[[]storage.RelationBloat](t)(s.PGBloatEstimate(e.ctx, storage.InboxTables)) {
		bloat[r.Name] = r
		if r.Unknown == storage.BloatNotBtree && strings.HasSuffix(r.Name, "_brin") {
			continue // the BRIN indexes of 00010: only btrees are estimated
		}
		if !r.Known() || r.Ratio() != 0 {
			t.Errorf("bloat of %s, empty: %+v", r.Name, r)
		}
	}
	for name, kind := range map[string]storage.BloatKind{
		"webhook_events": storage.BloatTable, "webhook_events_pkey": storage.BloatIndex,
		"webhook_events_provider_event_id_key": storage.BloatIndex, "webhook_events_due_idx": storage.BloatIndex,
		"webhook_events_archivable_idx": storage.BloatIndex, "webhook_dead_letters": storage.BloatTable,
		"webhook_archive_objects_pkey": storage.BloatIndex,
	} {
		if r := bloat[name]; r.Kind != kind || r.Table == "" {
			t.Errorf("bloat of %s = %+v, want a %s", name, r, kind)
		}
	}
	tx := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer tx.Rollback(e.ctx)
	check(t, tx.PGSetIdleInTransactionTimeout(e.ctx, 1500*time.Millisecond))
	var v string
	check(t, tx.Pgx().QueryRow(e.ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&v))
	if v != "1500ms" {
		t.Fatalf("idle timeout = %s", v)
	}
}

// The dead letters' keyset pages: in the order they died, filtered, and
// walking the pages visits every open dead letter once, even when some die
// or are requeued between pages.
func testDeadLetterPage(t *testing.T, e *env) {
	s := e.store
	dead := factory.Events(e.ctx, t, s, 5, &factory.EventOpts{Source: "shop", Type: "order", State: inbox.StateDead, Now: e.now})
	other := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "other", Type: "x", State: inbox.StateDead, Now: e.now})
	page := must[[]*inbox.DeadLetter](t)(s.DeadLetterListPage(e.ctx, storage.DeadLetterFilter{}, 0, 2))
	if len(page) != 2 {
		t.Fatalf("first page of %d, want 2: %+v", len(page), page)
	}
	if !field.Check(t, "first page",
		field.Eq("[0].EventPK", page[0].EventPK, dead[0].ID),
		field.Eq("[1].EventPK", page[1].EventPK, dead[1].ID),
		field.Is("[0].Body", page[0].Body, page[0].Body != nil, "set"),
	) {
		t.FailNow()
	}
	// Between pages: the third is requeued, and a new one dies.
	third := must[[]*inbox.DeadLetter](t)(s.DeadLetterListByEvent(e.ctx, dead[2].ID))
	if n := must[storage.BulkResult](t)(s.DeadLetterRequeue(e.ctx, storage.DeadLetterFilter{ID: third[0].ID}, storage.BulkOptions{Now: e.now, By: inbox.Actor{Name: "ops@test"}})); n.Done != 1 {
		t.Fatalf("requeue = %d", n.Done)
	}
	late := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "shop", Type: "order", State: inbox.StateDead, Now: e.now})
	var seen []int64
	for after := page[1].ID; ; {
		p := must[[]*inbox.DeadLetter](t)(s.DeadLetterListPage(e.ctx, storage.DeadLetterFilter{}, after, 2))
		if len(p) == 0 {
			break
		}
		for _, d := range p {
			seen = append(seen, d.EventPK)
		}
		after = p[len(p)-1].ID
	}
	if want := []int64{dead[3].ID, dead[4].ID, other.ID, late.ID}; !slices.Equal(seen, want) {
		t.Fatalf("the following pages hold events %v, want %v", seen, want)
	}
	f := storage.DeadLetterFilter{Source: "shop", EventType: "order"}
	if p := must[[]*inbox.DeadLetter](t)(s.DeadLetterListPage(e.ctx, f, 0, 10)); len(p) != 5 || p[4].EventPK != late.ID {
		t.Fatalf("filtered page = %+v", p)
	}
	if p := must[[]*inbox.DeadLetter](t)(s.DeadLetterListPage(e.ctx, storage.DeadLetterFilter{EventType: "x"}, 0, 10)); len(p) != 1 || p[0].EventPK != other.ID {
		t.Fatalf("page of type x = %+v", p)
	}
	// By id, and by the time they died.
	if p := must[[]*inbox.DeadLetter](t)(s.DeadLetterListPage(e.ctx, storage.DeadLetterFilter{ID: page[1].ID}, 0, 10)); len(p) != 1 || p[0].ID != page[1].ID {
		t.Fatalf("page of one id = %+v", p)
	}
	if p := must[[]*inbox.DeadLetter](t)(s.DeadLetterListPage(e.ctx, storage.DeadLetterFilter{DeadFrom: page[0].DeadAt, DeadTo: page[0].DeadAt.Add(time.Microsecond)}, 0, 10)); len(p) == 0 || !p[0].DeadAt.Equal(page[0].DeadAt) {
		t.Fatalf("page of one instant = %+v", p)
	}
	if p := must[[]*inbox.DeadLetter](t)(s.DeadLetterListPage(e.ctx, storage.DeadLetterFilter{DeadTo: page[0].DeadAt}, 0, 10)); len(p) != 0 {
		t.Fatalf("page before the first death = %+v", p)
	}
}

// The operator actions' keyset pages: newest first, and an action recorded
// between pages neither shifts nor repeats a row.
func testOperatorActionPage(t *testing.T, e *env) {
	s := e.store
	var ids []int64
	for i := range 5 {
		ids = append(ids, must[int64](t)(s.OperatorActionRecord(e.ctx, inbox.ActionExpunge, inbox.Actor{Name: fmt.Sprintf("ops%d@test", i)}, nil, nil)))
	}
	first := must[[]inbox.OperatorAction](t)(s.OperatorActionListPage(e.ctx, time.Time{}, 0, 2))
	if len(first) != 2 {
		t.Fatalf("first page of %d, want 2: %+v", len(first), first)
	}
	if !field.Check(t, "first page",
		field.Eq("[0].ID", first[0].ID, ids[4]),
		field.Eq("[1].ID", first[1].ID, ids[3]),
		field.Eq("[0].Actor", first[0].Actor, "ops4@test"),
	) {
		t.FailNow()
	}
	newer := must[int64](t)(s.OperatorActionRecord(e.ctx, inbox.ActionExpunge, inbox.Actor{Name: "late@test"}, nil, nil))
	if one := must[inbox.OperatorAction](t)(s.OperatorActionGetByID(e.ctx, ids[1])); one.ID != ids[1] || one.Actor != "ops1@test" || one.Action != inbox.ActionExpunge {
		t.Fatalf("by id = %+v", one)
	}
	if _, err := s.OperatorActionGetByID(e.ctx, ids[4]+1000); !errors.Is(err, storage.ErrActionNotFound) {
		t.Fatalf("an unknown id: %v", err)
	}
	rest := must[[]inbox.OperatorAction](t)(s.OperatorActionListPage(e.ctx, time.Time{}, first[1].ID, 10))
	if len(rest) != 3 || rest[0].ID != ids[2] || rest[2].ID != ids[0] {
		t.Fatalf("next page = %+v", rest)
	}
	if top := must[[]inbox.OperatorAction](t)(s.OperatorActionListPage(e.ctx, time.Time{}, 0, 1)); len(top) != 1 || top[0].ID != newer {
		t.Fatalf("the newest = %+v", top)
	}
	// Since bounds the time: every action here is this test's, none is
	// from the future.
	if got := must[[]inbox.OperatorAction](t)(s.OperatorActionListPage(e.ctx, rest[2].At, 0, 10)); len(got) != 6 {
		t.Fatalf("since the first = %d actions", len(got))
	}
	if got := must[[]inbox.OperatorAction](t)(s.OperatorActionListPage(e.ctx, rest[2].At, rest[1].ID, 10)); len(got) != 1 || got[0].ID != ids[0] {
		t.Fatalf("since the first, before the second = %+v", got)
	}
	if got := must[[]inbox.OperatorAction](t)(s.OperatorActionListPage(e.ctx, time.Now().Add(time.Hour), 0, 10)); len(got) != 0 {
		t.Fatalf("since an hour from now = %+v", got)
	}
}

// Finding events by the sender's id alone: one per source that has it,
// oldest first, none for an unknown id or an empty table.
func testEventListByEventID(t *testing.T, e *env) {
	s := e.store
	if got := must[[]*inbox.Event](t)(s.EventListByEventID(e.ctx, "evt_1", 10)); len(got) != 0 {
		t.Fatalf("on an empty table = %+v", got)
	}
	a := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "b", EventID: "evt_1"})
	factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "c", EventID: "evt_2"})
	b := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "a", EventID: "evt_1"})
	factory.Events(e.ctx, t, s, 3, &factory.EventOpts{Source: "d"})
	got := must[[]*inbox.Event](t)(s.EventListByEventID(e.ctx, "evt_1", 10))
	if len(got) != 2 {
		t.Fatalf("evt_1: %d events, want 2: %+v", len(got), got)
	}
	if !field.Check(t, "evt_1",
		field.Eq("[0].ID", got[0].ID, a.ID),
		field.Eq("[1].ID", got[1].ID, b.ID),
		field.Eq("[1].Source", got[1].Source, "a"),
	) {
		t.FailNow()
	}
	if got := must[[]*inbox.Event](t)(s.EventListByEventID(e.ctx, "evt_1", 1)); len(got) != 1 {
		t.Fatalf("limited to 1 = %d", len(got))
	}
	if got := must[[]*inbox.Event](t)(s.EventListByEventID(e.ctx, "nope", 10)); len(got) != 0 {
		t.Fatalf("unknown id = %+v", got)
	}
}

// A window bounded on both ends: far in the past (the rows after it
// outnumber its own: read by receipt time and sorted) or recent (the id
// walk), the same rows come back, newest first, paged by id.
func testEventListWindow(t *testing.T, e *env) {
	s := e.store
	if got := must[[]*inbox.Event](t)(s.EventList(e.ctx, storage.EventFilter{CreatedFrom: e.now.Add(-time.Hour), CreatedTo: e.now}, e.now, 10)); len(got) != 0 {
		t.Fatalf("on an empty table = %+v", got)
	}
	day := 24 * time.Hour
	var old, recent []*inbox.Event
	for i := range 4 {
		old = append(old, factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "w", CreatedAt: e.now.Add(-30*day + time.Duration(i)*time.Minute)}))
	}
	for i := range 20 {
		factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "w", CreatedAt: e.now.Add(-20*day + time.Duration(i)*time.Hour)})
	}
	for i := range 3 {
		recent = append(recent, factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "w", CreatedAt: e.now.Add(-time.Duration(3-i) * time.Minute)}))
	}
	ids := func(evs []*inbox.Event) []int64 {
		var out []int64
		for _, ev := range evs {
			out = append(out, ev.ID)
		}
		return out
	}
	past := storage.EventFilter{CreatedFrom: e.now.Add(-31 * day), CreatedTo: e.now.Add(-29 * day)}
	got := must[[]*inbox.Event](t)(s.EventList(e.ctx, past, e.now, 3))
	if want := []int64{old[3].ID, old[2].ID, old[1].ID}; !slices.Equal(ids(got), want) {
		t.Fatalf("a past window = %v, want %v", ids(got), want)
	}
	past.BeforeID = got[2].ID
	if got := must[[]*inbox.Event](t)(s.EventList(e.ctx, past, e.now, 3)); !slices.Equal(ids(got), []int64{old[0].ID}) {
		t.Fatalf("its next page = %v, want %d", ids(got), old[0].ID)
	}
	now := storage.EventFilter{CreatedFrom: e.now.Add(-time.Hour), CreatedTo: e.now.Add(time.Hour)}
	if got := must[[]*inbox.Event](t)(s.EventList(e.ctx, now, e.now, 10)); !slices.Equal(ids(got), []int64{recent[2].ID, recent[1].ID, recent[0].ID}) {
		t.Fatalf("a recent window = %v", ids(got))
	}
}

// A resolve closes the selected open dead letters in chunks, in calls that
// continue one record, and finishes their events (outcome resolved): the
// open gauge drops, a requeue finds nothing, and the criteria (cause,
// error text, receipt window, ids) select exactly.
func testDeadLetterResolve(t *testing.T, e *env) {
	s := e.store
	now := e.now
	by := inbox.Actor{Name: "ops@test", Reason: "duplicates"}
	dead := factory.Events(e.ctx, t, s, 3, &factory.EventOpts{Source: "r", State: inbox.StateDead, Now: now})
	timeout := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "r", State: inbox.StateDead, Now: now,
		Cause: inbox.CauseHandlerTimeout, DeadError: "upstream Timed Out", CreatedAt: now.Add(-48 * time.Hour)})
	if _, err := s.DeadLetterResolve(e.ctx, storage.DeadLetterFilter{}, storage.BulkOptions{Now: now, By: by}); err != storage.ErrEmptyFilter {
		t.Fatalf("empty filter: %v", err)
	}
	for name, f := range map[string]storage.DeadLetterFilter{
		"cause":    {Cause: string(inbox.CauseHandlerTimeout)},
		"error":    {ErrorText: "timed OUT"},
		"received": {ReceivedTo: now.Add(-24 * time.Hour)},
	} {
		dry := must[storage.BulkResult](t)(s.DeadLetterResolve(e.ctx, f, storage.BulkOptions{Now: now, DryRun: true}))
		if dry.Matched != 1 {
			t.Fatalf("by %s: %d matched, want 1 (event %d)", name, dry.Matched, timeout.ID)
		}
	}
	before := must[storage.DeadLetterStats](t)(s.DeadLetterGetOpenStats(e.ctx))
	if _, err := s.DeadLetterResolve(e.ctx, storage.DeadLetterFilter{Source: "r"}, storage.BulkOptions{Now: now}); err != storage.ErrNoActor {
		t.Fatalf("resolve without an actor: %v", err)
	}
	f := storage.DeadLetterFilter{Source: "r", ReceivedFrom: now.Add(-time.Hour)}
	// A confirmed count the selection no longer has: refused before
	// anything is recorded or changed (the open count below drops by all
	// three).
	if stale, err := s.DeadLetterResolve(e.ctx, f, storage.BulkOptions{Now: now, By: by, Max: 2, Expect: new(2)}); err != storage.ErrCountChanged ||
		stale.Matched != 3 || stale.Done != 0 || stale.ActionID != 0 {
		t.Fatalf("resolve with a stale count = %+v, %v", stale, err)
	}
	first := must[storage.BulkResult](t)(s.DeadLetterResolve(e.ctx, f, storage.InChunks(storage.BulkOptions{Now: now, By: by, Max: 2}, 1)))
	if first.Matched != 3 || first.Done != 2 || first.Next == nil {
		t.Fatalf("first call = %+v", first)
	}
	last := must[storage.BulkResult](t)(s.DeadLetterResolve(e.ctx, f, storage.BulkOptions{Now: now, By: by, Max: 2, Continue: first.Next}))
	if last.Done != 1 || last.Next != nil || last.ActionID != first.ActionID {
		t.Fatalf("continuation = %+v", last)
	}
	after := must[storage.DeadLetterStats](t)(s.DeadLetterGetOpenStats(e.ctx))
	if before.Open-after.Open != 3 {
		t.Fatalf("open dead letters %d before, %d after, want 3 fewer", before.Open, after.Open)
	}
	if n := must[int](t)(s.DeadLetterCountRequeueable(e.ctx, storage.DeadLetterFilter{Source: "r"})); n != 1 {
		t.Fatalf("requeueable after the resolve: %d, want the one left", n)
	}
	ev := must[*inbox.Event](t)(s.EventGetByID(e.ctx, dead[0].ID))
	hist := must[[]*inbox.DeadLetter](t)(s.DeadLetterListByEvent(e.ctx, dead[0].ID))
	acts := must[[]inbox.OperatorAction](t)(s.OperatorActionListByEvent(e.ctx, dead[2].ID))
	if !field.Check(t, "resolved event",
		field.Eq("Outcome", ev.Outcome, inbox.OutcomeResolved),
		field.Eq("DeadAt", ev.DeadAt, nil),
		field.Is("ProcessedAt", ev.ProcessedAt, ev.ProcessedAt != nil, "set"),
		field.Is("ResolvedAt", hist, len(hist) == 1 && hist[0].ResolvedAt != nil && hist[0].RequeuedAt == nil, "its one dead letter resolved"),
		field.Is("record", acts, len(acts) == 1 && acts[0].Action == inbox.ActionResolve && acts[0].Events == 3, "one resolve of 3 events"),
	) {
		t.FailNow()
	}
}

// A requeue larger than one call is done in chunks under one record: each
// chunk's events are live and linked, the record counts exactly what was
// requeued after each call, and a continuation takes the rest of the first
// count, never a dead letter that died since.
func testDeadLetterRequeueInChunks(t *testing.T, e *env) {
	s := e.store
	now := e.now
	by := inbox.Actor{Name: "ops@test", Reason: "handler fixed"}
	dead := factory.Events(e.ctx, t, s, 3, &factory.EventOpts{Source: "rq", State: inbox.StateDead, Now: now})
	f := storage.DeadLetterFilter{Source: "rq"}
	if _, err := s.DeadLetterRequeue(e.ctx, storage.DeadLetterFilter{}, storage.BulkOptions{Now: now, By: by}); err != storage.ErrEmptyFilter {
		t.Fatalf("empty filter: %v", err)
	}
	if dry := must[storage.BulkResult](t)(s.DeadLetterRequeue(e.ctx, f, storage.BulkOptions{Now: now, DryRun: true})); dry.Matched != 3 || dry.Done != 0 || dry.ActionID != 0 {
		t.Fatalf("dry run = %+v", dry)
	}
	first := must[storage.BulkResult](t)(s.DeadLetterRequeue(e.ctx, f, storage.InChunks(storage.BulkOptions{Now: now, By: by, Max: 2}, 1)))
	if first.Matched != 3 || first.Done != 2 || first.Next == nil {
		t.Fatalf("first call = %+v", first)
	}
	// Stopped here, the record says what was done, and the events it
	// names are the live ones.
	act := must[inbox.OperatorAction](t)(s.OperatorActionGetByID(e.ctx, first.ActionID))
	if act.Action != inbox.ActionRequeue || act.Events != 2 {
		t.Fatalf("record after the first call = %+v", act)
	}
	for i, ev := range dead[:2] {
		got := must[*inbox.Event](t)(s.EventGetByID(e.ctx, ev.ID))
		links := must[[]inbox.OperatorAction](t)(s.OperatorActionListByEvent(e.ctx, ev.ID))
		if got.DeadAt != nil || len(links) != 1 || links[0].ID != first.ActionID {
			t.Fatalf("event %d after the first call: dead %v, records %+v", i, got.DeadAt, links)
		}
	}
	late := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "rq", State: inbox.StateDead, Now: now})
	if _, err := s.DeadLetterRequeue(e.ctx, f, storage.BulkOptions{Now: now, Continue: first.Next}); err != storage.ErrNoActor {
		t.Fatalf("continuation without an actor: %v", err)
	}
	last := must[storage.BulkResult](t)(s.DeadLetterRequeue(e.ctx, f, storage.BulkOptions{Now: now, By: by, Max: 2, Continue: first.Next}))
	if last.Done != 1 || last.Next != nil || last.ActionID != first.ActionID || last.Matched != 0 {
		t.Fatalf("continuation = %+v", last)
	}
	if act = must[inbox.OperatorAction](t)(s.OperatorActionGetByID(e.ctx, first.ActionID)); act.Events != 3 {
		t.Fatalf("record after the last call counts %d, want 3", act.Events)
	}
	if got := must[*inbox.Event](t)(s.EventGetByID(e.ctx, late.ID)); got.DeadAt == nil {
		t.Fatal("the dead letter that died after the count was requeued")
	}
	if n := must[int](t)(s.DeadLetterCountRequeueable(e.ctx, f)); n != 1 {
		t.Fatalf("requeueable after the requeue: %d, want the late one", n)
	}
}

// A discard finishes the selected unprocessed events (outcome discarded)
// in chunks under one record; dead and processed events are never
// selected, and the criteria select exactly.
func testEventDiscard(t *testing.T, e *env) {
	s := e.store
	now := e.now
	by := inbox.Actor{Name: "ops@test", Reason: "test traffic"}
	due := factory.Events(e.ctx, t, s, 3, &factory.EventOpts{Source: "x", Now: now})
	retrying := factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "x", State: inbox.StateRetrying, Now: now,
		Cause: inbox.CauseHandlerTimeout, LastError: "Gateway TIMEOUT", CreatedAt: now.Add(-48 * time.Hour)})
	factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "x", State: inbox.StateDead, Now: now})
	factory.Event(e.ctx, t, s, &factory.EventOpts{Source: "x", State: inbox.StateProcessed, Now: now})
	if _, err := s.EventDiscard(e.ctx, storage.DiscardFilter{}, storage.BulkOptions{Now: now, By: by}); err != storage.ErrEmptyDiscardFilter {
		t.Fatalf("empty filter: %v", err)
	}
	for name, c := range map[string]struct {
		f    storage.DiscardFilter
		want int
	}{
		"source":   {storage.DiscardFilter{Source: "x"}, 4},
		"cause":    {storage.DiscardFilter{Cause: string(inbox.CauseHandlerTimeout)}, 1},
		"error":    {storage.DiscardFilter{ErrorText: "gateway timeout"}, 1},
		"received": {storage.DiscardFilter{Source: "x", ReceivedFrom: now.Add(-time.Hour)}, 3},
		"ids":      {storage.DiscardFilter{IDs: []int64{due[0].ID, retrying.ID}}, 2},
	} {
		dry := must[storage.BulkResult](t)(s.EventDiscard(e.ctx, c.f, storage.BulkOptions{Now: now, DryRun: true}))
		if dry.Matched != c.want {
			t.Fatalf("by %s: %d matched, want %d", name, dry.Matched, c.want)
		}
	}
	f := storage.DiscardFilter{Source: "x"}
	first := must[storage.BulkResult](t)(s.EventDiscard(e.ctx, f, storage.InChunks(storage.BulkOptions{Now: now, By: by, Max: 3}, 2)))
	if first.Matched != 4 || first.Done != 3 || first.Next == nil {
		t.Fatalf("first call = %+v", first)
	}
	last := must[storage.BulkResult](t)(s.EventDiscard(e.ctx, f, storage.BulkOptions{Now: now, By: by, Max: 3, Continue: first.Next}))
	if last.Done != 1 || last.Next != nil {
		t.Fatalf("continuation = %+v", last)
	}
	got := must[*inbox.Event](t)(s.EventGetByID(e.ctx, retrying.ID))
	acts := must[[]inbox.OperatorAction](t)(s.OperatorActionListByEvent(e.ctx, retrying.ID))
	if !field.Check(t, "discarded event",
		field.Eq("Outcome", got.Outcome, inbox.OutcomeDiscarded),
		field.Is("ProcessedAt", got.ProcessedAt, got.ProcessedAt != nil, "set"),
		field.Is("record", acts, len(acts) == 1 && acts[0].Action == inbox.ActionDiscard && acts[0].Events == 4, "one discard of 4 events"),
	) {
		t.FailNow()
	}
	if due, err := s.EventGetDue(e.ctx, now.Add(time.Hour)); err != nil || due.Solo || due.Batch {
		t.Fatalf("something of source x is still due: %+v %v", due, err)
	}
}

// The quarantine: kept within a cap per source, listed newest first by
// source and window, read whole, counted, locked for a re-ingest, marked,
// deleted, purged, and its copies of an event found by body hash or by an
// id header's value.
func testQuarantine(t *testing.T, e *env) {
	s := e.store
	hdr := http.Header{"X-Github-Delivery": {"d-1"}, "X-Hub-Signature-256": {"sha256=00"}}
	first := factory.Quarantined(e.ctx, t, s, &factory.QuarantinedOpts{Source: "gh", Kind: "github", Header: hdr, Body: []byte(`{"a":1}`), ReceivedAt: e.now.Add(-2 * time.Hour)})
	second := factory.Quarantined(e.ctx, t, s, &factory.QuarantinedOpts{Source: "gh", Kind: "github", Body: []byte(`{"a":2}`), ReceivedAt: e.now})
	factory.Quarantined(e.ctx, t, s, &factory.QuarantinedOpts{Source: "st", Cause: inbox.CauseTimestampOutOfTolerance, ReceivedAt: e.now})
	// A cap of 2: gh holds 2 already.
	if kept := must[bool](t)(s.QuarantineInsert(e.ctx, inbox.Quarantined{Source: "gh", SourceKind: "github", Cause: inbox.CauseSignatureMismatch, ReceivedAt: e.now, Body: []byte("x")}, 2)); kept {
		t.Fatal("kept beyond the cap")
	}
	page := must[[]inbox.Quarantined](t)(s.QuarantineListPage(e.ctx, storage.QuarantineFilter{Source: "gh"}, 0, 10))
	if len(page) != 2 || page[0].ID != second || page[1].ID != first || page[0].Body != nil {
		t.Fatalf("page %+v", page)
	}
	recent := storage.QuarantineFilter{Source: "gh", ReceivedFrom: e.now.Add(-time.Hour)}
	if n := must[int](t)(s.QuarantineCount(e.ctx, recent)); n != 1 {
		t.Fatalf("count in the last hour %d", n)
	}
	q := must[inbox.Quarantined](t)(s.QuarantineGetByID(e.ctx, first))
	if !field.Check(t, "quarantined", field.Eq("Header", q.Header.Get("X-Github-Delivery"), "d-1"), field.Eq("Body", string(q.Body), `{"a":1}`),
		field.Eq("Cause", q.Cause, inbox.CauseSignatureMismatch), field.Eq("ReceivedAt", q.ReceivedAt.Equal(e.now.Add(-2*time.Hour)), true)) {
		t.FailNow()
	}
	if _, err := s.QuarantineGetByID(e.ctx, 1<<40); !errors.Is(err, storage.ErrQuarantineNotFound) {
		t.Fatalf("missing: %v", err)
	}
	tx := must[*storage.Tx](t)(s.Begin(e.ctx))
	defer tx.Rollback(e.ctx)
	locked := must[[]inbox.Quarantined](t)(tx.QuarantineListForReingest(e.ctx, storage.QuarantineFilter{Source: "gh"}, 0, 10))
	if len(locked) != 2 || locked[0].ID != first || string(locked[1].Body) != `{"a":2}` {
		t.Fatalf("for re-ingest %+v", locked)
	}
	if after := must[[]inbox.Quarantined](t)(tx.QuarantineListForReingest(e.ctx, storage.QuarantineFilter{Source: "gh"}, first, 1)); len(after) != 1 || after[0].ID != second {
		t.Fatalf("after the first: %+v", after)
	}
	check(t, tx.QuarantineMarkFailed(e.ctx, second, e.now, inbox.CauseSignatureMismatch, "still"))
	if n := must[int](t)(tx.QuarantineDelete(e.ctx, []int64{first})); n != 1 {
		t.Fatalf("deleted %d", n)
	}
	check(t, tx.Commit(e.ctx))
	q = must[inbox.Quarantined](t)(s.QuarantineGetByID(e.ctx, second))
	if q.LastCause != inbox.CauseSignatureMismatch || q.LastError != "still" || q.TriedAt == nil {
		t.Fatalf("marked %+v", q)
	}
	// Copies: by the body's hash, by an id header's value, not another
	// source's.
	factory.Quarantined(e.ctx, t, s, &factory.QuarantinedOpts{Source: "gh", Kind: "github", Header: hdr, Body: []byte(`{"b":1}`)})
	sum := sha256.Sum256([]byte(`{"a":2}`))
	if n := must[int](t)(s.QuarantineCountCopies(e.ctx, "gh", "d-1", sum[:])); n != 2 {
		t.Fatalf("copies %d, want 2", n)
	}
	if n := must[int](t)(s.QuarantineDeleteCopies(e.ctx, "gh", "d-1", sum[:])); n != 2 {
		t.Fatalf("copies erased %d, want 2", n)
	}
	if n := must[int](t)(s.QuarantinePurge(e.ctx, storage.QuarantineFilter{Source: "st"})); n != 1 {
		t.Fatalf("purged %d", n)
	}
	if n := must[int](t)(s.QuarantineCount(e.ctx, storage.QuarantineFilter{})); n != 0 {
		t.Fatalf("left %d", n)
	}
}
