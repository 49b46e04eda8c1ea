package processor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	p := f.processor(processor.Config{BatchSize: 25, Name: "proc"})

	st := f.drain(p)
	if st.Claimed != 60 || st.Handled != 60 || st.Batches != 3 || st.Solo != 0 || st.Fallbacks != 0 || st.Stopped != processor.StopDrained {
		t.Fatalf("stats = %+v", st)
	}
	if rows, events := f.ledger(); rows != 60 || events != 60 {
		t.Fatalf("ledger rows = %d for %d events, want 60 and 60", rows, events)
	}
	r := f.row(ids[0])
	if r.ProcessedAt == nil || !r.ProcessedAt.Equal(f.clock.Now()) || r.Outcome != inbox.OutcomeHandled ||
		r.Attempts != 1 || r.FailedAttempts != 0 || r.Solo || r.ClaimedUntil != nil || r.LastAttemptAt == nil {
		t.Fatalf("processed row = %+v", r)
	}
	// One row per attempt: this one, handled in a batch of 25.
	h := f.history(ids[0])
	if len(h) != 1 || h[0].Number != 1 || h[0].Outcome != inbox.AttemptHandled || h[0].BatchSize != 25 ||
		!strings.HasPrefix(h[0].Processor, "proc/") || h[0].FinishedAt == nil || h[0].Dead {
		t.Fatalf("history = %+v", h)
	}
	// Nothing is due any more, and no claim holds anything.
	if st := f.drain(p); st.Claimed != 0 || st.Stopped != processor.StopDrained {
		t.Fatalf("second drain = %+v", st)
	}
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
			p := f.processor(processor.Config{BatchSize: 25, MaxAttempts: 3, Rand: func() float64 { return 0 }})
			st := f.drain(p)
			if st.Handled != 24 || st.DeadLettered != 1 || st.Retried != 2 || (st.Fallbacks > 0) != tc.fallback {
				t.Fatalf("stats = %+v", st)
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
					if r.DeadAt == nil || r.Attempts != 3 || r.FailedAttempts != 3 || !r.Solo || len(h) != 3 ||
						h[0].BatchSize != batch || h[1].BatchSize != 1 || !h[2].Dead || h[2].Cause != tc.cause {
						t.Fatalf("poison: %+v, history %+v", r, h)
					}
					continue
				}
				if r.ProcessedAt == nil || r.Attempts != 1 || r.FailedAttempts != 0 || r.Solo || len(h) != 1 || h[0].Outcome != inbox.AttemptHandled ||
					h[0].BatchSize != batch {
					t.Fatalf("neighbour %d: %+v, history %+v", i+1, r, h)
				}
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
	if r.Attempts != 1 || r.FailedAttempts != 1 || !r.Solo || !r.NextAttemptAt.Equal(t0.Add(5*time.Second)) || r.ProcessedAt != nil ||
		!strings.Contains(r.LastError, "downstream unavailable (attempt 1)") || !r.LastAttemptAt.Equal(t0) {
		t.Fatalf("after attempt 1: %+v", r)
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
	if r.Attempts != 3 || r.ProcessedAt == nil || len(h) != 3 || h[1].Outcome != inbox.AttemptFailed || h[2].Outcome != inbox.AttemptHandled ||
		h[2].BatchSize != 1 {
		t.Fatalf("after success: %+v, history %+v", r, h)
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
	p := f.processor(processor.Config{MaxAttempts: 4, Rand: func() float64 { return 0 }})

	st := f.drain(p)
	if st.Retried != 3 || st.DeadLettered != 1 || st.Handled != 0 {
		t.Fatalf("stats = %+v", st)
	}
	r := f.row(id)
	if r.DeadAt == nil || r.ProcessedAt != nil || r.Attempts != 4 || r.FailedAttempts != 4 {
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
	if n, err := f.store.DeadLetterRequeue(f.ctx, storage.DeadLetterFilter{ID: dl.ID}, f.clock.Now(), operator); err != nil || n != 1 {
		t.Fatalf("requeue = %d, %v", n, err)
	}
	r = f.row(id)
	if r.DeadAt != nil || r.Attempts != 4 || r.FailedAttempts != 0 || !r.Solo || r.LastError != "" || !r.NextAttemptAt.Equal(f.clock.Now()) {
		t.Fatalf("requeued event = %+v", r)
	}
	if n, _ := f.store.DeadLetterRequeue(f.ctx, storage.DeadLetterFilter{ID: dl.ID}, f.clock.Now(), operator); n != 0 {
		t.Fatal("a dead letter was requeued twice")
	}
	if st := f.drain(p); st.Handled != 1 || st.Solo != 1 {
		t.Fatalf("drain after requeue = %+v", st)
	}
	if rows, _ := f.ledger(); rows != 1 {
		t.Fatalf("ledger rows = %d", rows)
	}
	r, h := f.row(id), f.history(id)
	if r.Attempts != 5 || r.ProcessedAt == nil || len(h) != 5 || !h[3].Dead || h[4].Outcome != inbox.AttemptHandled {
		t.Fatalf("processed after requeue: %+v, history %+v", r, h)
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
	r, h := f.row(id), f.history(id)
	if r.DeadAt == nil || r.Attempts != 1 || len(h) != 1 || h[0].Cause != "permanent_error" || !h[0].Dead ||
		!strings.Contains(h[0].Error, "bad payload") {
		t.Fatalf("row = %+v, history %+v", r, h)
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
	if st.Batches != 1 || st.Handled != 2 || st.Retried != 1 || st.Fallbacks != 0 {
		t.Fatalf("stats = %+v", st)
	}
	if rows, events := f.ledger(); rows != 2 || events != 2 {
		t.Fatalf("ledger = %d rows / %d events, want the two neighbours", rows, events)
	}
	r, h := f.row(ids[1]), f.history(ids[1])
	if r.ProcessedAt != nil || r.DeadAt != nil || r.Attempts != 1 || len(h) != 1 ||
		h[0].Cause != "handler_panic" || !strings.Contains(r.LastError, "assignment to entry in nil map") ||
		!r.NextAttemptAt.After(f.clock.Now()) {
		t.Fatalf("panicked event = %+v, history %+v", r, h)
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
			if (r.ProcessedAt != nil) != tc.processed || (r.DeadAt != nil) != tc.dead || (st.Retried == 1) != tc.retried || r.Attempts != 1 {
				t.Fatalf("stats %+v, row %+v", st, r)
			}
			if tc.outcome != "" && (r.Outcome != tc.outcome || st.Unhandled != 1) {
				t.Fatalf("outcome = %v, stats %+v", r.Outcome, st)
			}
			if len(h) != 1 || h[0].Outcome != tc.attempt || h[0].Cause != tc.historyCause || h[0].Dead != tc.dead {
				t.Fatalf("history = %+v", h)
			}
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
	if st := f.drain(f.processor(processor.Config{Pool: traced})); st.Handled != 3 {
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
	if st.Interrupted != 3 || st.Handled != 3 || st.Solo != 3 || st.DeadLettered != 0 {
		t.Fatalf("stats = %+v", st)
	}
	for _, id := range ids {
		r, h := f.row(id), f.history(id)
		if r.Attempts != 2 || r.ProcessedAt == nil || !r.Solo || len(h) != 2 ||
			h[0].Outcome != inbox.AttemptInterrupted || h[0].Cause != inbox.CauseLeaseExpired || h[0].FinishedAt != nil ||
			!h[0].StartedAt.Equal(t0) || h[0].Processor != "dead/1" || h[0].BatchSize != 3 || h[1].Outcome != inbox.AttemptHandled {
			t.Fatalf("event %d: %+v, history %+v", id, r, h)
		}
	}
	if rows, events := f.ledger(); rows != 3 || events != 3 {
		t.Fatalf("ledger = %d/%d", rows, events)
	}
	f.noOpenClaims()
	// The operator sees that a processor died mid-claim, event by event.
	if l := f.logs.lines(t, "never finished"); len(l) != 3 || l[0]["cause"] != "lease_expired" || l[0]["source"] != "ledger" || l[0]["event_id"] == nil {
		t.Fatalf("interrupted attempt logs = %v", l)
	}
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
	if st.Claimed != 0 || ran != 0 || r.DeadAt == nil || r.FailedAttempts != maxAttempts {
		t.Fatalf("stats = %+v, handler ran %d times, row %+v", st, ran, r)
	}
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
	st := f.drain(f.processor(processor.Config{Pool: traced, BatchSize: 5}))
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
