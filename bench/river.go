package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River's own settings for throughput, from its benchmark (`river bench`,
// cmd/river/riverbench): a 2 ms fetch cooldown, a 20 ms poll interval,
// 2 000 workers on the queue, jobs inserted with InsertMany in batches of
// 5 000, and a pgxpool with pgx's default size.
const (
	riverFetchCooldown     = 2 * time.Millisecond
	riverFetchPollInterval = 20 * time.Millisecond
	riverMaxWorkers        = 2000
	riverInsertBatch       = 5000
)

// noopArgs is the job of the River drain.
type noopArgs struct {
	N int `json:"n"`
}

// Kind implements river.JobArgs.
func (noopArgs) Kind() string { return "bench_noop" }

// noopWorker does nothing, as the processor's handler in the drain.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

// Work implements river.Worker.
func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// riverBench is River on its own database of a bench cluster.
type riverBench struct {
	pool *pgxpool.Pool
	t    target
	// keep leaves the jobs of earlier runs in river_job (the history
	// stage) instead of emptying it before each run.
	keep bool
}

// newRiverBench connects and applies River's migrations (rivermigrate).
func (b *bench) newRiverBench(ctx context.Context, t target) (*riverBench, error) {
	pool, err := pgxpool.New(ctx, t.URL())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", t.db, err)
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("River migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		pool.Close()
		return nil, fmt.Errorf("River migrations: %w", err)
	}
	b.rep.Settings.RiverPoolConns = pool.Config().MaxConns // shown on the page
	return &riverBench{pool: pool, t: t}, nil
}

// Close closes the pool.
func (rb *riverBench) Close() { rb.pool.Close() }

// run empties river_job (TRUNCATE and VACUUM FULL, as River's benchmark
// does) unless rb.keep, inserts n jobs with InsertMany, then starts a
// client and times it from Start until the n-th job is completed, counted
// from River's own completion events. It returns the run and the insert
// rate.
func (rb *riverBench) run(ctx context.Context, n int) (Run, float64, error) {
	if !rb.keep {
		for _, q := range []string{`TRUNCATE river_job`, `VACUUM FULL river_job`} {
			if _, err := rb.pool.Exec(ctx, q); err != nil {
				return Run{}, 0, fmt.Errorf("%s: %w", q, err)
			}
		}
	}
	var lastID int64
	if err := rb.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM river_job`).Scan(&lastID); err != nil {
		return Run{}, 0, fmt.Errorf("read river_job: %w", err)
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &noopWorker{}); err != nil {
		return Run{}, 0, err
	}
	retention := time.Duration(0) // River's default: completed jobs are deleted after a day
	if rb.keep {
		retention = -1 // kept, as webhook-inbox keeps its events
	}
	client, err := river.NewClient(riverpgxv5.New(rb.pool), &river.Config{
		CompletedJobRetentionPeriod: retention,
		FetchCooldown:               riverFetchCooldown,
		FetchPollInterval:           riverFetchPollInterval,
		Queues:                      map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: riverMaxWorkers}},
		Workers:                     workers,
		Logger:                      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return Run{}, 0, fmt.Errorf("River client: %w", err)
	}

	insertStart := time.Now()
	params := make([]river.InsertManyParams, 0, riverInsertBatch)
	for i := 0; i < n; i += riverInsertBatch {
		params = params[:0]
		for j := i; j < min(n, i+riverInsertBatch); j++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{N: j}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return Run{}, 0, fmt.Errorf("River InsertMany: %w", err)
		}
	}
	insertRate := float64(n) / time.Since(insertStart).Seconds()
	for _, q := range []string{`VACUUM ANALYZE river_job`, `CHECKPOINT`} {
		if _, err := rb.pool.Exec(ctx, q); err != nil {
			return Run{}, 0, fmt.Errorf("%s: %w", q, err)
		}
	}

	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n + 1000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancel()
	runCtx, stop := context.WithTimeout(ctx, 10*time.Minute)
	defer stop()
	heap := sampleHeap()
	before := rb.t.snapshot(ctx)
	start := time.Now()
	if err := client.Start(runCtx); err != nil {
		heap.Stop()
		return Run{}, 0, fmt.Errorf("River start: %w", err)
	}
	done := 0
	var last time.Time
	var runErr error
	for done < n && runErr == nil {
		select {
		case ev := <-events:
			switch {
			case ev == nil:
				runErr = fmt.Errorf("River subscription closed after %d jobs", done)
			case ev.Kind != river.EventKindJobCompleted:
				runErr = fmt.Errorf("River job %d: %s", ev.Job.ID, ev.Kind)
			default:
				done++
				last = time.Now()
			}
		case <-runCtx.Done():
			runErr = fmt.Errorf("River worked %d of %d jobs: %w", done, n, runCtx.Err())
		}
	}
	after := rb.t.snapshot(ctx)
	use := heap.Stop()
	stopCtx, stopCancel := context.WithTimeout(ctx, 30*time.Second)
	defer stopCancel()
	if err := client.Stop(stopCtx); err != nil && runErr == nil {
		runErr = fmt.Errorf("River stop: %w", err)
	}
	if runErr != nil {
		return Run{}, 0, runErr
	}
	var completed int
	if err := rb.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed' AND id > $1`, lastID).Scan(&completed); err != nil {
		return Run{}, 0, fmt.Errorf("count completed jobs: %w", err)
	}
	if completed != n {
		return Run{}, 0, fmt.Errorf("River completed %d jobs in the table, want %d", completed, n)
	}
	elapsed := last.Sub(start)
	r := Run{Events: n, Seconds: elapsed.Seconds(), EventsPerSec: float64(n) / elapsed.Seconds(), Heap: &use}
	r.costs(before, after, 0)
	return r, insertRate, nil
}
