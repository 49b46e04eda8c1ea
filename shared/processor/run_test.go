package processor_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

type runResult struct {
	st  processor.Stats
	err error
}

// start runs p.Run(ctx, until) in the background.
func start(ctx context.Context, p *processor.Processor, until time.Time) <-chan runResult {
	done := make(chan runResult, 1)
	go func() {
		st, err := p.Run(ctx, until)
		done <- runResult{st, err}
	}()
	return done
}

// runBound bounds how long a test waits for Run to ask for a wait or to
// return: what it waits for is a few queries away.
const runBound = 30 * time.Second

// next returns the next wait Run asks for; Run returning instead fails
// the test.
func (w waits) next(t *testing.T, done <-chan runResult) wait {
	t.Helper()
	select {
	case got := <-w:
		return got
	case res := <-done:
		t.Fatalf("Run returned instead of waiting: %+v, %v", res.st, res.err)
	case <-time.After(runBound):
		t.Fatal("Run neither waited nor returned")
	}
	panic("unreachable")
}

// result returns what Run returned; another wait asked for fails the test.
func result(t *testing.T, w waits, done <-chan runResult) runResult {
	t.Helper()
	select {
	case res := <-done:
		return res
	case got := <-w:
		t.Fatalf("Run waited %s more instead of returning", got.d)
	case <-time.After(runBound):
		t.Fatal("Run did not return")
	}
	panic("unreachable")
}

// TestRunHandlesAnEventStoredWhileItWaits: an event stored after Run
// started, while it waits out its poll interval, has its handler started
// by the drain that follows that one wait; when until passes Run returns
// with one metrics line for the whole run.
func TestRunHandlesAnEventStoredWhileItWaits(t *testing.T) {
	t.Parallel()
	f := setup(t)
	started := make(chan int64, 1)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		started <- ev.ID
		return writeLedger(ctx, tx, ev)
	})
	w := f.clock.takeWaits()
	p := f.processor(processor.Config{PollInterval: 150 * time.Millisecond})
	done := start(f.ctx, p, f.clock.Now().Add(time.Minute))

	first := w.next(t, done) // the first drain found nothing
	if first.d != 150*time.Millisecond {
		t.Fatalf("Run waits %s, want the poll interval", first.d)
	}
	id := f.insert("ledger", "t", "late_", 1)[0]
	first.done()
	second := w.next(t, done) // the next drain is over
	select {
	case got := <-started:
		if got != id {
			t.Fatalf("handler started for event %d, want %d", got, id)
		}
	default:
		t.Fatal("the drain after one poll interval did not start the event's handler")
	}
	if rows, _ := f.ledger(); rows != 1 {
		t.Fatalf("%d ledger rows", rows)
	}

	// until passes during the wait: Run drains a last time (whatever was
	// stored during its last wait is its to handle) and returns.
	f.clock.Advance(time.Minute)
	second.done()
	res := result(t, w, done)
	if res.err != nil {
		t.Fatal(res.err)
	}
	check(t, "Run's stats", res.st, map[string]any{"Handled": 1, "Stopped": processor.StopDrained})
	if len(res.st.Latencies) != 1 {
		t.Fatalf("%d latencies, want the event's", len(res.st.Latencies))
	}
	lines := f.runMetricLines(t)
	if len(lines) != 1 || len(f.metricLines(t)) != 0 {
		t.Fatalf("%d run metrics lines and %d drain metrics lines, want one run line", len(lines), len(f.metricLines(t)))
	}
	l := lines[0]
	check(t, "line", l, map[string]any{"drains": 3, processor.MetricProcessed: 1, processor.MetricDrainFailed: 0,
		processor.MetricDeadLettersOpen: 0, processor.MetricBacklogCount: 0})
	// The fixture's clock runs a minute ahead of the server's now(), which
	// stored the event.
	if ms, ok := l[processor.MetricLatencyP99].(float64); !ok || ms < 55_000 || ms > 120_000 || l[processor.MetricLatencyP50] != ms {
		t.Fatalf("latency p50 %v, p99 %v ms; want one sample of about 60000", l[processor.MetricLatencyP50], l[processor.MetricLatencyP99])
	}
}

// TestRunNeverWaitsPastUntil: the last wait is cut to what is left before
// until, so a run ends on time whatever its poll interval.
func TestRunNeverWaitsPastUntil(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := f.clock.takeWaits()
	p := f.processor(processor.Config{PollInterval: 10 * time.Second})
	done := start(f.ctx, p, f.clock.Now().Add(25*time.Second))
	for _, want := range []time.Duration{10 * time.Second, 10 * time.Second, 5 * time.Second} {
		got := w.next(t, done)
		if got.d != want {
			t.Fatalf("wait %s, want %s", got.d, want)
		}
		f.clock.Advance(got.d)
		got.done()
	}
	if res := result(t, w, done); res.err != nil || res.st.Stopped != processor.StopDrained {
		t.Fatalf("Run = %+v, %v", res.st, res.err)
	}
}

// TestRunWithUntilPassedDrainsOnce: a run whose until has passed is one
// drain, backlog and all, and never waits.
func TestRunWithUntilPassedDrainsOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	f.insert("ledger", "t", "evt_", 30)
	w := f.clock.takeWaits()
	p := f.processor(processor.Config{BatchSize: 7})
	res := result(t, w, start(f.ctx, p, time.Time{}))
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.st.Handled != 30 || res.st.Batches != 5 || res.st.Stopped != processor.StopDrained {
		t.Fatalf("Run: handled %d in %d batches, stopped %q; want 30 in 5, %q", res.st.Handled, res.st.Batches, res.st.Stopped, processor.StopDrained)
	}
}

// TestRunGoesOnWithABacklogPastUntil: until ends the polling, not a drain
// that still finds events due.
func TestRunGoesOnWithABacklogPastUntil(t *testing.T) {
	t.Parallel()
	f := setup(t)
	until := f.clock.Now().Add(time.Second)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		f.clock.Advance(time.Second) // each event takes a second: until passes at the first
		return writeLedger(ctx, tx, ev)
	})
	f.insert("ledger", "t", "evt_", 10)
	p := f.processor(processor.Config{BatchSize: 3})
	st, err := p.Run(f.ctx, until)
	if err != nil || st.Handled != 10 || st.Stopped != processor.StopDrained {
		t.Fatalf("Run = %+v, %v", st, err)
	}
}

// TestRunStopsAtTheDeadlineMargin: a run under a deadline (the Lambda's)
// stops polling once less than SafetyMargin is left, before the deadline
// itself, without waiting into the margin.
func TestRunStopsAtTheDeadlineMargin(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// The deadline is on the wall clock, and so are the waits it cuts.
	p := f.processorOn(processor.Config{HandlerTimeout: 5 * time.Second, SafetyMargin: 10 * time.Second, PollInterval: 50 * time.Millisecond},
		processor.Deps{Clock: wallClock{}})
	ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second+200*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	st, err := p.Run(ctx, f.clock.Now().Add(time.Hour))
	if err != nil || st.Stopped != processor.StopDeadline || ctx.Err() != nil {
		t.Fatalf("Run = %+v, %v (ctx: %v)", st, err, ctx.Err())
	}
	// It polled until the margin, not a poll interval into it.
	if left := time.Until(deadline); left > 10*time.Second || left < 9*time.Second {
		t.Fatalf("Run returned %s before the deadline, want just under the 10s margin", left)
	}
	if l := f.runMetricLines(t); len(l) != 1 || l[0]["drains"].(float64) < 2 || l[0]["stats"].(map[string]any)["stopped"] != "deadline" {
		t.Fatalf("metrics lines = %v", l)
	}
}

// TestRunStopsWhenCancelled: cancelled while it waits, Run returns at once
// with ctx's error, and still logs its line; cancelled before it starts,
// it claims nothing.
func TestRunStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := f.clock.takeWaits()
	p := f.processor(processor.Config{})
	ctx, cancel := context.WithCancel(f.ctx)
	done := start(ctx, p, f.clock.Now().Add(time.Hour))
	w.next(t, done) // never ended: the cancellation must end it
	cancel()
	res := result(t, w, done)
	if !errors.Is(res.err, context.Canceled) || res.st.Stopped != processor.StopCancelled {
		t.Fatalf("Run = %+v, %v", res.st, res.err)
	}
	if l := f.runMetricLines(t); len(l) != 1 || l[0]["err"] == nil {
		t.Fatalf("metrics lines = %v", l)
	}

	f.insert("ledger", "t", "evt_", 1)
	st, err := p.Run(ctx, f.clock.Now().Add(time.Hour))
	if !errors.Is(err, context.Canceled) || st.Claimed != 0 || st.Stopped != processor.StopCancelled {
		t.Fatalf("cancelled Run = %+v, %v", st, err)
	}
}

// TestRunPollsOnWhileTheDatabaseFails: a drain the database fails does not
// end the run: Run waits longer after each failure, up to a cap, and
// returns the failure only at until, with a line that counts every failed
// drain.
func TestRunPollsOnWhileTheDatabaseFails(t *testing.T) {
	t.Parallel()
	f := setup(t)
	pool := newPool(t, pgtest.URL(t))
	pool.Close() // every query fails
	w := f.clock.takeWaits()
	p := f.processorOn(processor.Config{PollInterval: 200 * time.Millisecond}, processor.Deps{Pool: pool})
	done := start(f.ctx, p, f.clock.Now().Add(time.Minute))
	var got []time.Duration
	for range 7 {
		next := w.next(t, done)
		got = append(got, next.d)
		if len(got) == 7 {
			f.clock.Advance(time.Minute) // until passes during the last wait
		}
		next.done()
	}
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond,
		3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("waits = %v, want %v", got, want)
	}
	res := result(t, w, done)
	if res.err == nil || res.st.Stopped != processor.StopError {
		t.Fatalf("Run = %+v, %v; want the database's error at until", res.st, res.err)
	}
	if n := len(f.logs.lines(t, "processor: drain failed; polling again")); n != 7 {
		t.Errorf("%d lines saying the run polls again, want 7 (one per wait)", n)
	}
	l := f.runMetricLines(t)
	if len(l) != 1 {
		t.Fatalf("%d run metrics lines, want 1: %v", len(l), l)
	}
	check(t, "run metrics line", l[0], map[string]any{processor.MetricDrainFailed: 8, "drains": 8, "err": set})
}

// TestRunSurvivesADatabaseOutage kills the database under a running Run:
// it handles an event before the outage, polls through it, and handles
// one stored after the restart, each exactly once, in the same run.
func TestRunSurvivesADatabaseOutage(t *testing.T) {
	tier.Heavy(t, "a database outage")
	t.Parallel()
	cluster := pgtest.Cluster(t)
	url := pgtest.MigratedURL(t, cluster)
	pool := newPool(t, url)
	f := setupOn(t, pool)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	p := f.processorOn(processor.Config{PollInterval: 50 * time.Millisecond}, processor.Deps{Clock: wallClock{}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := start(ctx, p, time.Now().Add(10*time.Minute))
	handled := func(n int) func() (bool, string) {
		return func() (bool, string) {
			var rows int
			_ = pool.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&rows)
			return rows >= n, fmt.Sprintf("%d of %d events handled", rows, n)
		}
	}

	f.insert("ledger", "t", "before_", 1)
	poll.Until(t, runBound, handled(1))
	if err := cluster.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, runBound, func() (bool, string) {
		n := len(f.logs.lines(t, "processor: drain failed; polling again"))
		return n >= 2, fmt.Sprintf("%d failed drains logged", n)
	})
	if err := cluster.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Stored once the server is back; the run, still polling, finds it.
	poll.Until(t, runBound, func() (bool, string) {
		_, err := f.store.EventInsert(ctx, storage.EventInsertParams{Source: "ledger", EventID: "after_1", EventType: "t", Body: []byte(`{}`)})
		return err == nil, fmt.Sprint("insert after the restart: ", err)
	})
	poll.Until(t, runBound, handled(2))
	select {
	case res := <-done:
		t.Fatalf("Run ended during or after the outage: %+v, %v", res.st, res.err)
	default:
	}
	cancel()
	res := <-done
	if !errors.Is(res.err, context.Canceled) || res.st.Handled != 2 {
		t.Fatalf("Run = %+v, %v", res.st, res.err)
	}
	if rows, events := f.ledger(); rows != 2 || events != 2 {
		t.Fatalf("ledger: %d rows for %d events", rows, events)
	}
	if l := f.runMetricLines(t); len(l) != 1 || l[0][processor.MetricDrainFailed].(float64) < 2 {
		t.Fatalf("metrics lines = %v", l)
	}
}

// TestRunInRealTime: with the default poll interval and the wall clock,
// events stored one after another while a run polls are each handled
// within a second of their storing (the processor's promise of real time), by the same run.
// The figures are logged; make bench measures them properly.
func TestRunInRealTime(t *testing.T) {
	tier.Heavy(t, "real time: ten events stored one after another, each waiting for a poll on the wall clock")
	t.Parallel()
	f := setup(t)
	var mu sync.Mutex
	startedAt := map[int64]time.Time{}
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		mu.Lock()
		startedAt[ev.ID] = time.Now()
		mu.Unlock()
		return writeLedger(ctx, tx, ev)
	})
	p := f.processorOn(processor.Config{}, processor.Deps{Clock: wallClock{}})
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	done := start(ctx, p, time.Now().Add(10*time.Minute))
	var latencies []time.Duration
	for i := range 10 {
		stored := time.Now()
		id := f.insert("ledger", "t", fmt.Sprintf("rt%02d_", i), 1)[0]
		poll.Until(t, runBound, func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			at, ok := startedAt[id]
			if ok {
				latencies = append(latencies, at.Sub(stored))
			}
			return ok, fmt.Sprintf("event %d not started", id)
		})
	}
	cancel()
	if res := <-done; res.st.Handled != 10 {
		t.Fatalf("Run = %+v, %v", res.st, res.err)
	}
	slices.Sort(latencies)
	t.Logf("store to handler start, poll interval %s: median %s, max %s", processor.DefaultPollInterval, latencies[len(latencies)/2], latencies[len(latencies)-1])
	if worst := latencies[len(latencies)-1]; worst > time.Second {
		t.Errorf("an event waited %s for its handler, want under a second", worst)
	}
}

// TestLatencyPercentiles: p50 and p99 by nearest rank over the run's
// events, unhandled ones included, from their receipt to their processing
// on the processor's clock.
func TestLatencyPercentiles(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := f.clock.Now()
	for i := 1; i <= 100; i++ {
		at := now.Add(-time.Duration(i) * time.Second)
		factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "ledger", Type: "nobody.handles", Now: at, CreatedAt: at})
	}
	p := f.processor(processor.Config{})
	if st, err := p.Run(f.ctx, time.Time{}); err != nil || st.Unhandled != 100 {
		t.Fatalf("Run = %+v, %v", st, err)
	}
	l := f.runMetricLines(t)[0]
	if l[processor.MetricLatencyP50] != 50_000.0 || l[processor.MetricLatencyP99] != 99_000.0 {
		t.Fatalf("p50 = %v ms, p99 = %v ms; want 50000 and 99000", l[processor.MetricLatencyP50], l[processor.MetricLatencyP99])
	}
	// A run that processed nothing reports no latency rather than a zero.
	if _, err := p.Run(f.ctx, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if l := f.runMetricLines(t)[1]; l[processor.MetricLatencyP50] != nil || l[processor.MetricLatencyP99] != nil || l[processor.MetricBacklogCount] != 0.0 {
		t.Fatalf("idle line = %v", l)
	}
}

// TestInvocation: a woken invocation runs until RunFor from its start,
// or, with RunFor 0, drains once, each with its own kind of line.
func TestInvocation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	f.insert("ledger", "t", "evt_", 2)
	st, err := f.processor(processor.Config{}).Invocation(f.ctx)
	if err != nil || st.Handled != 2 {
		t.Fatalf("RunFor 0: handled %d, %v; want 2", st.Handled, err)
	}
	if d, r := len(f.metricLines(t)), len(f.runMetricLines(t)); d != 1 || r != 0 {
		t.Fatalf("RunFor 0: %d drain and %d run metrics lines, want one drain line", d, r)
	}

	w := f.clock.takeWaits()
	p := f.processor(processor.Config{RunFor: 70 * time.Second})
	f.insert("ledger", "t", "late_", 1)
	done := make(chan runResult, 1)
	go func() {
		st, err := p.Invocation(f.ctx)
		done <- runResult{st, err}
	}()
	next := w.next(t, done)
	if next.d != processor.DefaultPollInterval {
		t.Fatalf("wait %s", next.d)
	}
	f.clock.Advance(70 * time.Second)
	next.done()
	if res := result(t, w, done); res.err != nil || res.st.Handled != 1 {
		t.Fatalf("RunFor 70s: handled %d, %v; want 1", res.st.Handled, res.err)
	}
	if d, r := len(f.metricLines(t)), len(f.runMetricLines(t)); d != 1 || r != 1 {
		t.Fatalf("RunFor 70s: %d drain and %d run metrics lines in all, want one each", d, r)
	}
}
