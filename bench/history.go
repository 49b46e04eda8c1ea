package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// HistoryFigure is the history stage: ingest and drain over a database
// that already holds Events processed and archived events, as every
// deployment will (rows are never deleted), in turns with the same figures
// over empty tables.
type HistoryFigure struct {
	// Events is the history loaded; LoadSeconds how long loading it
	// took (rows, VACUUM ANALYZE); Attempts whether an attempt row per
	// event was loaded too (the schema has webhook_attempts).
	Events      int     `json:"events"`
	LoadSeconds float64 `json:"load_seconds"`
	Attempts    bool    `json:"attempt_rows"`
	// Relations are the sizes of webhook_events (heap, TOAST, each index)
	// and of the attempt history, right after the load.
	Relations []RelationSize `json:"relations"`
	// Ingest is new events at each concurrency, receiver and pgbench, over
	// the history; EmptyIngest the same over an empty table, in turns with
	// them. Drain and EmptyDrain are the processor, River (over as many
	// completed jobs, when RiverEvents > 0) and the limit, likewise.
	Ingest      []IngestFigure `json:"ingest"`
	EmptyIngest []IngestFigure `json:"empty_ingest"`
	Drain       *DrainFigure   `json:"drain,omitempty"`
	EmptyDrain  *DrainFigure   `json:"empty_drain,omitempty"`
	RiverEvents int            `json:"river_history_jobs"`
	RiverLoadS  float64        `json:"river_load_seconds,omitempty"`
	RiverBytes  int64          `json:"river_job_bytes,omitempty"`
	// Versus compares each figure with the history with the same figure
	// without (finish computes it).
	Versus []HistoryVersus `json:"versus"`
}

// RelationSize is one relation's size.
type RelationSize struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"` // table, TOAST, index
	Bytes int64  `json:"bytes"`
}

// HistoryVersus is one figure over the history beside the same figure over
// empty tables.
type HistoryVersus struct {
	Figure string `json:"figure"`
	System string `json:"system"`
	// Empty and History are the medians of events per second; Ratio is
	// History/Empty (below 1: slower with the history).
	Empty   float64 `json:"empty_events_per_sec"`
	History float64 `json:"history_events_per_sec"`
	Ratio   float64 `json:"ratio"`
	// CPUEmpty and CPUHistory are the CPU per 1 000 events of the side
	// (Go process or pgbench, and Postgres); CPURatio is History/Empty
	// (above 1: each event costs more with the history).
	CPUEmpty   float64 `json:"cpu_ms_per_1000_empty"`
	CPUHistory float64 `json:"cpu_ms_per_1000_history"`
	CPURatio   float64 `json:"cpu_ratio"`
}

// historyChunk is how many rows one INSERT of the history load writes.
const historyChunk = 250_000

// historyRunBase numbers the random streams of the history stage's ingest
// runs, apart from the ingest stage's.
const historyRunBase = 1 << 10

// history loads the history, then measures ingest and drain over it, in
// turns with the same over empty tables.
func (b *bench) history(ctx context.Context) error {
	hist, empty := target{b.env, dbHistory}, target{b.env, dbHistoryEmpty}
	fig := &HistoryFigure{Events: b.s.HistoryEvents}
	b.rep.History = fig
	var err error
	start := time.Now()
	if err := b.loadHistory(ctx, hist, fig); err != nil {
		return err
	}
	fig.LoadSeconds = time.Since(start).Seconds()
	b.log.Info("history loaded", "events", fig.Events, "seconds", fmt.Sprintf("%.1f", fig.LoadSeconds), "attempt_rows", fig.Attempts)
	if fig.Relations, err = relationSizes(ctx, hist); err != nil {
		return err
	}

	src, set, err := benchSource()
	if err != nil {
		return err
	}
	script, err := insertScript(pgbenchNewFrom, pgbenchNewTo)
	if err != nil {
		return err
	}
	vars := pgbenchVars(pgbenchSample(b.s.Seed))
	for i, conc := range b.s.Concurrency {
		base := historyRunBase + 2*i*(b.s.Runs+1)
		figs, err := b.ingestFigures(ctx, []ingestJob{
			{Workload: workloadNew, T: empty, Conc: conc, Empty: true, RunBase: base, Src: src, Set: set, Script: script, Vars: vars},
			{Workload: workloadNew, T: hist, Conc: conc, RunBase: base + b.s.Runs + 1, Src: src, Set: set, Script: script, Vars: vars},
		})
		if err != nil {
			return fmt.Errorf("ingest over the history: %w", err)
		}
		fig.EmptyIngest, fig.Ingest = append(fig.EmptyIngest, figs[0]), append(fig.Ingest, figs[1])
		b.log.Info("history ingest", "concurrency", conc, "receiver_eps", int(figs[1].Receiver.Median), "pgbench_eps", int(figs[1].Pgbench.Median),
			"empty_receiver_eps", int(figs[0].Receiver.Median), "empty_pgbench_eps", int(figs[0].Pgbench.Median))
	}
	// The ingested events join the history as processed ones, so that
	// the drains below find only their own events due.
	if err := markProcessed(ctx, hist); err != nil {
		return err
	}

	emptySide := &drainSide{events: empty}
	histSide := &drainSide{events: hist, keep: true}
	if b.s.HistoryRiver {
		if emptySide.river, err = b.newRiverBench(ctx, target{b.env, dbRiver}); err != nil {
			return err
		}
		defer emptySide.river.Close()
		if histSide.river, err = b.newRiverBench(ctx, target{b.env, dbRiverHist}); err != nil {
			return err
		}
		defer histSide.river.Close()
		histSide.river.keep = true
		start := time.Now()
		if err := loadRiverHistory(ctx, histSide.river.pool, b.s.HistoryEvents); err != nil {
			return err
		}
		fig.RiverEvents, fig.RiverLoadS = b.s.HistoryEvents, time.Since(start).Seconds()
		if err := histSide.river.pool.QueryRow(ctx, `SELECT pg_total_relation_size('river_job')`).Scan(&fig.RiverBytes); err != nil {
			return fmt.Errorf("river_job size: %w", err)
		}
		b.log.Info("River history loaded", "jobs", fig.RiverEvents, "seconds", fmt.Sprintf("%.1f", fig.RiverLoadS))
	}
	if err := b.drainInTurns(ctx, "history", []*drainSide{emptySide, histSide}); err != nil {
		return fmt.Errorf("drain over the history: %w", err)
	}
	e, h := emptySide.figure(clusterFast, b.s.DrainEvents), histSide.figure(clusterFast, b.s.DrainEvents)
	fig.EmptyDrain, fig.Drain = &e, &h
	return nil
}

// markProcessed marks every due event of t handled, as a processor would
// have, then vacuums.
func markProcessed(ctx context.Context, t target) error {
	conn, err := pgx.Connect(ctx, t.URL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE webhook_events SET processed_at = now(), outcome = 'handled', attempts = attempts + 1
 WHERE processed_at IS NULL AND dead_at IS NULL`); err != nil {
		return fmt.Errorf("mark the ingested events processed: %w", err)
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE webhook_events`); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}

// loadHistory stores fig.Events processed and archived events (as the
// archiver leaves them: payload and body NULL, the archive's key, offset
// and length set) into the empty database of t, received over the past
// year at an even pace, from three sources, then the attempt history
// where the schema has one, then VACUUM ANALYZE. Rows are written by
// INSERT ... SELECT generate_series on the server, two connections at a
// time, historyChunk rows per statement.
func (b *bench) loadHistory(ctx context.Context, t target, fig *HistoryFigure) error {
	pool, err := pgxpool.New(ctx, t.URL())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", t.db, err)
	}
	defer pool.Close()
	n := int64(fig.Events)
	first := time.Now().Add(-365 * 24 * time.Hour).Truncate(time.Second)
	step := (364 * 24 * time.Hour) / time.Duration(max(n, 1))
	if err := inChunks(ctx, pool, n, func(ctx context.Context, from, to int64) error {
		_, err := pool.Exec(ctx, historyEventsSQL, from, to, first, step.Microseconds())
		return err
	}); err != nil {
		return fmt.Errorf("load the history: %w", err)
	}
	// Later inserts take ids after the history's.
	if _, err := pool.Exec(ctx, `SELECT setval(pg_get_serial_sequence('webhook_events', 'id'), $1)`, max(n, 1)); err != nil {
		return fmt.Errorf("set the id sequence: %w", err)
	}
	if fig.Attempts, err = loadAttemptHistory(ctx, pool, n); err != nil {
		return fmt.Errorf("load the attempt history: %w", err)
	}
	for _, q := range []string{`VACUUM ANALYZE`, `CHECKPOINT`} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// historyEventsSQL writes the history events of ids $1..$2: $3 is the first
// one's receipt and $4 the microseconds between two receipts. Seven in ten
// come from Stripe (evt_ ids), two from Shopify and one from Square (UUIDs),
// each with a few event types; each was processed (handled, first attempt)
// a fraction of a second after its receipt and archived a day later, its
// body (0.8 to 3.8 kB) in a shared object per thousand events. Only
// columns of migrations 00001 to 00005 are written.
const historyEventsSQL = `
INSERT INTO webhook_events (id, provider, source_kind, event_id, event_type, payload, body, body_sha256, body_size,
    created_at, next_attempt_at, attempts, processed_at, outcome,
    archive_key, archive_offset, archive_length, archived_at)
SELECT i, s.provider, s.provider,
       CASE WHEN s.provider = 'stripe' THEN 'evt_' || substr(md5(i::text), 1, 24) ELSE md5(i::text)::uuid::text END,
       CASE s.provider
         WHEN 'stripe' THEN (ARRAY['invoice.payment_failed', 'invoice.paid', 'customer.subscription.updated',
                                   'charge.succeeded', 'payment_intent.succeeded', 'checkout.session.completed'])[1 + (i / 7) % 6]
         WHEN 'shopify' THEN (ARRAY['orders/create', 'orders/paid', 'orders/fulfilled', 'products/update'])[1 + (i / 7) % 4]
         ELSE (ARRAY['payment.created', 'payment.updated', 'order.updated'])[1 + (i / 7) % 3]
       END,
       NULL, NULL, sha256(int8send(i)), 800 + (i * 7919) % 3000,
       c.at, c.at, 1, c.at + make_interval(secs => 0.05 + (i % 500) / 1000.0), 'handled',
       'archive/' || s.provider || '/' || to_char(c.at AT TIME ZONE 'UTC', 'YYYY/MM/DD') || '/' || (i / 1000) || '.gz',
       (i % 1000) * 2000, 400 + (i * 7919) % 1500,
       c.at + interval '1 day'
  FROM generate_series($1::bigint, $2::bigint) AS i,
       LATERAL (SELECT $3::timestamptz + make_interval(secs => (i - 1) * $4::bigint / 1e6) AS at) c,
       LATERAL (SELECT CASE WHEN i % 10 < 7 THEN 'stripe' WHEN i % 10 < 9 THEN 'shopify' ELSE 'square' END AS provider) s
`

// loadAttemptHistory writes the attempt history of the history events, one
// handled attempt each, where the schema has webhook_attempts (migration
// 00006 on), and reports whether it did. It is the one place of the bench
// that writes the attempt history's columns: adapt it when they change.
func loadAttemptHistory(ctx context.Context, pool *pgxpool.Pool, n int64) (bool, error) {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('webhook_attempts') IS NOT NULL`).Scan(&exists); err != nil {
		return false, err
	}
	if !exists {
		return false, nil
	}
	return true, inChunks(ctx, pool, n, func(ctx context.Context, from, to int64) error {
		_, err := pool.Exec(ctx, `
INSERT INTO webhook_attempts (event_pk, attempt, started_at, finished_at, outcome, processor, batch_size)
SELECT id, 1, processed_at - interval '2 ms', processed_at, 'handled', 'history', 64
  FROM webhook_events WHERE id BETWEEN $1 AND $2`, from, to)
		return err
	})
}

// inChunks calls load for ids 1..n in chunks of historyChunk, on two
// connections at a time.
func inChunks(ctx context.Context, pool *pgxpool.Pool, n int64, load func(ctx context.Context, from, to int64) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for w := range errs {
		wg.Go(func() {
			for {
				from := next.Add(historyChunk) - historyChunk + 1
				if from > n || ctx.Err() != nil {
					return
				}
				if err := load(ctx, from, min(n, from+historyChunk-1)); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// loadRiverHistory stores n jobs River completed over the past year into
// river_job, as a River that keeps its completed jobs
// (CompletedJobRetentionPeriod -1) would hold them.
func loadRiverHistory(ctx context.Context, pool *pgxpool.Pool, n int) error {
	first := time.Now().Add(-365 * 24 * time.Hour).Truncate(time.Second)
	step := (364 * 24 * time.Hour) / time.Duration(max(n, 1))
	if err := inChunks(ctx, pool, int64(n), func(ctx context.Context, from, to int64) error {
		_, err := pool.Exec(ctx, `
INSERT INTO river_job (args, attempt, attempted_at, attempted_by, created_at, finalized_at, kind, max_attempts,
    metadata, priority, queue, scheduled_at, state)
SELECT jsonb_build_object('n', i), 1, c.at, '{bench}', c.at, c.at + interval '5 ms', 'bench_noop', 25,
       '{}', 1, 'default', c.at, 'completed'
  FROM generate_series($1::bigint, $2::bigint) AS i,
       LATERAL (SELECT $3::timestamptz + make_interval(secs => (i - 1) * $4::bigint / 1e6) AS at) c`,
			from, to, first, step.Microseconds())
		return err
	}); err != nil {
		return fmt.Errorf("load River's history: %w", err)
	}
	for _, q := range []string{`VACUUM ANALYZE river_job`, `CHECKPOINT`} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// relationSizes returns the sizes of webhook_events (heap, TOAST and each
// index) and, where it exists, of webhook_attempts (all of it).
func relationSizes(ctx context.Context, t target) ([]RelationSize, error) {
	conn, err := pgx.Connect(ctx, t.URL())
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
SELECT 'webhook_events', 'table', pg_relation_size('webhook_events')
UNION ALL
SELECT 'webhook_events (TOAST)', 'TOAST', coalesce(pg_total_relation_size(reltoastrelid), 0)
  FROM pg_class WHERE oid = 'webhook_events'::regclass
UNION ALL
(SELECT indexrelid::regclass::text, 'index', pg_relation_size(indexrelid)
   FROM pg_index WHERE indrelid = 'webhook_events'::regclass ORDER BY pg_relation_size(indexrelid) DESC)
UNION ALL
SELECT 'webhook_attempts (with its indexes)', 'table', pg_total_relation_size(to_regclass('webhook_attempts'))
 WHERE to_regclass('webhook_attempts') IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("relation sizes: %w", err)
	}
	sizes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RelationSize, error) {
		var s RelationSize
		err := r.Scan(&s.Name, &s.Kind, &s.Bytes)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("relation sizes: %w", err)
	}
	return sizes, nil
}

// historyVersus compares the history figures with the empty-table ones
// taken in turns with them.
func (r *Report) historyVersus() []HistoryVersus {
	h := r.History
	if h == nil {
		return nil
	}
	var out []HistoryVersus
	add := func(figure, system string, empty, hist Measure) {
		if len(hist.Runs) == 0 {
			return
		}
		v := HistoryVersus{Figure: figure, System: system, History: hist.Median, CPUHistory: hist.CPUPerEvent()}
		if len(empty.Runs) > 0 {
			v.Empty, v.CPUEmpty = empty.Median, empty.CPUPerEvent()
			v.Ratio, v.CPURatio = ratio(v.History, v.Empty), ratio(v.CPUHistory, v.CPUEmpty)
		}
		out = append(out, v)
	}
	for _, f := range h.Ingest {
		var empty IngestFigure
		if i := slices.IndexFunc(h.EmptyIngest, func(e IngestFigure) bool {
			return e.Workload == f.Workload && e.Concurrency == f.Concurrency
		}); i >= 0 {
			empty = h.EmptyIngest[i]
		}
		name := fmt.Sprintf("ingest, new events, %d clients", f.Concurrency)
		add(name, "receiver", empty.Receiver, f.Receiver)
		add(name, "pgbench", empty.Pgbench, f.Pgbench)
	}
	if d := h.Drain; d != nil {
		var empty DrainFigure
		if h.EmptyDrain != nil {
			empty = *h.EmptyDrain
		}
		name := fmt.Sprintf("drain of %s events", thousands(float64(d.Events)))
		add(name, "processor", empty.Processor, d.Processor)
		add(name, "River", empty.River, d.River)
		add(name, "limit", empty.Limit, d.Limit)
	}
	return out
}
