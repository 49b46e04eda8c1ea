package processor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
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

func TestDrainAppliesEachEventOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	ids := f.insert("ledger", "ledger.write", "evt_", 60)
	p := f.processor(processor.Config{BatchSize: 25})

	st := f.drain(p)
	check(t, "stats", st, map[string]any{"Claimed": 60, "Handled": 60, "Batches": 3, "Solo": 0, "Fallbacks": 0, "Stopped": processor.StopDrained})
	if rows, events := f.ledger(); rows != 60 || events != 60 {
		t.Fatalf("ledger rows = %d for %d events, want 60 and 60", rows, events)
	}
	r := f.row(ids[0])
	check(t, "processed row", r, map[string]any{"ProcessedAt": f.clock.Now(), "Outcome": inbox.OutcomeHandled,
		"Attempts": 1, "FailedAttempts": 0, "Solo": false, "ClaimedUntil": unset, "LastAttemptAt": set})
	// One row per attempt: this one, handled in a batch of 25.
	h := f.history(ids[0])
	attempts(t, h, 1)
	check(t, "attempt", h[0], map[string]any{"Number": 1, "Outcome": inbox.AttemptHandled, "BatchSize": 25, "FinishedAt": set, "Dead": false})
	// The processor names itself for operators: this host and process,
	// then a random suffix and the drain's worker.
	host, _ := os.Hostname()
	if want := host + ":" + strconv.Itoa(os.Getpid()) + "/"; !strings.HasPrefix(h[0].Processor, want) {
		t.Fatalf("attempt's processor = %q, want %s...", h[0].Processor, want)
	}
	// Nothing is due any more, and no claim holds anything.
	check(t, "second drain", f.drain(p), map[string]any{"Claimed": 0, "Stopped": processor.StopDrained})
	f.noOpenClaims()
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

// TestConcurrentProcessorsApplyEachEventOnce: 4 processors, each with its
// own pool, drain 5 000 events at once, and every event's effect exists
// exactly once.
func TestConcurrentProcessorsApplyEachEventOnce(t *testing.T) {
	tier.Heavy(t, "5 000 events through four processors")
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
		p := f.processorOn(processor.Config{BatchSize: 20}, processor.Deps{Pool: newPool(t, url)})
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
	if n := f.count(`SELECT count(*) FROM webhook_events WHERE processed_at IS NULL OR attempts <> 1`); n != 0 {
		t.Fatalf("%d events not processed exactly once", n)
	}
	if n := f.count(`SELECT count(*) FROM webhook_attempts WHERE outcome = 'handled'`); n != events {
		t.Fatalf("%d handled attempts in the history, want %d", n, events)
	}
	f.noOpenClaims()
}

// newPool opens a pool on url as the Lambda's (two connections, the
// processor's session settings, statements cancelled with their context).
func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := storage.PoolConfig{
		URL: url, MaxConns: 2, RuntimeParams: processor.SessionParams(processor.DefaultHandlerTimeout), CancelOnContext: true,
	}.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestPoisonEventInABatchOf25: one event of a
// batch of 25 is poison; the other 24 are processed exactly once and
// charged one attempt each, and the poison alone reaches the dead letters.
// The poison fails in each way a handler can: an error, a panic, and a
// statement that takes the whole transaction down with it (the batch then
// falls back to one transaction per event).
func TestPoisonEventInABatchOf25(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fail  func(ctx context.Context, tx pgx.Tx) error
		cause inbox.Cause
		// fallback: the batch's transaction is lost, and every event's
		// attempt is the one it then makes alone.
		fallback bool
	}{
		{"error", func(context.Context, pgx.Tx) error { return errors.New("no such customer") }, inbox.CauseHandlerFailed, false},
		{"panic", func(context.Context, pgx.Tx) error { panic("nil map") }, inbox.CauseHandlerPanic, false},
		{"kills its connection", func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
			return err
		}, inbox.CauseHandlerFailed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
				if err := writeLedger(ctx, tx, ev); err != nil {
					return err
				}
				if ev.EventID == "evt_00013" {
					return tc.fail(ctx, tx)
				}
				return nil
			})
			ids := f.insert("ledger", "t", "evt_", 25)
			// Rand 0: each retry is due at once, so one drain runs them all.
			p := f.processorOn(processor.Config{BatchSize: 25, MaxAttempts: 3}, processor.Deps{Rand: func() float64 { return 0 }})
			st := f.drain(p)
			check(t, "stats", st, map[string]any{"Handled": 24, "DeadLettered": 1, "Retried": 2})
			if (st.Fallbacks > 0) != tc.fallback {
				t.Fatalf("%d fallbacks, want some: %t", st.Fallbacks, tc.fallback)
			}
			batch := 25
			if tc.fallback {
				batch = 1
			}
			if rows, events := f.ledger(); rows != 24 || events != 24 {
				t.Fatalf("ledger = %d rows for %d events, want the 24 neighbours once each", rows, events)
			}
			for i, id := range ids {
				r, h := f.row(id), f.history(id)
				if i == 12 {
					check(t, "poison", r, map[string]any{"DeadAt": set, "Attempts": 3, "FailedAttempts": 3, "Solo": true})
					attempts(t, h, 3)
					check(t, "poison's attempt 1", h[0], map[string]any{"BatchSize": batch})
					check(t, "poison's attempt 2", h[1], map[string]any{"BatchSize": 1})
					check(t, "poison's attempt 3", h[2], map[string]any{"Dead": true, "Cause": tc.cause})
					continue
				}
				what := fmt.Sprintf("neighbour %d", i+1)
				check(t, what, r, map[string]any{"ProcessedAt": set, "Attempts": 1, "FailedAttempts": 0, "Solo": false})
				attempts(t, h, 1)
				check(t, what+"'s attempt", h[0], map[string]any{"Outcome": inbox.AttemptHandled, "BatchSize": batch})
			}
			if n := f.count(`SELECT count(*) FROM webhook_dead_letters`); n != 1 {
				t.Fatalf("%d dead letters, want the poison's alone", n)
			}
			f.noOpenClaims()
		})
	}
}

// TestRetryBackoffThenSuccess: a handler that fails twice then succeeds
// runs three attempts, alone after the first failure, at the backoff's
// times, and its effect exists once; the history has all three.
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
	// Rand 0.5: the delay after failure n is half of min(cap, 10s·2^(n-1)).
	p := f.processor(processor.Config{BackoffBase: 10 * time.Second, BackoffCap: time.Minute})
	t0 := f.clock.Now()

	if st := f.drain(p); st.Retried != 1 || st.Handled != 0 {
		t.Fatalf("first drain = %+v", st)
	}
	r := f.row(id)
	check(t, "after attempt 1", r, map[string]any{"Attempts": 1, "FailedAttempts": 1, "Solo": true, "NextAttemptAt": t0.Add(5 * time.Second),
		"ProcessedAt": unset, "LastAttemptAt": t0})
	if !strings.Contains(r.LastError, "downstream unavailable (attempt 1)") {
		t.Fatalf("after attempt 1, last error %q", r.LastError)
	}
	if h := f.history(id); len(h) != 1 || h[0].Outcome != inbox.AttemptFailed || h[0].Cause != inbox.CauseHandlerFailed {
		t.Fatalf("history after attempt 1 = %+v", h)
	}
	if rows, _ := f.ledger(); rows != 0 {
		t.Fatal("the failed attempt's write was not rolled back")
	}

	f.clock.Advance(5*time.Second - time.Millisecond)
	if st := f.drain(p); st.Claimed != 0 {
		t.Fatalf("claimed before the backoff passed: %+v", st)
	}
	t1 := f.clock.Advance(time.Millisecond)
	if st := f.drain(p); st.Retried != 1 || st.Solo != 1 {
		t.Fatalf("second attempt = %+v", st)
	}
	if r := f.row(id); r.Attempts != 2 || r.FailedAttempts != 2 || !r.NextAttemptAt.Equal(t1.Add(10*time.Second)) {
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
	h := f.history(id)
	check(t, "after success", r, map[string]any{"Attempts": 3, "ProcessedAt": set})
	attempts(t, h, 3)
	check(t, "attempt 2", h[1], map[string]any{"Outcome": inbox.AttemptFailed})
	check(t, "attempt 3", h[2], map[string]any{"Outcome": inbox.AttemptHandled, "BatchSize": 1})
	var rows, attempt int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*), max(attempt) FROM ledger WHERE event_pk = $1`, id).Scan(&rows, &attempt); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || attempt != 3 {
		t.Fatalf("ledger: %d rows, attempt %d; want the third attempt's write alone", rows, attempt)
	}
	// The log lines carry the stable keys.
	warn := f.logs.lines(t, "will retry")
	if len(warn) != 2 {
		t.Fatalf("%d retry log lines, want 2: %v", len(warn), warn)
	}
	check(t, "first retry line", warn[0], map[string]any{"source": "ledger", "event_id": "evt_00001", "cause": "handler_failed",
		"attempt": 1, "retry_in": "5s"})
}

// TestAlwaysFailingEventIsDeadLetteredThenRequeued: after MaxAttempts the
// event leaves the drain for the dead letters with its payload, body and
// history; a requeue starts a new run, and the history keeps every
// attempt of both.
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
	p := f.processorOn(processor.Config{MaxAttempts: 4}, processor.Deps{Rand: func() float64 { return 0 }})

	st := f.drain(p)
	if st.Retried != 3 || st.DeadLettered != 1 || st.Handled != 0 {
		t.Fatalf("stats = %+v", st)
	}
	r := f.row(id)
	check(t, "dead event", r, map[string]any{"DeadAt": set, "ProcessedAt": unset, "Attempts": 4, "FailedAttempts": 4})
	dls, err := f.store.DeadLetterList(f.ctx, storage.DeadLetterFilter{Source: "billing"}, 10)
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters = %+v, %v", dls, err)
	}
	dl := dls[0]
	hist := dl.Errors
	check(t, "dead letter", dl, map[string]any{"EventPK": id, "EventID": "msg_poison", "Type": "invoice.created", "Attempts": 4,
		"Body": body, "DeadAt": f.clock.Now()})
	if !strings.Contains(string(dl.Payload), `"cus_1"`) || !strings.Contains(dl.LastError, "no account") {
		t.Fatalf("dead letter's payload %s, last error %q; want the customer, and the handler's error", dl.Payload, dl.LastError)
	}
	if len(hist) != 4 {
		t.Fatalf("the dead letter's history has %d attempts, want 4: %+v", len(hist), hist)
	}
	check(t, "dead letter's attempt 1", hist[0], map[string]any{"Cause": "handler_failed"})
	check(t, "dead letter's attempt 4", hist[3], map[string]any{"Attempt": 4})
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
	if n, err := f.store.DeadLetterRequeue(f.ctx, storage.DeadLetterFilter{ID: dl.ID}, storage.BulkOptions{Now: f.clock.Now(), By: operator}); err != nil || n.Done != 1 {
		t.Fatalf("requeue = %d, %v", n.Done, err)
	}
	r = f.row(id)
	check(t, "requeued event", r, map[string]any{"DeadAt": unset, "Attempts": 4, "FailedAttempts": 0, "Solo": true, "LastError": "",
		"NextAttemptAt": f.clock.Now()})
	if n, _ := f.store.DeadLetterRequeue(f.ctx, storage.DeadLetterFilter{ID: dl.ID}, storage.BulkOptions{Now: f.clock.Now(), By: operator}); n.Done != 0 {
		t.Fatal("a dead letter was requeued twice")
	}
	if st := f.drain(p); st.Handled != 1 || st.Solo != 1 {
		t.Fatalf("drain after requeue = %+v", st)
	}
	if rows, _ := f.ledger(); rows != 1 {
		t.Fatalf("ledger rows = %d", rows)
	}
	r, h := f.row(id), f.history(id)
	check(t, "processed after requeue", r, map[string]any{"Attempts": 5, "ProcessedAt": set})
	attempts(t, h, 5)
	check(t, "attempt 4", h[3], map[string]any{"Dead": true})
	check(t, "attempt 5", h[4], map[string]any{"Outcome": inbox.AttemptHandled})
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
	r, h := f.row(id), f.history(id)
	check(t, "row", r, map[string]any{"DeadAt": set, "Attempts": 1})
	attempts(t, h, 1)
	check(t, "attempt", h[0], map[string]any{"Cause": "permanent_error", "Dead": true})
	if !strings.Contains(h[0].Error, "bad payload") {
		t.Fatalf("attempt's error %q, want the handler's", h[0].Error)
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
	check(t, "stats", st, map[string]any{"Batches": 1, "Handled": 2, "Retried": 1, "Fallbacks": 0})
	if rows, events := f.ledger(); rows != 2 || events != 2 {
		t.Fatalf("ledger = %d rows / %d events, want the two neighbours", rows, events)
	}
	r, h := f.row(ids[1]), f.history(ids[1])
	check(t, "panicked event", r, map[string]any{"ProcessedAt": unset, "DeadAt": unset, "Attempts": 1})
	if !strings.Contains(r.LastError, "assignment to entry in nil map") || !r.NextAttemptAt.After(f.clock.Now()) {
		t.Fatalf("panicked event: last error %q, next attempt %s; want the panic, later than %s", r.LastError, r.NextAttemptAt, f.clock.Now())
	}
	attempts(t, h, 1)
	check(t, "attempt", h[0], map[string]any{"Cause": "handler_panic"})
	l := f.logs.lines(t, "panicked")
	if len(l) != 1 {
		t.Fatalf("%d panic log lines, want 1: %v", len(l), l)
	}
	check(t, "panic log", l[0], map[string]any{"event_id": "evt_00002"})
	if !strings.Contains(fmt.Sprint(l[0]["stack"]), "processor_test.go") {
		t.Fatalf("panic log's stack does not reach the handler: %v", l[0]["stack"])
	}
}

func TestUnhandledPolicies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy                   processor.UnhandledPolicy
		processed, dead, retried bool
		outcome                  inbox.Outcome
		attempt                  inbox.AttemptOutcome
		historyCause             inbox.Cause
	}{
		{policy: "", processed: true, outcome: inbox.OutcomeUnhandled, attempt: inbox.AttemptUnhandled},
		{policy: processor.UnhandledMark, processed: true, outcome: inbox.OutcomeUnhandled, attempt: inbox.AttemptUnhandled},
		{policy: processor.UnhandledRetry, retried: true, attempt: inbox.AttemptFailed, historyCause: "no_handler"},
		{policy: processor.UnhandledDeadLetter, dead: true, attempt: inbox.AttemptFailed, historyCause: "no_handler"},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.reg.HandleFunc(processor.Source("ledger"), "known", writeLedger)
			id := f.insert("ledger", "unknown", "evt_", 1)[0]
			st := f.drain(f.processor(processor.Config{Unhandled: tc.policy}))
			r, h := f.row(id), f.history(id)
			check(t, "row", r, map[string]any{"ProcessedAt": presence(tc.processed), "DeadAt": presence(tc.dead), "Attempts": 1})
			if (st.Retried == 1) != tc.retried {
				t.Fatalf("%d retried, want one: %t", st.Retried, tc.retried)
			}
			if tc.outcome != "" {
				check(t, "row", r, map[string]any{"Outcome": tc.outcome})
				check(t, "stats", st, map[string]any{"Unhandled": 1})
			}
			attempts(t, h, 1)
			check(t, "attempt", h[0], map[string]any{"Outcome": tc.attempt, "Cause": tc.historyCause, "Dead": tc.dead})
			if rows, _ := f.ledger(); rows != 0 {
				t.Fatal("a handler ran for an unhandled event")
			}
		})
	}
}

// TestHandlerCannotCommit: the handler's changes commit with the event's
// outcome or not at all, so the handler may not end the transaction
// itself; its own savepoints work.
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
	ids := f.insert("ledger", "t", "evt_", 2)
	if st := f.drain(f.processor(processor.Config{})); st.Handled != 2 {
		t.Fatalf("stats = %+v", st)
	}
	if n := f.count(`SELECT count(*) FROM ledger WHERE event_pk = ANY($1) AND note IS NULL`, ids); n != 2 {
		t.Fatalf("ledger = %d", n)
	}
	if n := f.count(`SELECT count(*) FROM ledger WHERE note = 'savepoint'`); n != 0 {
		t.Fatal("the rolled-back savepoint's write is there")
	}
}

// TestHandlerWithoutStatementsCostsNoSavepoint: a handler that does not
// use the transaction sends nothing for it; one that does gets one
// savepoint, taken before its first statement.
func TestHandlerWithoutStatementsCostsNoSavepoint(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	f := setupOn(t, newPool(t, url))
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		if ev.EventID == "evt_00002" {
			return writeLedger(ctx, tx, ev)
		}
		return nil
	})
	f.insert("ledger", "t", "evt_", 3)
	traced, savepoints := countingPool(t, url, func(sql string) bool {
		return strings.HasPrefix(strings.ToLower(sql), "savepoint")
	})
	if st := f.drain(f.processorOn(processor.Config{}, processor.Deps{Pool: traced})); st.Handled != 3 {
		t.Fatalf("stats = %+v", st)
	}
	if n := savepoints.Load(); n != 1 {
		t.Fatalf("%d savepoints for 3 handlers of which one used the transaction, want 1", n)
	}
	if rows, _ := f.ledger(); rows != 1 {
		t.Fatalf("ledger rows = %d", rows)
	}
}

// TestHandlerTimeout: a handler that outlives its time limit fails alone
// (cause handler_timeout); its statement is cancelled on the server, and
// its neighbours in the batch commit in the same transaction.
func TestHandlerTimeout(t *testing.T) {
	t.Parallel()
	f := setupOn(t, newPool(t, pgtest.URL(t))) // the Lambda's pool: statements cancelled with their context
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		if ev.EventID == "evt_00002" {
			_, err := tx.Exec(ctx, `SELECT pg_sleep(30)`) // cancelled at HandlerTimeout
			return err
		}
		return writeLedger(ctx, tx, ev)
	})
	ids := f.insert("ledger", "t", "evt_", 3)
	p := f.processor(processor.Config{HandlerTimeout: 100 * time.Millisecond, SafetyMargin: 5 * time.Second})
	if st := f.drain(p); st.Retried != 1 || st.Handled != 2 || st.Fallbacks != 0 {
		t.Fatalf("stats = %+v", st)
	}
	if h := f.history(ids[1]); len(h) != 1 || h[0].Cause != "handler_timeout" {
		t.Fatalf("history = %+v", h)
	}
	if rows, events := f.ledger(); rows != 2 || events != 2 {
		t.Fatalf("ledger = %d/%d, want the two neighbours", rows, events)
	}
}

// TestDeadProcessorsClaimIsRecovered: a processor that claimed a batch and
// died (its claim recorded, its transaction gone with its session) holds
// its events until its lease passes; then the next drain records the
// attempt that never finished for each, and runs each alone, once. None
// is dead-lettered for it, even with one attempt allowed: the culprit may
// have been any of them.
func TestDeadProcessorsClaimIsRecovered(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	ids := f.insert("ledger", "t", "evt_", 3)
	t0 := f.clock.Now()
	dead := storage.Claim{Processor: "dead/1", Token: "dead/1#7", EventIDs: ids, ClaimedAt: t0, LockedUntil: t0.Add(time.Minute)}
	if err := f.store.ClaimSet(f.ctx, dead); err != nil {
		t.Fatal(err)
	}
	if r := f.row(ids[0]); r.State(t0) != inbox.StateInFlight || r.ClaimedBy != "dead/1" {
		t.Fatalf("claimed event = %+v", r)
	}
	p := f.processor(processor.Config{MaxAttempts: 1})
	f.clock.Advance(time.Minute - time.Millisecond)
	if st := f.drain(p); st.Claimed != 0 || st.Interrupted != 0 {
		t.Fatalf("took events inside another's lease: %+v", st)
	}
	f.clock.Advance(time.Millisecond)
	st := f.drain(p)
	check(t, "stats", st, map[string]any{"Interrupted": 3, "Handled": 3, "Solo": 3, "DeadLettered": 0})
	for _, id := range ids {
		r, h := f.row(id), f.history(id)
		what := fmt.Sprint("event ", id)
		check(t, what, r, map[string]any{"Attempts": 2, "ProcessedAt": set, "Solo": true})
		attempts(t, h, 2)
		check(t, what+"'s attempt 1", h[0], map[string]any{"Outcome": inbox.AttemptInterrupted, "Cause": inbox.CauseLeaseExpired,
			"FinishedAt": unset, "StartedAt": t0, "Processor": "dead/1", "BatchSize": 3})
		check(t, what+"'s attempt 2", h[1], map[string]any{"Outcome": inbox.AttemptHandled})
	}
	if rows, events := f.ledger(); rows != 3 || events != 3 {
		t.Fatalf("ledger = %d/%d", rows, events)
	}
	f.noOpenClaims()
	// The operator sees that a processor died mid-claim, event by event.
	l := f.logs.lines(t, "never finished")
	if len(l) != 3 {
		t.Fatalf("%d interrupted attempt log lines, want 3: %v", len(l), l)
	}
	check(t, "interrupted attempt log", l[0], map[string]any{"cause": "lease_expired", "source": "ledger", "event_id": set})
}

// TestPoisonThatKillsItsProcessorAloneIsDeadLettered: an event whose
// processor died while it ran alone is charged the attempt, and moves to
// the dead letters once that spends MaxAttempts, without running again.
func TestPoisonThatKillsItsProcessorAloneIsDeadLettered(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ran := 0
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(context.Context, pgx.Tx, *processor.Event) error {
		ran++
		return nil
	})
	id := f.insert("ledger", "t", "evt_", 1)[0]
	const maxAttempts = 3
	p := f.processor(processor.Config{MaxAttempts: maxAttempts})
	for i := range maxAttempts {
		// A processor claims it alone, and dies; the next one to look
		// finds the claim past its lease.
		now := f.clock.Now()
		c := storage.Claim{Processor: "crash", Token: fmt.Sprint("crash#", i), EventIDs: []int64{id}, ClaimedAt: now, LockedUntil: now.Add(time.Minute)}
		if err := f.store.ClaimSet(f.ctx, c); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Minute)
		st, err := p.RecoverClaims(f.ctx)
		if err != nil || st.Interrupted != 1 || st.DeadLettered != min(1, i/(maxAttempts-1)) {
			t.Fatalf("recovery %d = %+v, %v", i+1, st, err)
		}
	}
	st := f.drain(p)
	r := f.row(id)
	if ran != 0 {
		t.Fatalf("the handler ran %d times", ran)
	}
	check(t, "stats", st, map[string]any{"Claimed": 0})
	check(t, "row", r, map[string]any{"DeadAt": set, "FailedAttempts": maxAttempts})
	if n := f.count(`SELECT count(*) FROM webhook_dead_letters WHERE event_pk = $1`, id); n != 1 {
		t.Fatalf("%d dead letters", n)
	}
	interrupted := 0
	for _, a := range f.history(id) {
		if a.Outcome == inbox.AttemptInterrupted {
			interrupted++
		}
	}
	if interrupted != maxAttempts {
		t.Fatalf("%d interrupted attempts in the history, want %d", interrupted, maxAttempts)
	}
}

// TestBacklogClaimsWithoutLookingEachTime: while claims come back full, the
// drain claims the next batch straight away; it asks whether anything is
// due (EventGetDue) only to start, and once a claim comes back short.
func TestBacklogClaimsWithoutLookingEachTime(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	f := setupOn(t, newPool(t, url))
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	f.insert("ledger", "t", "evt_", 50)
	traced, looks := countingPool(t, url, func(sql string) bool {
		return strings.Contains(sql, "name: EventGetDue")
	})
	st := f.drain(f.processorOn(processor.Config{BatchSize: 5}, processor.Deps{Pool: traced}))
	if st.Handled != 50 || st.Batches != 10 {
		t.Fatalf("stats = %+v, want 50 events handled in 10 batches", st)
	}
	if n := looks.Load(); n != 2 {
		t.Fatalf("%d looks for due events in a drain of 10 full batches, want 2 (the first, and after the empty claim)", n)
	}
	if rows, events := f.ledger(); rows != 50 || events != 50 {
		t.Fatalf("ledger = %d/%d", rows, events)
	}
}

// TestSoloEventRunsDuringABacklog: an event that must run alone, due while
// a backlog of batches is being worked, gets its turn within about a
// second of the processor's clock, not after the whole backlog.
func TestSoloEventRunsDuringABacklog(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var mu sync.Mutex
	var order []string
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		mu.Lock()
		order = append(order, ev.EventID)
		mu.Unlock()
		f.clock.Advance(300 * time.Millisecond) // each handler takes 0.3 s of the processor's clock
		return writeLedger(ctx, tx, ev)
	})
	f.insert("ledger", "t", "evt_", 50)
	// Due 2 s after the drain starts: after its first look.
	factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{Source: "ledger", EventID: "solo", Type: "t",
		State: inbox.StateRetrying, Now: f.clock.Now(), NextAttemptAt: f.clock.Now().Add(2 * time.Second)})
	st := f.drain(f.processor(processor.Config{BatchSize: 5}))
	if st.Handled != 51 || st.Solo != 1 {
		t.Fatalf("stats = %+v, want 51 handled, one of them alone", st)
	}
	at := slices.Index(order, "solo")
	// Batches take 1.5 s each: it is due during the second, and looked
	// for at its end.
	if at < 5 || at > 15 {
		t.Fatalf("the solo event ran %dth of 51 (%v), want right after the batch during which it fell due", at+1, order)
	}
}
