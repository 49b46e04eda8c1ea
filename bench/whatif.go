package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// WhatIf is a drain variant measured to size a possible change to the
// processor: the processor's own statements (package storage), issued
// by a loop of this program in the processor's order, changed in one
// respect. They run once each, on a smaller table, after the measured runs.
type WhatIf struct {
	Name         string  `json:"name"`
	Change       string  `json:"change"`
	EventsPerSec float64 `json:"events_per_sec"`
	// VsAsBuilt is this variant over the "as built" emulation.
	VsAsBuilt float64 `json:"vs_as_built"`
	Run       Run     `json:"run"`
}

// drain loop variants.
const (
	variantAsBuilt       = "as built"
	variantPipelineBegin = "BEGIN pipelined with the mark"
	variantBatchAttempts = "attempts counted per batch"
)

var variantChanges = map[string]string{
	variantAsBuilt:       "the processor's statements in its order: claim 25; per event: count the attempt (own transaction), BEGIN, mark, COMMIT",
	variantPipelineBegin: "BEGIN and the mark UPDATE sent together in one round trip (a pgx batch): 3 round trips per event instead of 4",
	variantBatchAttempts: "the attempts of a claimed batch counted by one UPDATE per batch instead of one transaction per event",
}

// whatIfs measures the variants on n events each with the processor's
// concurrency.
func (b *bench) whatIfs(ctx context.Context, n int) error {
	var base float64
	for _, v := range []string{variantAsBuilt, variantPipelineBegin, variantBatchAttempts} {
		if err := b.loadDrainEvents(ctx, n); err != nil {
			return err
		}
		r, err := b.emulatedDrain(ctx, n, v)
		if err != nil {
			return fmt.Errorf("what-if %q: %w", v, err)
		}
		if v == variantAsBuilt {
			base = r.EventsPerSec
		}
		b.rep.WhatIfs = append(b.rep.WhatIfs, WhatIf{Name: v, Change: variantChanges[v], EventsPerSec: r.EventsPerSec, VsAsBuilt: ratio(r.EventsPerSec, base), Run: r})
		b.log.Info("drain what-if", "variant", v, "events_per_sec", int(r.EventsPerSec))
	}
	return nil
}

// emulatedDrain drains n events with b.s.Processors loops of the given
// variant, each with its own two-connection pool, as processorDrain does.
func (b *bench) emulatedDrain(ctx context.Context, n int, variant string) (Run, error) {
	pools := make([]*pgxpool.Pool, b.s.Processors)
	for i := range pools {
		p, err := b.processorPool(ctx, nil)
		if err != nil {
			return Run{}, err
		}
		defer p.Close()
		if err := p.Ping(ctx); err != nil {
			return Run{}, err
		}
		pools[i] = p
	}
	var done atomic.Int64
	errs := make([]error, len(pools))
	before := b.env.snapshot(ctx)
	start := time.Now()
	var wg sync.WaitGroup
	for i, pool := range pools {
		wg.Go(func() { errs[i] = emulateLoop(ctx, pool, "whatif-"+strconv.Itoa(i), variant, b.s.BatchSize, &done) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	after := b.env.snapshot(ctx)
	if err := errors.Join(errs...); err != nil {
		return Run{}, err
	}
	if int(done.Load()) != n {
		return Run{}, fmt.Errorf("handled %d events, want %d", done.Load(), n)
	}
	r := Run{Events: n, Seconds: elapsed.Seconds(), EventsPerSec: float64(n) / elapsed.Seconds()}
	r.costs(before, after, 0)
	return r, nil
}

// emulateLoop claims batches until none is left and handles each event
// with a no-op handler, in the variant's way.
func emulateLoop(ctx context.Context, pool *pgxpool.Pool, name, variant string, batch int, done *atomic.Int64) error {
	store := storage.New(pool)
	for seq := 1; ; seq++ {
		now := time.Now()
		token := name + "#" + strconv.Itoa(seq)
		evs, err := store.EventClaim(ctx, storage.EventClaimParams{Now: now, Limit: batch, LockedUntil: now.Add(2 * time.Minute), Token: token})
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		if variant == variantBatchAttempts {
			ids := make([]int64, len(evs))
			for i := range evs {
				ids[i] = evs[i].ID
			}
			// The experiment's own statement: what a claim that counts
			// attempts (or a per-batch count) would write.
			if _, err := pool.Exec(ctx, `UPDATE webhook_events SET attempts = attempts + 1 WHERE id = ANY($1) AND locked_by = $2`, ids, token); err != nil {
				return fmt.Errorf("count batch attempts: %w", err)
			}
		}
		for _, ev := range evs {
			if variant != variantBatchAttempts {
				if _, ok, err := store.EventStartAttempt(ctx, ev.ID, token, time.Now()); err != nil || !ok {
					return fmt.Errorf("start attempt of %d: ok=%v %w", ev.ID, ok, err)
				}
			}
			mark := storage.EventMarkProcessedParams{ID: ev.ID, Token: token, Now: time.Now(), Outcome: inbox.OutcomeHandled}
			if variant == variantPipelineBegin {
				err = markPipelined(ctx, pool, mark)
			} else {
				err = markInTx(ctx, store, mark)
			}
			if err != nil {
				return err
			}
			done.Add(1)
		}
	}
}

// markInTx is the processor's apply with a no-op handler: BEGIN, mark,
// COMMIT, one round trip each.
func markInTx(ctx context.Context, store *storage.Store, p storage.EventMarkProcessedParams) error {
	tx, err := store.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	ok, err := tx.EventMarkProcessed(ctx, p)
	if err != nil || !ok {
		return fmt.Errorf("mark %d: ok=%v %w", p.ID, ok, err)
	}
	return tx.Commit(ctx)
}

// markPipelined sends BEGIN and the mark in one round trip (a BEGIN inside
// the pipeline's implicit transaction opens a regular one, which stays
// open after the batch), then COMMIT.
func markPipelined(ctx context.Context, pool *pgxpool.Pool, p storage.EventMarkProcessedParams) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	ok, err := storage.On(beginBatch{conn.Conn()}).EventMarkProcessed(ctx, p)
	if err != nil || !ok {
		_, _ = conn.Exec(ctx, "rollback")
		return fmt.Errorf("mark %d pipelined: ok=%v %w", p.ID, ok, err)
	}
	_, err = conn.Exec(ctx, "commit")
	return err
}

// beginBatch is a storage.DBTX whose Exec sends BEGIN and the statement as
// one pgx batch.
type beginBatch struct{ conn *pgx.Conn }

// Exec sends BEGIN and sql in one round trip.
func (c beginBatch) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var batch pgx.Batch
	batch.Queue("begin")
	q := batch.Queue(sql, args...)
	var tag pgconn.CommandTag
	q.Exec(func(ct pgconn.CommandTag) error { tag = ct; return nil })
	if err := c.conn.SendBatch(ctx, &batch).Close(); err != nil {
		return tag, err
	}
	return tag, nil
}

// Query is not used by EventMarkProcessed.
func (c beginBatch) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return c.conn.Query(ctx, sql, args...)
}

// QueryRow is not used by EventMarkProcessed.
func (c beginBatch) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return c.conn.QueryRow(ctx, sql, args...)
}
