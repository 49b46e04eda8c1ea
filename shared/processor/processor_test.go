package processor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func TestDrainAppliesEachEventOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	ids := f.insert("ledger", "ledger.write", "evt_", 60)
	p := f.processor(processor.Config{BatchSize: 25})

	st := f.drain(p)
	if st.Claimed != 60 || st.Handled != 60 || st.Batches != 3 || st.Stopped != processor.StopDrained {
		t.Fatalf("stats = %+v", st)
	}
	if rows, events := f.ledger(); rows != 60 || events != 60 {
		t.Fatalf("ledger rows = %d for %d events, want 60 and 60", rows, events)
	}
	r := f.row(ids[0])
	if r.ProcessedAt == nil || !r.ProcessedAt.Equal(f.clock.Now()) || r.Outcome != inbox.OutcomeHandled ||
		r.Attempts != 1 || r.LockedUntil != nil || r.LockedBy != "" || len(r.Errors) != 0 {
		t.Fatalf("processed row = %+v", r)
	}
	// Nothing is due any more: a second drain claims nothing.
	if st := f.drain(p); st.Claimed != 0 || st.Stopped != processor.StopDrained {
		t.Fatalf("second drain = %+v", st)
	}
}

func TestDrainHandlesOldestFirst(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var mu sync.Mutex
	var order []string
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(_ context.Context, _ pgx.Tx, ev *processor.Event) error {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, ev.EventID)
		return nil
	})
	f.insert("ledger", "t", "evt_", 4)
	// The last inserted event is the oldest due.
	factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "ledger", Type: "t", EventID: "evt_00005", NextAttemptAt: time.Now().Add(-time.Hour)})
	f.drain(f.processor(processor.Config{BatchSize: 10}))
	want := "evt_00005 evt_00001 evt_00002 evt_00003 evt_00004"
	if got := strings.Join(order, " "); got != want {
		t.Fatalf("order = %s, want %s", got, want)
	}
}

// TestConcurrentProcessorsApplyEachEventOnce is the acceptance: 4
// processors, each with its own pool, drain 5 000 events at once, and
// every event's effect exists exactly once.
func TestConcurrentProcessorsApplyEachEventOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	f := setupOn(t, newPool(t, url))
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	const events, processors = 5000, 4
	f.insert("ledger", "ledger.write", "evt_", events)

	var wg sync.WaitGroup
	stats := make([]processor.Stats, processors)
	errs := make([]error, processors)
	for i := range processors {
		p := f.processor(processor.Config{Pool: newPool(t, url), BatchSize: 20, Name: fmt.Sprint("p", i)})
		wg.Go(func() { stats[i], errs[i] = p.Drain(f.ctx) })
	}
	wg.Wait()
	handled := 0
	for i := range processors {
		if errs[i] != nil {
			t.Fatalf("processor %d: %v", i, errs[i])
		}
		handled += stats[i].Handled
		t.Logf("processor %d: %+v", i, stats[i])
	}
	if handled != events {
		t.Fatalf("handled %d events in all, want %d", handled, events)
	}
	if rows, distinct := f.ledger(); rows != events || distinct != events {
		t.Fatalf("ledger rows = %d for %d events, want %d once each", rows, distinct, events)
	}
	if n := f.count(`SELECT count(*) FROM webhook_events WHERE processed_at IS NULL OR locked_until IS NOT NULL OR locked_by IS NOT NULL OR attempts <> 1`); n != 0 {
		t.Fatalf("%d events not processed exactly once or still claimed", n)
	}
}

// newPool opens a pool on url with the processor's session settings, as
// the Lambda does.
func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range processor.SessionParams(processor.DefaultHandlerTimeout) {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestRetryBackoffThenSuccess: a handler that fails twice then succeeds
// runs three attempts, at the backoff's times, and its effect exists once.
func TestRetryBackoffThenSuccess(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		// The write happens on every attempt; only the last one commits.
		if err := writeLedger(ctx, tx, ev); err != nil {
			return err
		}
		if ev.Attempts < 3 {
			return fmt.Errorf("downstream unavailable (attempt %d)", ev.Attempts)
		}
		return nil
	})
	id := f.insert("ledger", "t", "evt_", 1)[0]
	// Rand 0.5: the delay after attempt n is half of min(cap, 10s·2^(n-1)).
	p := f.processor(processor.Config{BackoffBase: 10 * time.Second, BackoffCap: time.Minute})
	t0 := f.clock.Now()

	if st := f.drain(p); st.Retried != 1 || st.Handled != 0 {
		t.Fatalf("first drain = %+v", st)
	}
	r := f.row(id)
	if r.Attempts != 1 || !r.NextAttemptAt.Equal(t0.Add(5*time.Second)) || r.LockedBy != "" || r.ProcessedAt != nil ||
		len(r.Errors) != 1 || r.Errors[0].Attempt != 1 || r.Errors[0].Cause != "handler_failed" ||
		!strings.Contains(r.LastError, "downstream unavailable (attempt 1)") {
		t.Fatalf("after attempt 1: %+v", r)
	}
	if rows, _ := f.ledger(); rows != 0 {
		t.Fatal("the failed attempt's write was not rolled back")
	}

	f.clock.Advance(5*time.Second - time.Millisecond)
	if st := f.drain(p); st.Claimed != 0 {
		t.Fatalf("claimed before the backoff passed: %+v", st)
	}
	t1 := f.clock.Advance(time.Millisecond)
	if st := f.drain(p); st.Retried != 1 {
		t.Fatalf("second attempt = %+v", st)
	}
	if r := f.row(id); r.Attempts != 2 || !r.NextAttemptAt.Equal(t1.Add(10*time.Second)) || len(r.Errors) != 2 {
		t.Fatalf("after attempt 2: %+v", r)
	}
	f.clock.Advance(10*time.Second - time.Millisecond)
	if st := f.drain(p); st.Claimed != 0 {
		t.Fatalf("claimed before the second backoff passed: %+v", st)
	}
	f.clock.Advance(time.Millisecond)
	if st := f.drain(p); st.Handled != 1 {
		t.Fatalf("third attempt = %+v", st)
	}
	r = f.row(id)
	if r.Attempts != 3 || r.ProcessedAt == nil || len(r.Errors) != 2 || r.Errors[1].Attempt != 2 {
		t.Fatalf("after success: %+v", r)
	}
	var rows, attempt int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*), max(attempt) FROM ledger WHERE event_pk = $1`, id).Scan(&rows, &attempt); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || attempt != 3 {
		t.Fatalf("ledger: %d rows, attempt %d; want the third attempt's write alone", rows, attempt)
	}
	// The log lines carry the stable keys.
	warn := f.logs.lines(t, "will retry")
	if len(warn) != 2 || warn[0]["source"] != "ledger" || warn[0]["event_id"] != "evt_00001" ||
		warn[0]["cause"] != "handler_failed" || warn[0]["attempt"] != float64(1) || warn[0]["retry_in"] != "5s" {
		t.Fatalf("retry log lines = %v", warn)
	}
}

// TestAlwaysFailingEventIsDeadLetteredThenRequeued: after MaxAttempts the
// event leaves the drain for the dead letters with its payload, body and
// history; a requeue brings it back with its attempts reset.
func TestAlwaysFailingEventIsDeadLetteredThenRequeued(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var fixed bool
	var mu sync.Mutex
	f.reg.HandleFunc(processor.Source("billing"), "invoice.created", func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		mu.Lock()
		defer mu.Unlock()
		if !fixed {
			return fmt.Errorf("no account for customer %q", "cus_1")
		}
		return writeLedger(ctx, tx, ev)
	})
	body := []byte(`{"type":"invoice.created","data":{"customer":"cus_1"}}`)
	id := f.insertOne("billing", "msg_poison", "invoice.created", body)
	// Rand 0: every retry is due at once, so one drain runs all attempts.
	p := f.processor(processor.Config{MaxAttempts: 4, Rand: func() float64 { return 0 }})

	st := f.drain(p)
	if st.Retried != 3 || st.DeadLettered != 1 || st.Handled != 0 {
		t.Fatalf("stats = %+v", st)
	}
	r := f.row(id)
	if r.DeadAt == nil || r.ProcessedAt != nil || r.Attempts != 4 || len(r.Errors) != 4 || r.LockedBy != "" {
		t.Fatalf("dead event = %+v", r)
	}
	dls, err := f.store.DeadLetterList(f.ctx, storage.DeadLetterFilter{Source: "billing"}, 10)
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters = %+v, %v", dls, err)
	}
	dl := dls[0]
	hist := dl.Errors
	if dl.EventPK != id || dl.EventID != "msg_poison" || dl.Type != "invoice.created" || dl.Attempts != 4 ||
		string(dl.Body) != string(body) || !strings.Contains(string(dl.Payload), `"cus_1"`) ||
		len(hist) != 4 || hist[3].Attempt != 4 || hist[0].Cause != "handler_failed" ||
		!strings.Contains(dl.LastError, "no account") || !dl.DeadAt.Equal(f.clock.Now()) {
		t.Fatalf("dead letter = %+v, history %+v", dl, hist)
	}
	// A dead event is out of the drain.
	if st := f.drain(p); st.Claimed != 0 {
		t.Fatalf("dead event claimed again: %+v", st)
	}
	if l := f.logs.lines(t, "dead letters"); len(l) != 1 || l[0]["cause"] != "handler_failed" || l[0]["attempt"] != float64(4) {
		t.Fatalf("dead letter log = %v", l)
	}

	// The bug is fixed; the operator requeues the one dead letter.
	mu.Lock()
	fixed = true
	mu.Unlock()
	if n, err := p.Requeue(f.ctx, storage.DeadLetterFilter{ID: dl.ID}); err != nil || n != 1 {
		t.Fatalf("requeue = %d, %v", n, err)
	}
	r = f.row(id)
	if r.DeadAt != nil || r.Attempts != 0 || len(r.Errors) != 0 || r.LastError != "" || !r.NextAttemptAt.Equal(f.clock.Now()) {
		t.Fatalf("requeued event = %+v", r)
	}
	if n, _ := p.Requeue(f.ctx, storage.DeadLetterFilter{ID: dl.ID}); n != 0 {
		t.Fatal("a dead letter was requeued twice")
	}
	if st := f.drain(p); st.Handled != 1 {
		t.Fatalf("drain after requeue = %+v", st)
	}
	if rows, _ := f.ledger(); rows != 1 {
		t.Fatalf("ledger rows = %d", rows)
	}
	if r := f.row(id); r.Attempts != 1 || r.ProcessedAt == nil {
		t.Fatalf("processed after requeue: %+v", r)
	}
	// The dead letter is kept, marked requeued, with its history.
	var requeued *time.Time
	if err := f.pool.QueryRow(f.ctx, `SELECT requeued_at FROM webhook_dead_letters WHERE id = $1`, dl.ID).Scan(&requeued); err != nil || requeued == nil {
		t.Fatalf("requeued_at = %v, %v", requeued, err)
	}
}

func mustJSON(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
}

func TestPermanentErrorDeadLettersAtOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		if err := writeLedger(ctx, tx, ev); err != nil {
			return err
		}
		return processor.Permanent(fmt.Errorf("event %s: amount missing: %w", ev.EventID, errors.New("bad payload")))
	})
	id := f.insert("ledger", "t", "evt_", 1)[0]
	st := f.drain(f.processor(processor.Config{}))
	if st.DeadLettered != 1 || st.Retried != 0 {
		t.Fatalf("stats = %+v", st)
	}
	r := f.row(id)
	if r.DeadAt == nil || r.Attempts != 1 || len(r.Errors) != 1 || r.Errors[0].Cause != "permanent_error" ||
		!strings.Contains(r.Errors[0].Error, "bad payload") {
		t.Fatalf("row = %+v", r)
	}
	if rows, _ := f.ledger(); rows != 0 {
		t.Fatal("the permanent failure's write was committed")
	}
}

// TestPanicFailsThatEventOnly: a panicking handler fails its own event,
// which is retried like any failure; its neighbours in the batch commit.
func TestPanicFailsThatEventOnly(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		if err := writeLedger(ctx, tx, ev); err != nil {
			return err
		}
		if ev.EventID == "evt_00002" {
			var m map[string]int
			m["boom"]++ // a real bug: nil map
		}
		return nil
	})
	ids := f.insert("ledger", "t", "evt_", 3)
	st := f.drain(f.processor(processor.Config{}))
	if st.Batches != 1 || st.Handled != 2 || st.Retried != 1 {
		t.Fatalf("stats = %+v", st)
	}
	if rows, events := f.ledger(); rows != 2 || events != 2 {
		t.Fatalf("ledger = %d rows / %d events, want the two neighbours", rows, events)
	}
	r := f.row(ids[1])
	if r.ProcessedAt != nil || r.DeadAt != nil || r.Attempts != 1 || len(r.Errors) != 1 ||
		r.Errors[0].Cause != "handler_panic" || !strings.Contains(r.LastError, "assignment to entry in nil map") ||
		!r.NextAttemptAt.After(f.clock.Now()) {
		t.Fatalf("panicked event = %+v", r)
	}
	l := f.logs.lines(t, "panicked")
	if len(l) != 1 || l[0]["event_id"] != "evt_00002" || !strings.Contains(fmt.Sprint(l[0]["stack"]), "processor_test.go") {
		t.Fatalf("panic log = %v", l)
	}
}

func TestUnhandledPolicies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy                   processor.UnhandledPolicy
		processed, dead, retried bool
		attempts                 int
		outcome                  inbox.Outcome
		historyCause, msg        string
	}{
		{policy: "", processed: true, outcome: inbox.OutcomeUnhandled},
		{policy: processor.UnhandledMark, processed: true, outcome: inbox.OutcomeUnhandled},
		{policy: processor.UnhandledRetry, retried: true, attempts: 1, historyCause: "no_handler"},
		{policy: processor.UnhandledDeadLetter, dead: true, historyCause: "no_handler"},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.reg.HandleFunc(processor.Source("ledger"), "known", writeLedger)
			id := f.insert("ledger", "unknown", "evt_", 1)[0]
			st := f.drain(f.processor(processor.Config{Unhandled: tc.policy}))
			r := f.row(id)
			if (r.ProcessedAt != nil) != tc.processed || (r.DeadAt != nil) != tc.dead || (st.Retried == 1) != tc.retried || r.Attempts != tc.attempts {
				t.Fatalf("stats %+v, row %+v", st, r)
			}
			if tc.outcome != "" && (r.Outcome != tc.outcome || st.Unhandled != 1) {
				t.Fatalf("outcome = %v, stats %+v", r.Outcome, st)
			}
			if tc.historyCause != "" && (len(r.Errors) != 1 || string(r.Errors[0].Cause) != tc.historyCause) {
				t.Fatalf("history = %+v", r.Errors)
			}
			if rows, _ := f.ledger(); rows != 0 {
				t.Fatal("a handler ran for an unhandled event")
			}
		})
	}
}

// TestHandlerCannotCommit: the handler's changes commit with processed_at
// or not at all, so the handler may not end the transaction itself.
func TestHandlerCannotCommit(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		if err := writeLedger(ctx, tx, ev); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err == nil {
			t.Error("Commit succeeded inside a handler")
		}
		if err := tx.Rollback(ctx); err == nil {
			t.Error("Rollback succeeded inside a handler")
		}
		// A savepoint is the handler's own business and works.
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := sp.Exec(ctx, `INSERT INTO ledger (event_pk, attempt, note) VALUES ($1, $2, 'savepoint')`, ev.ID, ev.Attempts); err != nil {
			return err
		}
		return sp.Rollback(ctx)
	})
	id := f.insert("ledger", "t", "evt_", 1)[0]
	if st := f.drain(f.processor(processor.Config{})); st.Handled != 1 {
		t.Fatalf("stats = %+v", st)
	}
	if n := f.count(`SELECT count(*) FROM ledger WHERE event_pk = $1 AND note IS NULL`, id); n != 1 {
		t.Fatalf("ledger = %d", n)
	}
	if n := f.count(`SELECT count(*) FROM ledger WHERE note = 'savepoint'`); n != 0 {
		t.Fatal("the rolled-back savepoint's write is there")
	}
}

func TestHandlerTimeout(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		_, err := tx.Exec(ctx, `SELECT pg_sleep(30)`) // cancelled at HandlerTimeout
		return err
	})
	id := f.insert("ledger", "t", "evt_", 1)[0]
	p := f.processor(processor.Config{HandlerTimeout: 100 * time.Millisecond, SafetyMargin: 5 * time.Second})
	if st := f.drain(p); st.Retried != 1 {
		t.Fatalf("stats = %+v", st)
	}
	if r := f.row(id); len(r.Errors) != 1 || r.Errors[0].Cause != "handler_timeout" || r.LockedBy != "" {
		t.Fatalf("row = %+v", r)
	}
}

// TestExpiredLeaseIsClaimedAgain: a processor that claimed and died before
// starting anything leaves its rows claimable once the lease passes, not
// before, and without spending an attempt. Its late writes change nothing.
func TestExpiredLeaseIsClaimedAgain(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	ids := f.insert("ledger", "t", "evt_", 3)
	t0 := f.clock.Now()
	dead, err := f.store.EventClaim(f.ctx, storage.EventClaimParams{Now: t0, Limit: 10, LockedUntil: t0.Add(time.Minute), Token: "dead#1"})
	if err != nil || len(dead) != 3 {
		t.Fatalf("claim = %d, %v", len(dead), err)
	}
	p := f.processor(processor.Config{Lease: time.Minute})
	f.clock.Advance(time.Minute - time.Millisecond)
	if st := f.drain(p); st.Claimed != 0 {
		t.Fatalf("claimed inside another's lease: %+v", st)
	}
	f.clock.Advance(time.Millisecond)
	if st := f.drain(p); st.Handled != 3 {
		t.Fatalf("stats = %+v", st)
	}
	if r := f.row(ids[0]); r.Attempts != 1 || len(r.Errors) != 0 {
		t.Fatalf("an attempt that never started was counted: %+v", r)
	}
	// The first claimer comes back: none of its writes match any more.
	now := f.clock.Now()
	if _, ok, err := f.store.EventStartAttempt(f.ctx, ids[0], "dead#1", t0); ok || err != nil {
		t.Fatalf("stale start = %v, %v", ok, err)
	}
	if ok, err := f.store.EventMarkProcessed(f.ctx, storage.EventMarkProcessedParams{ID: ids[1], Token: "dead#1", Now: now, Outcome: "handled"}); ok || err != nil {
		t.Fatalf("stale mark = %v, %v", ok, err)
	}
	if ok, err := f.store.EventRecordFailure(f.ctx, storage.EventRecordFailureParams{ID: ids[1], Token: "dead#1", Now: now, Cause: "x", Error: "x", NextAttemptAt: now}); ok || err != nil {
		t.Fatalf("stale failure = %v, %v", ok, err)
	}
	if _, ok, err := f.store.EventDeadLetter(f.ctx, storage.EventDeadLetterParams{ID: ids[2], Token: "dead#1", Now: now, Cause: "x", Error: "x"}); ok || err != nil {
		t.Fatalf("stale dead letter = %v, %v", ok, err)
	}
	if n, err := f.store.EventRelease(f.ctx, ids, "dead#1", now); n != 0 || err != nil {
		t.Fatalf("stale release = %d, %v", n, err)
	}
	if rows, events := f.ledger(); rows != 3 || events != 3 {
		t.Fatalf("ledger = %d/%d", rows, events)
	}
}

// TestStaleProcessorCannotApplyAfterTakeover: the lease of A passes while
// A is slow; B claims and applies the event; A's transaction then matches
// no row and applies nothing, even though A had started.
func TestStaleProcessorCannotApplyAfterTakeover(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.insert("ledger", "t", "evt_", 1)[0]
	t0 := f.clock.Now()
	if _, err := f.store.EventClaim(f.ctx, storage.EventClaimParams{Now: t0, Limit: 1, LockedUntil: t0.Add(time.Minute), Token: "A#1"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := f.store.EventStartAttempt(f.ctx, id, "A#1", t0); !ok || err != nil {
		t.Fatalf("start = %v, %v", ok, err)
	}
	f.clock.Advance(2 * time.Minute)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	if st := f.drain(f.processor(processor.Config{})); st.Handled != 1 {
		t.Fatalf("B: %+v", st)
	}
	tx, err := f.store.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(f.ctx)
	ok, err := tx.EventMarkProcessed(f.ctx, storage.EventMarkProcessedParams{ID: id, Token: "A#1", Now: f.clock.Now(), Outcome: "handled"})
	if ok || err != nil {
		t.Fatalf("A's late mark = %v, %v", ok, err)
	}
}

// TestKilledAttemptIsCountedAndRecorded: an attempt that started and never
// finished (its processor was killed) is counted and, at the next claim,
// written to the history as lease_expired; the next attempt is number 2.
func TestKilledAttemptIsCountedAndRecorded(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	ids := f.insert("ledger", "t", "evt_", 2)
	t0 := f.clock.Now()
	lease := t0.Add(time.Minute)
	if _, err := f.store.EventClaim(f.ctx, storage.EventClaimParams{Now: t0, Limit: 2, LockedUntil: lease, Token: "killed#1"}); err != nil {
		t.Fatal(err)
	}
	// Killed while handling the first event; the second never started.
	if _, ok, err := f.store.EventStartAttempt(f.ctx, ids[0], "killed#1", t0); !ok || err != nil {
		t.Fatalf("start = %v, %v", ok, err)
	}
	f.clock.Advance(time.Minute)
	if st := f.drain(f.processor(processor.Config{})); st.Handled != 2 {
		t.Fatalf("stats = %+v", st)
	}
	r := f.row(ids[0])
	if r.Attempts != 2 || len(r.Errors) != 1 || r.Errors[0].Cause != "lease_expired" || r.Errors[0].Attempt != 1 ||
		!r.Errors[0].At.Equal(lease) || r.LastError == "" {
		t.Fatalf("killed event = %+v", r)
	}
	if r := f.row(ids[1]); r.Attempts != 1 || len(r.Errors) != 0 {
		t.Fatalf("the neighbour that never started was charged: %+v", r)
	}
	// The operator sees that a processor died mid-event.
	if l := f.logs.lines(t, "never finished"); len(l) != 1 || l[0]["cause"] != "lease_expired" || l[0]["event_id"] != "evt_00001" {
		t.Fatalf("interrupted attempt log = %v", l)
	}
}

// TestLoweredMaxAttemptsDeadLetters: an event that already made more
// attempts than a newly lowered maximum is dead-lettered, not run again.
func TestLoweredMaxAttemptsDeadLetters(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(context.Context, pgx.Tx, *processor.Event) error {
		return errors.New("still broken")
	})
	id := f.insert("ledger", "t", "evt_", 1)[0]
	before := f.processor(processor.Config{MaxAttempts: 10, BackoffBase: time.Second, BackoffCap: time.Second})
	for range 2 {
		f.drain(before)
		f.clock.Advance(time.Second)
	}
	st := f.drain(f.processor(processor.Config{MaxAttempts: 2}))
	r := f.row(id)
	if st.DeadLettered != 1 || r.Attempts != 2 || len(r.Errors) != 3 || r.Errors[2].Cause != "max_attempts" {
		t.Fatalf("stats %+v, row %+v", st, r)
	}
}

// TestPoisonThatKillsItsProcessorIsDeadLettered: an event whose handler
// kills the processor every time spends its attempts and is dead-lettered
// by the claim after the last one, without running again.
func TestPoisonThatKillsItsProcessorIsDeadLettered(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ran := 0
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(context.Context, pgx.Tx, *processor.Event) error {
		ran++
		return nil
	})
	id := f.insert("ledger", "t", "evt_", 1)[0]
	const maxAttempts = 3
	for i := range maxAttempts {
		now := f.clock.Now()
		claimed, err := f.store.EventClaim(f.ctx, storage.EventClaimParams{Now: now, Limit: 1, LockedUntil: now.Add(time.Minute), Token: fmt.Sprint("crash#", i)})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim %d = %v, %v", i, claimed, err)
		}
		if _, ok, err := f.store.EventStartAttempt(f.ctx, id, fmt.Sprint("crash#", i), now); !ok || err != nil {
			t.Fatal(ok, err)
		}
		f.clock.Advance(time.Minute) // ... and the processor dies.
	}
	st := f.drain(f.processor(processor.Config{MaxAttempts: maxAttempts}))
	if st.DeadLettered != 1 || ran != 0 {
		t.Fatalf("stats = %+v, handler ran %d times", st, ran)
	}
	r := f.row(id)
	if r.DeadAt == nil || r.Attempts != maxAttempts || len(r.Errors) != maxAttempts || r.Errors[2].Cause != "lease_expired" {
		t.Fatalf("row = %+v", r)
	}
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
	if r := f.row(id); r.LockedBy != "" || r.Attempts != 0 {
		t.Fatalf("row touched: %+v", r)
	}
	ctx, cancel = context.WithTimeout(f.ctx, time.Minute)
	defer cancel()
	if st, err := p.Drain(ctx); err != nil || st.Handled != 1 {
		t.Fatalf("with time left: %+v, %v", st, err)
	}
}

// TestReleasesWhatNoLongerFitsTheLease: events of a batch are started only
// while SafetyMargin fits before the lease's end; the rest are released,
// due at once, without an attempt, and a fresh claim takes them.
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
	if st.Handled != 3 || st.Released != 2 || st.Batches != 2 || st.Stopped != processor.StopDrained {
		t.Fatalf("stats = %+v", st)
	}
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
		return writeLedger(c, tx, ev)
	})
	ids := f.insert("ledger", "t", "evt_", 3)
	st, err := f.processor(processor.Config{}).Drain(ctx)
	if !errors.Is(err, context.Canceled) || st.Stopped != processor.StopCancelled || st.Released != 2 {
		t.Fatalf("drain = %+v, %v", st, err)
	}
	if r := f.row(ids[1]); r.LockedBy != "" || r.Attempts != 0 || !r.NextAttemptAt.Equal(f.clock.Now()) {
		t.Fatalf("unstarted event = %+v", r)
	}
}

func TestDatabaseFailureStopsTheDrain(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.insert("ledger", "t", "evt_", 1)
	pool := newPool(t, pgtest.URL(t))
	pool.Close()
	st, err := f.processor(processor.Config{Pool: pool}).Drain(f.ctx)
	if err == nil || st.Stopped != processor.StopError || !strings.Contains(err.Error(), "claim events") {
		t.Fatalf("drain = %+v, %v", st, err)
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

	if _, err := p.Requeue(f.ctx, storage.DeadLetterFilter{}); !errors.Is(err, storage.ErrEmptyFilter) {
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
		n, err := p.Requeue(f.ctx, tc.filter)
		if err != nil || n != tc.want {
			t.Fatalf("%s: requeued %d, %v; want %d", tc.name, n, err, tc.want)
		}
	}
	if n := f.count(`SELECT count(*) FROM webhook_events WHERE dead_at IS NOT NULL`); n != 0 {
		t.Fatalf("%d events still dead", n)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	pool := &pgxpool.Pool{}
	for name, tc := range map[string]struct {
		cfg  processor.Config
		want string
	}{
		"no pool":         {processor.Config{}, "Pool is required"},
		"huge batch":      {processor.Config{Pool: pool, BatchSize: 5000}, "BatchSize"},
		"negative tries":  {processor.Config{Pool: pool, MaxAttempts: -1}, "MaxAttempts"},
		"cap below base":  {processor.Config{Pool: pool, BackoffBase: time.Hour, BackoffCap: time.Minute}, "BackoffBase"},
		"margin too thin": {processor.Config{Pool: pool, HandlerTimeout: time.Minute, SafetyMargin: 30 * time.Second}, "SafetyMargin"},
		"lease too short": {processor.Config{Pool: pool, Lease: 10 * time.Second}, "Lease"},
		"unknown policy":  {processor.Config{Pool: pool, Unhandled: "ignore"}, "unhandled policy"},
	} {
		if _, err := processor.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", name, err, tc.want)
		}
	}
	p, err := processor.New(processor.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Config()
	if c.BatchSize != processor.DefaultBatchSize || c.MaxAttempts != processor.DefaultMaxAttempts ||
		c.Lease != processor.DefaultLease || c.SafetyMargin != processor.DefaultSafetyMargin || c.Unhandled != processor.UnhandledMark {
		t.Fatalf("defaults = %+v", c)
	}
}

// TestAttemptCountKeepsSessionSynchronous: the attempt count commits
// asynchronously, for its own transaction alone; the handler's commit on
// the same connection must still wait for the WAL flush.
func TestAttemptCountKeepsSessionSynchronous(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	cfg := newPool(t, url).Config()
	cfg.MaxConns = 1 // the count and the handler share one session
	single, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	f := setupOn(t, single)
	var setting string
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		return tx.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&setting)
	})
	f.insert("ledger", "t", "evt_", 1)
	if st := f.drain(f.processor(processor.Config{})); st.Handled != 1 {
		t.Fatalf("stats = %+v", st)
	}
	if setting != "on" {
		t.Fatalf("synchronous_commit in the handler's transaction = %q, want on", setting)
	}
	if err := single.QueryRow(f.ctx, `SHOW synchronous_commit`).Scan(&setting); err != nil || setting != "on" {
		t.Fatalf("session synchronous_commit = %q, %v", setting, err)
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
