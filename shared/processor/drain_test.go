package processor_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// TestLateProcessorKeepsItsEvents: a processor slower than its lease still
// holds its events' row locks, so the processor that finds its claim past
// the lease records nothing for them and takes none of them; the late one
// then commits its work, once.
func TestLateProcessorKeepsItsEvents(t *testing.T) {
	tier.Heavy(t, "waits out the recovery's lock timeout (2 s of wall time) on the late processor's rows")
	t.Parallel()
	url := pgtest.URL(t)
	f := setupOn(t, newPool(t, url))
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		if ev.EventID == "evt_00001" {
			started <- struct{}{}
			<-release // slow: its lease passes meanwhile
		}
		return writeLedger(ctx, tx, ev)
	})
	f.insert("ledger", "t", "evt_", 2)
	late := f.processorOn(processor.Config{Lease: time.Minute}, processor.Deps{Pool: newPool(t, url)})
	done := make(chan processor.Stats, 1)
	go func() { st, _ := late.Drain(f.ctx); done <- st }()
	<-started
	f.clock.Advance(2 * time.Minute)

	other := f.processorOn(processor.Config{}, processor.Deps{Pool: newPool(t, url)})
	if st := f.drain(other); st.Claimed != 0 || st.Interrupted != 0 {
		t.Fatalf("the other processor took or recorded the late one's events: %+v", st)
	}
	if l := f.logs.lines(t, "late, not dead"); len(l) != 1 {
		t.Fatalf("late-claim log = %v", l)
	}
	close(release)
	if st := <-done; st.Handled != 2 {
		t.Fatalf("late processor = %+v", st)
	}
	if rows, events := f.ledger(); rows != 2 || events != 2 {
		t.Fatalf("ledger = %d/%d", rows, events)
	}
	f.noOpenClaims()
}

// TestRecoveredClaimRollsBackItsProcessor: when another processor has
// recovered a claim (its processor was presumed dead), the processor that
// comes back commits none of its work on it.
func TestRecoveredClaimRollsBackItsProcessor(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	f := setupOn(t, newPool(t, url))
	calls := 0
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		if calls++; calls > 1 {
			return writeLedger(ctx, tx, ev)
		}
		// Another processor recovers the claim from under the handler.
		live, err := f.store.ClaimListLive(ctx, f.clock.Now())
		if err != nil || len(live) != 1 {
			return fmt.Errorf("live claims = %v, %v", live, err)
		}
		if ok, err := f.store.ClaimRelease(ctx, live[0].Processor, live[0].Token, f.clock.Now()); !ok || err != nil {
			return fmt.Errorf("release = %v, %v", ok, err)
		}
		return writeLedger(ctx, tx, ev)
	})
	id := f.insert("ledger", "t", "evt_", 1)[0]
	// The lost claim's work is rolled back, and the event, untouched, is
	// claimed again.
	st := f.drain(f.processor(processor.Config{}))
	if st.LeaseLost != 1 || st.Handled != 1 || st.Batches != 2 {
		t.Fatalf("stats = %+v", st)
	}
	if rows, _ := f.ledger(); rows != 1 {
		t.Fatalf("ledger rows = %d, want the second claim's alone", rows)
	}
	if r := f.row(id); r.ProcessedAt == nil || r.Attempts != 1 {
		t.Fatalf("row = %+v", r)
	}
	if l := f.logs.lines(t, "recovered by another processor"); len(l) != 1 || l[0]["cause"] != "lease_lost" {
		t.Fatalf("log = %v", l)
	}
}

// TestLoweredMaxAttemptsDeadLetters: an event that already failed more
// attempts than a newly lowered maximum is dead-lettered, not run again.
func TestLoweredMaxAttemptsDeadLetters(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ran := 0
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(context.Context, pgx.Tx, *processor.Event) error {
		ran++
		return errors.New("still broken")
	})
	id := f.insert("ledger", "t", "evt_", 1)[0]
	before := f.processor(processor.Config{MaxAttempts: 10, BackoffBase: time.Second, BackoffCap: time.Second})
	for range 2 {
		f.drain(before)
		f.clock.Advance(time.Second)
	}
	st := f.drain(f.processor(processor.Config{MaxAttempts: 2}))
	r, h := f.row(id), f.history(id)
	if ran != 2 {
		t.Fatalf("the handler ran %d times, want 2", ran)
	}
	check(t, "stats", st, map[string]any{"DeadLettered": 1})
	check(t, "row", r, map[string]any{"DeadAt": set})
	attempts(t, h, 3)
	check(t, "attempt 3", h[2], map[string]any{"Cause": "max_attempts", "Dead": true})
}

// TestStopsClaimingNearTheDeadline: with less than SafetyMargin left
// before the context's deadline (the Lambda's end), nothing is claimed.
func TestStopsClaimingNearTheDeadline(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	id := f.insert("ledger", "t", "evt_", 1)[0]
	p := f.processor(processor.Config{HandlerTimeout: 5 * time.Second, SafetyMargin: 10 * time.Second})
	ctx, cancel := context.WithTimeout(f.ctx, 9*time.Second)
	defer cancel()
	st, err := p.Drain(ctx)
	if err != nil || st.Claimed != 0 || st.Stopped != processor.StopDeadline {
		t.Fatalf("drain = %+v, %v", st, err)
	}
	if r := f.row(id); r.ClaimedBy != "" || r.Attempts != 0 {
		t.Fatalf("row touched: %+v", r)
	}
	ctx, cancel = context.WithTimeout(f.ctx, time.Minute)
	defer cancel()
	if st, err := p.Drain(ctx); err != nil || st.Handled != 1 {
		t.Fatalf("with time left: %+v, %v", st, err)
	}
}

// TestReleasesWhatNoLongerFitsTheLease: events of a claim are started only
// while SafetyMargin fits before the lease's end; the rest are left as
// they were, without an attempt, and a fresh claim takes them.
func TestReleasesWhatNoLongerFitsTheLease(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		if ev.EventID == "evt_00001" {
			f.clock.Advance(51 * time.Second) // a slow first event
		}
		return writeLedger(ctx, tx, ev)
	})
	ids := f.insert("ledger", "t", "evt_", 3)
	p := f.processor(processor.Config{Lease: time.Minute, HandlerTimeout: 5 * time.Second, SafetyMargin: 10 * time.Second})
	st := f.drain(p)
	check(t, "stats", st, map[string]any{"Handled": 3, "Released": 2, "Batches": 2, "Stopped": processor.StopDrained})
	if r := f.row(ids[2]); r.Attempts != 1 {
		t.Fatalf("a released event was charged an attempt: %+v", r)
	}
}

func TestCancelledDrainReleasesItsClaim(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithCancel(f.ctx)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(c context.Context, tx pgx.Tx, ev *processor.Event) error {
		cancel() // Ctrl-C during the first event
		return nil
	})
	ids := f.insert("ledger", "t", "evt_", 3)
	st, err := f.processor(processor.Config{}).Drain(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("drain = %v, want it cancelled", err)
	}
	check(t, "stats", st, map[string]any{"Stopped": processor.StopCancelled, "Released": 2, "Handled": 1})
	if r := f.row(ids[1]); r.ClaimedBy != "" || r.Attempts != 0 || r.ProcessedAt != nil {
		t.Fatalf("unstarted event = %+v", r)
	}
	f.noOpenClaims()
}

func TestDatabaseFailureStopsTheDrain(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.insert("ledger", "t", "evt_", 1)
	pool := newPool(t, pgtest.URL(t))
	pool.Close()
	st, err := f.processorOn(processor.Config{}, processor.Deps{Pool: pool}).Drain(f.ctx)
	if err == nil || st.Stopped != processor.StopError {
		t.Fatalf("drain = %+v, %v", st, err)
	}
	if l := f.logs.lines(t, "bookkeeping failed"); len(l) == 0 || l[0]["cause"] != "database_unavailable" {
		t.Fatalf("log = %v", l)
	}
}

// TestOneConnectionIsRefused: a claim's transaction holds one connection
// while the claim is recorded on another, so a pool of one is an error,
// not a drain that waits for itself.
func TestOneConnectionIsRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	cfg := newPool(t, pgtest.URL(t)).Config()
	cfg.MaxConns = 1
	one, err := pgxpool.NewWithConfig(f.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if _, err := f.processorOn(processor.Config{}, processor.Deps{Pool: one}).Drain(f.ctx); err == nil || !strings.Contains(err.Error(), "at least 2 connections") {
		t.Fatalf("drain on a pool of one: %v", err)
	}
}

func TestRequeueFilters(t *testing.T) {
	t.Parallel()
	f := setup(t)
	p := f.processor(processor.Config{Unhandled: processor.UnhandledDeadLetter})
	// Dead letters of two sources and types, an hour apart.
	f.insert("ledger", "a", "l_a_", 2)
	f.insert("billing", "a", "b_a_", 1)
	f.drain(p)
	t1 := f.clock.Advance(time.Hour)
	f.insert("ledger", "b", "l_b_", 3)
	f.drain(p)
	if n := f.count(`SELECT count(*) FROM webhook_dead_letters`); n != 6 {
		t.Fatalf("dead letters = %d", n)
	}

	if _, err := f.store.DeadLetterRequeue(f.ctx, storage.DeadLetterFilter{}, storage.BulkOptions{Now: f.clock.Now(), By: operator}); !errors.Is(err, storage.ErrEmptyFilter) {
		t.Fatalf("empty filter: %v", err)
	}
	for _, tc := range []struct {
		name   string
		filter storage.DeadLetterFilter
		want   int
	}{
		{"source and type", storage.DeadLetterFilter{Source: "ledger", EventType: "a"}, 2},
		{"again: already requeued", storage.DeadLetterFilter{Source: "ledger", EventType: "a"}, 0},
		{"window before t1", storage.DeadLetterFilter{DeadTo: t1}, 1},
		{"window from t1", storage.DeadLetterFilter{Source: "ledger", DeadFrom: t1, DeadTo: t1.Add(time.Second)}, 3},
		{"all", storage.DeadLetterFilter{All: true}, 0},
	} {
		n, err := f.store.DeadLetterRequeue(f.ctx, tc.filter, storage.BulkOptions{Now: f.clock.Now(), By: operator})
		if err != nil || n.Done != tc.want {
			t.Fatalf("%s: requeued %d, %v; want %d", tc.name, n.Done, err, tc.want)
		}
	}
	if n := f.count(`SELECT count(*) FROM webhook_events WHERE dead_at IS NOT NULL`); n != 0 {
		t.Fatalf("%d events still dead", n)
	}
}

// TestReplayKeepsEarlierAttempts: a replayed event runs again as a new
// run; its handler sees the next attempt number, and the history keeps the
// first processing beside the replay's.
func TestReplayKeepsEarlierAttempts(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var seen []int
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		seen = append(seen, ev.Attempts)
		return writeLedger(ctx, tx, ev)
	})
	id := f.insert("ledger", "t", "evt_", 1)[0]
	p := f.processor(processor.Config{})
	f.drain(p)
	first := f.row(id).ProcessedAt
	f.clock.Advance(time.Hour)
	res, err := f.store.EventReplay(f.ctx, storage.ReplayFilter{ID: id}, storage.ReplayOptions{Now: f.clock.Now(), By: operator})
	if err != nil || res.Replayed != 1 {
		t.Fatalf("replay = %+v, %v", res, err)
	}
	if st := f.drain(p); st.Handled != 1 {
		t.Fatalf("drain after replay = %+v", st)
	}
	r, h := f.row(id), f.history(id)
	if len(seen) != 2 || seen[1] != 2 {
		t.Fatalf("the handler saw attempts %v, want 1 then 2", seen)
	}
	check(t, "row", r, map[string]any{"Attempts": 2})
	attempts(t, h, 2)
	check(t, "attempt 1", h[0], map[string]any{"FinishedAt": *first, "Outcome": inbox.AttemptHandled})
	check(t, "attempt 2", h[1], map[string]any{"StartedAt": f.clock.Now()})
	if rows, _ := f.ledger(); rows != 2 {
		t.Fatalf("ledger rows = %d, want one per run", rows)
	}
}

// TestBodiesBeyondTheBudget: 25 bodies of 4 MiB
// under a budget of two drain in one claim, read two at a time, each
// handler given its exact body, the heap never holding much more than the
// budget, and no claim taken twice. A body larger than the budget alone is
// dead-lettered with its own cause, never claimed again. It measures the
// process's heap, so it does not run in parallel with the package's other
// tests.
func TestBodiesBeyondTheBudget(t *testing.T) {
	tier.Heavy(t, "25 bodies of 4 MiB through the memory budget")
	f := setup(t)
	const size, n = 4 << 20, 25
	const budget = 2*size + 1024
	sums := map[string][32]byte{}
	for i := range n {
		body := bytes.Repeat([]byte{'a' + byte(i)}, size)
		copy(body, fmt.Sprintf(`{"i":%d,"pad":"`, i))
		body[size-2], body[size-1] = '"', '}'
		id := fmt.Sprintf("evt_%05d", i+1)
		sums[id] = sha256.Sum256(body)
		factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "ledger", Type: "big", EventID: id, Body: body})
	}
	var peak, base uint64
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base = ms.HeapAlloc
	var wrong atomic.Int64
	f.reg.HandleFunc(processor.Source("ledger"), "big", func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		if sha256.Sum256(ev.Body) != sums[ev.EventID] || !bytes.Equal(ev.Payload, ev.Body) {
			wrong.Add(1)
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
		return writeLedger(ctx, tx, ev)
	})
	// A long lease: this test is about memory, and on a loaded machine
	// (with -race, a GC per handler over 25 × 4 MiB) the default lease's
	// safety margin would rightly stop the batch early, leaving the rest
	// for the next drain.
	p := f.processor(processor.Config{BodyBudget: budget, Lease: 30 * time.Minute})
	st := f.drain(p)
	if st.Handled != n || st.Batches != 1 || wrong.Load() != 0 {
		t.Fatalf("stats = %+v, %d handlers given the wrong body", st, wrong.Load())
	}
	// Each body is held as the row pgx read and the body handed over; two
	// at a time is ~16 MiB, where all 25 would be ~200 MiB (body and
	// payload each, as the processor once read them).
	if grew := int64(peak) - int64(base); grew > 40<<20 {
		t.Fatalf("the heap grew by %d MiB during the drain, for a budget of %d MiB", grew>>20, budget>>20)
	}
	t.Logf("heap grew by %.1f MiB at most (budget %.1f MiB)", float64(int64(peak)-int64(base))/(1<<20), float64(budget)/(1<<20))

	// One body larger than the budget alone.
	huge := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "ledger", Type: "big", Body: bytes.Repeat([]byte("x"), budget+1)})
	if st := f.drain(p); st.DeadLettered != 1 || st.Handled != 0 {
		t.Fatalf("stats = %+v", st)
	}
	if h := f.history(huge.ID); len(h) != 1 || h[0].Cause != inbox.CauseBodyOverBudget || !h[0].Dead {
		t.Fatalf("history = %+v", h)
	}
	if st := f.drain(p); st.Claimed != 0 {
		t.Fatalf("the dead event was claimed again: %+v", st)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	deps := processor.Deps{Pool: &pgxpool.Pool{}}
	for name, tc := range map[string]struct {
		cfg  processor.Config
		deps processor.Deps
		want string
	}{
		"no pool":         {processor.Config{}, processor.Deps{}, "no pool"},
		"huge batch":      {processor.Config{BatchSize: processor.MaxBatchSize + 1}, deps, "BatchSize"},
		"negative budget": {processor.Config{BodyBudget: -1}, deps, "BodyBudget"},
		"negative tries":  {processor.Config{MaxAttempts: -1}, deps, "MaxAttempts"},
		"cap below base":  {processor.Config{BackoffBase: time.Hour, BackoffCap: time.Minute}, deps, "BackoffBase"},
		"margin too thin": {processor.Config{HandlerTimeout: time.Minute, SafetyMargin: 30 * time.Second}, deps, "SafetyMargin"},
		"lease too short": {processor.Config{Lease: 10 * time.Second}, deps, "Lease"},
		"unknown policy":  {processor.Config{Unhandled: "ignore"}, deps, "unhandled policy"},
	} {
		if _, err := processor.New(tc.cfg, tc.deps); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", name, err, tc.want)
		}
	}
	// The zero Config runs on the defaults, which WithDefaults shows as
	// New applies them.
	if _, err := processor.New(processor.Config{}, deps); err != nil {
		t.Fatal(err)
	}
	check(t, "defaults", processor.Config{}.WithDefaults(), map[string]any{"BatchSize": processor.DefaultBatchSize, "MaxAttempts": processor.DefaultMaxAttempts,
		"BodyBudget": processor.DefaultBodyBudget, "Lease": processor.DefaultLease, "SafetyMargin": processor.DefaultSafetyMargin,
		"Unhandled": processor.UnhandledMark})
}

// TestClaimRecordKeepsSessionsSynchronous: the claim's record commits
// asynchronously, for its own transaction alone; the claim's transaction,
// and every session afterwards, must still wait for the WAL flush.
func TestClaimRecordKeepsSessionsSynchronous(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	pool := newPool(t, url)
	f := setupOn(t, pool)
	var setting string
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		return tx.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&setting)
	})
	f.insert("ledger", "t", "evt_", 1)
	if st := f.drain(f.processor(processor.Config{})); st.Handled != 1 {
		t.Fatalf("stats = %+v", st)
	}
	if setting != "on" {
		t.Fatalf("synchronous_commit in the claim's transaction = %q, want on", setting)
	}
	// Both connections of the pool, held at once so that each is asked.
	var conns []*pgxpool.Conn
	for range 2 {
		c, err := pool.Acquire(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		conns = append(conns, c)
	}
	for _, c := range conns {
		if err := c.QueryRow(f.ctx, `SHOW synchronous_commit`).Scan(&setting); err != nil || setting != "on" {
			t.Fatalf("session synchronous_commit = %q, %v", setting, err)
		}
	}
}

func TestSessionParamsApplyToConnections(t *testing.T) {
	t.Parallel()
	pool := newPool(t, pgtest.URL(t))
	var stmt, idle string
	if err := pool.QueryRow(t.Context(), `SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')`).Scan(&stmt, &idle); err != nil {
		t.Fatal(err)
	}
	if stmt != "35s" || idle != "35s" {
		t.Fatalf("statement_timeout = %s, idle_in_transaction_session_timeout = %s; want 35s each", stmt, idle)
	}
}
