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
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// DrainFigure is the drain table of one cluster: the processor, River and
// the bare limit, each working the same number of events on the same
// server.
type DrainFigure struct {
	// Cluster is clusterFast or clusterDurable.
	Cluster   string  `json:"cluster"`
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
// marks them processed and returns their bodies (what a handler is given),
// which is the least database work a queue of these rows can do per event.
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
RETURNING e.id, e.body;
`, batch)
}

// drainSide is one place a drain runs (a cluster, or a database with a
// history): its events' database, River beside it (nil: none), and the
// runs so far.
type drainSide struct {
	events target
	river  *riverBench
	// keep adds each run's events to the table (the history) instead of
	// emptying it first.
	keep bool

	proc, riv, limit []Run
	inserts          []float64
}

// figure sums up the side's runs.
func (d *drainSide) figure(cluster string, n int) DrainFigure {
	fig := drainFigure(cluster, n, d.proc, d.riv, d.limit)
	fig.RiverInsertPerSec = median(d.inserts)
	return fig
}

// drain measures the three drains on each cluster (the fast one, and the
// durable one when it runs), in turns, then profiles the processor on the
// fast one.
func (b *bench) drain(ctx context.Context) error {
	var sides []*drainSide
	for _, e := range b.clusters() {
		river, err := b.newRiverBench(ctx, target{e, dbRiver})
		if err != nil {
			return err
		}
		defer river.Close()
		sides = append(sides, &drainSide{events: target{e, dbDrain}, river: river})
	}
	if err := b.drainInTurns(ctx, "drain", sides); err != nil {
		return err
	}
	for _, d := range sides {
		fig := d.figure(d.events.env.Kind, b.s.DrainEvents)
		if d.events.env.Kind == clusterDurable {
			b.rep.DrainDurable = &fig
		} else {
			b.rep.Drain = &fig
		}
	}
	return b.profileDrain(ctx)
}

// drainInTurns warms each side up with a small drain of each system, then
// runs b.s.DrainRuns drains of b.s.DrainEvents events of each system on
// each side, in turns: run 1 of the processor, River and the limit on each
// side, then run 2, ... so that a change of the machine's load hits every
// figure alike.
func (b *bench) drainInTurns(ctx context.Context, stage string, sides []*drainSide) error {
	load := func(d *drainSide, n int, tag string) error {
		return b.loadEvents(ctx, d.events, n, loadOpts{Keep: d.keep, Tag: tag})
	}
	warm := 5000 - 5000%b.s.BatchSize
	for _, d := range sides {
		if err := load(d, warm, "w1_"); err != nil {
			return err
		}
		if _, err := b.processorDrain(ctx, d.events, warm, nil); err != nil {
			return fmt.Errorf("processor warm-up (%s): %w", d.events.db, err)
		}
		if d.river != nil {
			if _, _, err := d.river.run(ctx, warm); err != nil {
				return fmt.Errorf("River warm-up (%s): %w", d.river.t.db, err)
			}
		}
		if err := load(d, warm, "w2_"); err != nil {
			return err
		}
		if _, err := b.limitDrain(ctx, d.events, warm); err != nil {
			return fmt.Errorf("limit warm-up (%s): %w", d.events.db, err)
		}
	}
	n := b.s.DrainEvents
	for i := range b.s.DrainRuns {
		tag := "r" + strconv.Itoa(i+1)
		for _, d := range sides {
			where := []any{"stage", stage, "cluster", d.events.env.Kind, "db", d.events.db, "run", i + 1}
			if err := load(d, n, tag+"p_"); err != nil {
				return err
			}
			r, err := b.processorDrain(ctx, d.events, n, nil)
			if err != nil {
				return fmt.Errorf("processor run %d (%s %s): %w", i+1, d.events.env.Kind, d.events.db, err)
			}
			d.proc = append(d.proc, r)
			b.log.Info("drain", append(where, "system", "processor", "events_per_sec", int(r.EventsPerSec))...)

			if d.river != nil {
				r, ins, err := d.river.run(ctx, n)
				if err != nil {
					return fmt.Errorf("River run %d (%s %s): %w", i+1, d.river.t.env.Kind, d.river.t.db, err)
				}
				d.riv, d.inserts = append(d.riv, r), append(d.inserts, ins)
				b.log.Info("drain", append(where, "system", "river", "events_per_sec", int(r.EventsPerSec))...)
			}

			if err := load(d, n, tag+"l_"); err != nil {
				return err
			}
			if r, err = b.limitDrain(ctx, d.events, n); err != nil {
				return fmt.Errorf("limit run %d (%s %s): %w", i+1, d.events.env.Kind, d.events.db, err)
			}
			d.limit = append(d.limit, r)
			b.log.Info("drain", append(where, "system", "limit", "events_per_sec", int(r.EventsPerSec))...)
		}
	}
	return nil
}

// drainFigure sums up the runs of the three systems on one cluster, taken
// in turns (run i of each side by side).
func drainFigure(cluster string, n int, procRuns, riverRuns, limitRuns []Run) DrainFigure {
	fig := DrainFigure{Cluster: cluster, Events: n}
	fig.Processor, fig.River, fig.Limit = summarize(procRuns), summarize(riverRuns), summarize(limitRuns)
	fig.RatioRiver = ratio(fig.Processor.Median, fig.River.Median)
	fig.RatioLimit = ratio(fig.Processor.Median, fig.Limit.Median)
	for i := range procRuns {
		rr := 0.0
		if i < len(riverRuns) {
			rr = ratio(procRuns[i].EventsPerSec, riverRuns[i].EventsPerSec)
		}
		rl := ratio(procRuns[i].EventsPerSec, limitRuns[i].EventsPerSec)
		if i == 0 {
			fig.RatioRiverMin, fig.RatioLimitMin = rr, rl
		}
		fig.RatioRiverMin, fig.RatioRiverMax = min(fig.RatioRiverMin, rr), max(fig.RatioRiverMax, rr)
		fig.RatioLimitMin, fig.RatioLimitMax = min(fig.RatioLimitMin, rl), max(fig.RatioLimitMax, rl)
	}
	return fig
}

// loadOpts shapes a load of events.
type loadOpts struct {
	// Processed stores the events as processed a day ago instead of due,
	// for the archiver.
	Processed bool
	// Keep adds the events to what the table holds (the history stage);
	// otherwise the table is emptied first.
	Keep bool
	// Tag goes into the event ids, so that loads kept side by side do not
	// collide.
	Tag string
	// Source is the events' source (default sourceName).
	Source string
}

// loadEvents stores n events with distinct 1 KiB bodies (COPY; not
// measured), due unless o.Processed, into an emptied table unless o.Keep,
// then vacuums, analyzes and checkpoints, so that every drain starts from
// the same table and none pays for the load's writes.
func (b *bench) loadEvents(ctx context.Context, t target, n int, o loadOpts) error {
	conn, err := pgx.Connect(ctx, t.URL())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", t.db, err)
	}
	defer conn.Close(ctx)
	if !o.Keep {
		if err := emptyEventTables(ctx, conn); err != nil {
			return fmt.Errorf("empty %s: %w", t.db, err)
		}
	}
	due := time.Now().Add(-time.Minute)
	var processedAt *time.Time
	var outcome *string
	if o.Processed {
		at, handled := time.Now().Add(-24*time.Hour), string(inbox.OutcomeHandled)
		processedAt, outcome = &at, &handled
	}
	src := sourceName
	if o.Source != "" {
		src = o.Source
	}
	i := 0
	rows := pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		id := "evt_drain_" + o.Tag + strconv.Itoa(i)
		body := stripeBody(id, newRand(b.s.Seed, streamDrain+uint64(i)))
		sum := sha256.Sum256(body)
		i++
		return []any{src, source.KindStripe, id, eventType, string(body), body, sum[:], len(body), due, due, processedAt, outcome}, nil
	})
	_, err = conn.CopyFrom(ctx, pgx.Identifier{"webhook_events"},
		[]string{"provider", "source_kind", "event_id", "event_type", "payload", "body", "body_sha256", "body_size",
			"created_at", "next_attempt_at", "processed_at", "outcome"}, rows)
	if err != nil {
		return fmt.Errorf("store %d drain events: %w", n, err)
	}
	for _, q := range []string{`VACUUM ANALYZE webhook_events`, `CHECKPOINT`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s on %s: %w", q, t.db, err)
		}
	}
	return nil
}

// emptyEventTables empties webhook_events and every table that refers to
// it (CASCADE: the dead letters, and whatever later migrations add, such
// as an attempt history), the other tables the bench's runs fill, and the
// processors' claims where the schema has them (migration 00006 on).
func emptyEventTables(ctx context.Context, conn interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}) error {
	_, err := conn.Exec(ctx, `TRUNCATE webhook_events, webhook_dead_letters, webhook_payload_mismatches, webhook_archive_objects CASCADE`)
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `DO $$ BEGIN
  IF to_regclass('webhook_claims') IS NOT NULL THEN TRUNCATE webhook_claims; END IF;
END $$`)
	return err
}

// noop is the drain's handler: it does nothing, so what is measured is the
// processor's own work (claim, attempt count, transaction, mark, commit).
func noop(context.Context, pgx.Tx, *processor.Event) error { return nil }

// processorDrain runs b.s.Processors processors at once, as as many
// concurrent Lambda invocations would, each with the Lambda's pool (two
// connections, the session timeouts) and the default settings, until
// every event is handled. tracer, when set, times every statement.
func (b *bench) processorDrain(ctx context.Context, t target, n int, tracer *sqlTimer) (Run, error) {
	procs := make([]*processor.Processor, b.s.Processors)
	for i := range procs {
		pool, err := b.processorPool(ctx, t, tracer)
		if err != nil {
			return Run{}, err
		}
		defer pool.Close()
		if err := pool.Ping(ctx); err != nil {
			return Run{}, fmt.Errorf("connect processor %d: %w", i, err)
		}
		reg := processor.NewRegistry()
		reg.Fallback(processor.HandlerFunc(noop))
		if procs[i], err = processor.New(processor.Config{}, processor.Deps{Pool: pool, Registry: reg}); err != nil {
			return Run{}, err
		}
	}
	heap := sampleHeap()
	before := t.snapshot(ctx)
	start := time.Now()
	stats := make([]processor.Stats, len(procs))
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { stats[i], errs[i] = p.Drain(ctx) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	after := t.snapshot(ctx)
	use := heap.Stop()
	if err := errors.Join(errs...); err != nil {
		return Run{}, err
	}
	handled := 0
	for _, st := range stats {
		handled += st.Handled
	}
	if handled != n {
		for i := range stats {
			stats[i].Latencies = nil // thousands of them, not worth printing
		}
		return Run{}, fmt.Errorf("processors handled %d events, want %d (%+v)", handled, n, stats)
	}
	r := Run{Events: n, Seconds: elapsed.Seconds(), EventsPerSec: float64(n) / elapsed.Seconds(), Heap: &use}
	r.costs(before, after, 0)
	return r, nil
}

// processorPool opens a processor's pool as the Lambda does
// (functions/processor): two connections, the processor's session
// timeouts, cache_statement mode.
func (b *bench) processorPool(ctx context.Context, t target, tracer *sqlTimer) (*pgxpool.Pool, error) {
	opts := storage.PoolConfig{
		URL: t.URL(), ApplicationName: "bench-processor", MaxConns: 2, ConnectTimeout: 3 * time.Second,
		RuntimeParams: processor.SessionParams(processor.DefaultHandlerTimeout), CancelOnContext: true,
	}
	if tracer == nil {
		return opts.Open(ctx)
	}
	// storage.PoolConfig has no tracer option: the same settings by hand.
	cfg, err := pgxpool.ParseConfig(t.URL())
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
func (b *bench) limitDrain(ctx context.Context, t target, n int) (Run, error) {
	perClient := (n + b.s.BatchSize*b.s.LimitClients - 1) / (b.s.BatchSize * b.s.LimitClients)
	before := t.snapshot(ctx)
	res, err := b.pgbench(ctx, pgbenchJob{
		Name: "limit", Script: limitScript(b.s.BatchSize), Env: t.env, DB: t.db,
		Clients: b.s.LimitClients, Threads: b.s.PgbenchThreads, Transactions: perClient,
	})
	if err != nil {
		return Run{}, err
	}
	after := t.snapshot(ctx)
	conn, err := pgx.Connect(ctx, t.URL())
	if err != nil {
		return Run{}, err
	}
	defer conn.Close(ctx)
	var left int
	// The due index's predicate, so that a table with a long history is
	// not read whole.
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE processed_at IS NULL AND dead_at IS NULL`).Scan(&left); err != nil {
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
	t := target{b.env, dbDrain}
	if err := b.loadEvents(ctx, t, n, loadOpts{}); err != nil {
		return err
	}
	tracer := newSQLTimer()
	var r Run
	prof, err := b.cpuProfile("drain", func() error {
		var err error
		r, err = b.processorDrain(ctx, t, n, tracer)
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
