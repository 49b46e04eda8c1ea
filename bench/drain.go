package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// DrainFigure is the drain table: the processor, River and the bare limit,
// each working the same number of events on the same server.
type DrainFigure struct {
	Events    int     `json:"events"`
	Processor Measure `json:"processor"`
	River     Measure `json:"river"`
	Limit     Measure `json:"limit"`
	// RiverInsertPerSec is the median rate of River's InsertMany of the
	// jobs (not part of its drain time).
	RiverInsertPerSec float64 `json:"river_insert_per_sec"`
	// RatioRiver is processor/River and RatioLimit processor/limit, of the
	// median events per second; the min and max are over the runs taken
	// side by side.
	RatioRiver    float64 `json:"ratio_processor_river"`
	RatioRiverMin float64 `json:"ratio_processor_river_min"`
	RatioRiverMax float64 `json:"ratio_processor_river_max"`
	RatioLimit    float64 `json:"ratio_processor_limit"`
	RatioLimitMin float64 `json:"ratio_processor_limit_min"`
	RatioLimitMax float64 `json:"ratio_processor_limit_max"`
	// CPURatioRiver and CPURatioLimit compare the CPU per event of each
	// side (its Go process or pgbench, and Postgres), as IngestFigure's.
	CPURatioRiver float64 `json:"cpu_ratio_processor_river"`
	CPURatioLimit float64 `json:"cpu_ratio_processor_limit"`
}

// limitScript is the bare limit of a drain: one statement that claims a
// batch of due events with FOR UPDATE SKIP LOCKED over the drain's index,
// marks them processed and returns their payloads, which is the least
// database work a queue of these rows can do per event.
func limitScript(batch int) string {
	return fmt.Sprintf(`WITH due AS (
    SELECT id FROM webhook_events
     WHERE processed_at IS NULL AND dead_at IS NULL AND next_attempt_at <= now()
     ORDER BY next_attempt_at, id
     LIMIT %d
       FOR UPDATE SKIP LOCKED
)
UPDATE webhook_events e
   SET processed_at = now(), outcome = 'handled', attempts = e.attempts + 1
  FROM due
 WHERE e.id = due.id
RETURNING e.id, e.payload;
`, batch)
}

// drain measures the three drains in turns, then profiles the processor.
func (b *bench) drain(ctx context.Context) error {
	river, err := b.newRiverBench(ctx)
	if err != nil {
		return err
	}
	defer river.Close()
	n := b.s.DrainEvents
	fig := DrainFigure{Events: n}
	// Warm-up: a small drain of each (connections, statements, caches).
	warm := 5000 - 5000%b.s.BatchSize
	for _, step := range []func() error{
		func() error { return b.loadDrainEvents(ctx, warm) },
		func() error { _, err := b.processorDrain(ctx, warm, nil); return err },
		func() error { _, _, err := river.run(ctx, b, warm); return err },
		func() error { return b.loadDrainEvents(ctx, warm) },
		func() error { _, err := b.limitDrain(ctx, warm); return err },
	} {
		if err := step(); err != nil {
			return fmt.Errorf("drain warm-up: %w", err)
		}
	}
	var procRuns, riverRuns, limitRuns []Run
	var inserts []float64
	for i := range b.s.DrainRuns {
		if err := b.loadDrainEvents(ctx, n); err != nil {
			return err
		}
		r, err := b.processorDrain(ctx, n, nil)
		if err != nil {
			return fmt.Errorf("processor run %d: %w", i+1, err)
		}
		procRuns = append(procRuns, r)
		b.log.Info("drain", "system", "processor", "run", i+1, "events_per_sec", int(r.EventsPerSec))

		r, ins, err := river.run(ctx, b, n)
		if err != nil {
			return fmt.Errorf("River run %d: %w", i+1, err)
		}
		riverRuns, inserts = append(riverRuns, r), append(inserts, ins)
		b.log.Info("drain", "system", "river", "run", i+1, "events_per_sec", int(r.EventsPerSec))

		if err := b.loadDrainEvents(ctx, n); err != nil {
			return err
		}
		if r, err = b.limitDrain(ctx, n); err != nil {
			return fmt.Errorf("limit run %d: %w", i+1, err)
		}
		limitRuns = append(limitRuns, r)
		b.log.Info("drain", "system", "limit", "run", i+1, "events_per_sec", int(r.EventsPerSec))
	}
	fig.Processor, fig.River, fig.Limit = summarize(procRuns), summarize(riverRuns), summarize(limitRuns)
	fig.RiverInsertPerSec = median(inserts)
	fig.RatioRiver = ratio(fig.Processor.Median, fig.River.Median)
	fig.RatioLimit = ratio(fig.Processor.Median, fig.Limit.Median)
	for i := range procRuns {
		rr := ratio(procRuns[i].EventsPerSec, riverRuns[i].EventsPerSec)
		rl := ratio(procRuns[i].EventsPerSec, limitRuns[i].EventsPerSec)
		if i == 0 {
			fig.RatioRiverMin, fig.RatioLimitMin = rr, rl
		}
		fig.RatioRiverMin, fig.RatioRiverMax = min(fig.RatioRiverMin, rr), max(fig.RatioRiverMax, rr)
		fig.RatioLimitMin, fig.RatioLimitMax = min(fig.RatioLimitMin, rl), max(fig.RatioLimitMax, rl)
	}
	b.rep.Drain = &fig
	if err := b.profileDrain(ctx); err != nil {
		return err
	}
	n = min(b.s.DrainEvents, 20000)
	return b.whatIfs(ctx, n-n%b.s.BatchSize)
}

// loadDrainEvents empties the drain database and stores n due events with
// distinct 1 KiB bodies (COPY; not measured), then vacuums and analyzes, so
// that every drain starts from the same table.
func (b *bench) loadDrainEvents(ctx context.Context, n int) error {
	return b.loadEvents(ctx, n, false)
}

// loadEvents is loadDrainEvents; processed stores the events as processed
// a day ago instead of due, for the archiver.
func (b *bench) loadEvents(ctx context.Context, n int, processed bool) error {
	conn, err := pgx.Connect(ctx, b.env.URL(dbDrain))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", dbDrain, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `TRUNCATE webhook_events, webhook_dead_letters, webhook_payload_mismatches, webhook_archive_objects`); err != nil {
		return fmt.Errorf("empty %s: %w", dbDrain, err)
	}
	due := time.Now().Add(-time.Minute)
	var processedAt *time.Time
	var outcome *string
	if processed {
		at, handled := time.Now().Add(-24*time.Hour), string(inbox.OutcomeHandled)
		processedAt, outcome = &at, &handled
	}
	i := 0
	rows := pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		id := "evt_drain_" + strconv.Itoa(i)
		body := stripeBody(id, newRand(b.s.Seed, streamDrain+uint64(i)))
		sum := sha256.Sum256(body)
		i++
		return []any{sourceName, source.KindStripe, id, eventType, string(body), body, sum[:], len(body), due, due, processedAt, outcome}, nil
	})
	_, err = conn.CopyFrom(ctx, pgx.Identifier{"webhook_events"},
		[]string{"provider", "source_kind", "event_id", "event_type", "payload", "body", "body_sha256", "body_size",
			"created_at", "next_attempt_at", "processed_at", "outcome"}, rows)
	if err != nil {
		return fmt.Errorf("store %d drain events: %w", n, err)
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE webhook_events`); err != nil {
		return fmt.Errorf("vacuum %s: %w", dbDrain, err)
	}
	return nil
}

// noop is the drain's handler: it does nothing, so what is measured is the
// processor's own work (claim, attempt count, transaction, mark, commit).
func noop(context.Context, pgx.Tx, *processor.Event) error { return nil }

// processorDrain runs b.s.Processors processors at once, as as many
// concurrent Lambda invocations would, each with the Lambda's pool (two
// connections, the session timeouts) and the default settings, until
// every event is handled. tracer, when set, times every statement.
func (b *bench) processorDrain(ctx context.Context, n int, tracer *sqlTimer) (Run, error) {
	procs := make([]*processor.Processor, b.s.Processors)
	for i := range procs {
		pool, err := b.processorPool(ctx, tracer)
		if err != nil {
			return Run{}, err
		}
		defer pool.Close()
		if err := pool.Ping(ctx); err != nil {
			return Run{}, fmt.Errorf("connect processor %d: %w", i, err)
		}
		reg := processor.NewRegistry()
		reg.Fallback(processor.HandlerFunc(noop))
		if procs[i], err = processor.New(processor.Config{Pool: pool, Registry: reg, Name: "bench-" + strconv.Itoa(i)}); err != nil {
			return Run{}, err
		}
	}
	before := b.env.snapshot(ctx)
	start := time.Now()
	stats := make([]processor.Stats, len(procs))
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { stats[i], errs[i] = p.Drain(ctx) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	after := b.env.snapshot(ctx)
	if err := errors.Join(errs...); err != nil {
		return Run{}, err
	}
	handled := 0
	for _, st := range stats {
		handled += st.Handled
	}
	if handled != n {
		return Run{}, fmt.Errorf("processors handled %d events, want %d (%+v)", handled, n, stats)
	}
	r := Run{Events: n, Seconds: elapsed.Seconds(), EventsPerSec: float64(n) / elapsed.Seconds()}
	r.costs(before, after, 0)
	return r, nil
}

// processorPool opens a processor's pool as the Lambda does
// (functions/processor): two connections, the processor's session
// timeouts, cache_statement mode.
func (b *bench) processorPool(ctx context.Context, tracer *sqlTimer) (*pgxpool.Pool, error) {
	opts := storage.PoolConfig{
		URL: b.env.URL(dbDrain), ApplicationName: "bench-processor", MaxConns: 2, ConnectTimeout: 3 * time.Second,
		RuntimeParams: processor.SessionParams(processor.DefaultHandlerTimeout),
	}
	if tracer == nil {
		return opts.Open(ctx)
	}
	// storage.PoolConfig has no tracer option: the same settings by hand.
	cfg, err := pgxpool.ParseConfig(b.env.URL(dbDrain))
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = opts.MaxConns
	cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	cfg.ConnConfig.RuntimeParams["application_name"] = opts.ApplicationName
	for k, v := range opts.RuntimeParams {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open processor pool: %w", err)
	}
	return pool, nil
}

// limitDrain runs the limit script with as many clients as processors,
// enough transactions to claim every event, and checks they all were.
func (b *bench) limitDrain(ctx context.Context, n int) (Run, error) {
	perClient := (n + b.s.BatchSize*b.s.LimitClients - 1) / (b.s.BatchSize * b.s.LimitClients)
	before := b.env.snapshot(ctx)
	res, err := b.pgbench(ctx, pgbenchJob{
		Name: "limit", Script: limitScript(b.s.BatchSize), DB: dbDrain,
		Clients: b.s.LimitClients, Threads: b.s.PgbenchThreads, Transactions: perClient,
	})
	if err != nil {
		return Run{}, err
	}
	after := b.env.snapshot(ctx)
	conn, err := pgx.Connect(ctx, b.env.URL(dbDrain))
	if err != nil {
		return Run{}, err
	}
	defer conn.Close(ctx)
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE processed_at IS NULL`).Scan(&left); err != nil {
		return Run{}, fmt.Errorf("count unprocessed: %w", err)
	}
	if left != 0 {
		return Run{}, fmt.Errorf("limit left %d of %d events unprocessed", left, n)
	}
	r := Run{Events: n, Seconds: res.Seconds, EventsPerSec: float64(n) / res.Seconds}
	r.costs(before, after, res.CPU)
	return r, nil
}

// DrainProfile is the profiled processor drain: where its CPU and its
// time went.
type DrainProfile struct {
	Events       int     `json:"events"`
	Processors   int     `json:"processors"`
	EventsPerSec float64 `json:"events_per_sec"`
	// WallMsPerEvent is the time one processor spends per event (elapsed
	// time x processors / events), and Statements what it spends waiting
	// for each statement (round trip, server work, pgx), per event.
	WallMsPerEvent float64         `json:"wall_ms_per_event"`
	Statements     []StatementTime `json:"statements"`
	Run            Run             `json:"run"`
	Profile        CPUProfile      `json:"profile"`
}

// profileDrain drains a smaller table once more under the CPU profiler,
// with every statement timed. It is not one of the measured runs.
func (b *bench) profileDrain(ctx context.Context) error {
	n := min(b.s.DrainEvents, 30000)
	n -= n % b.s.BatchSize
	if err := b.loadDrainEvents(ctx, n); err != nil {
		return err
	}
	tracer := newSQLTimer()
	var r Run
	prof, err := b.cpuProfile("drain", func() error {
		var err error
		r, err = b.processorDrain(ctx, n, tracer)
		return err
	})
	if err != nil {
		return fmt.Errorf("profiled drain: %w", err)
	}
	b.rep.DrainProfile = &DrainProfile{
		Events: n, Processors: b.s.Processors, EventsPerSec: r.EventsPerSec,
		WallMsPerEvent: r.Seconds * float64(b.s.Processors) / float64(n) * 1000,
		Statements:     tracer.perEvent(n), Run: r, Profile: prof,
	}
	return nil
}
