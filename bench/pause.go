package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// pausedSource is the source the pause stage pauses, beside sourceName,
// whose events are drained.
const pausedSource = "stripe-paused"

// PauseFigure is the drain of the same due events with a paused source
// holding many events beside them, and without: a held event is due at no
// time (next_attempt_at 9999-12-31, migration 00017), so the claims'
// range scans never reach it, and the pause costs each claim's statement
// a read of webhook_pauses (a few rows), not a scan of what it holds.
type PauseFigure struct {
	Events int `json:"events"`
	// Held is what the paused source holds during the runs with a pause.
	Held    int     `json:"held"`
	Without Measure `json:"without_pause"`
	With    Measure `json:"with_pause"`
	// Ratio is with/without, of the median events per second.
	Ratio float64 `json:"ratio_with_without"`
}

// pause measures the claim's cost with and without a pause: in turns,
// the processors drain Events due events of one source from a table
// that holds nothing else, and from one where another, paused source
// holds Held events besides (loaded, then held by the pause's own
// statements, then vacuumed: not measured).
func (b *bench) pause(ctx context.Context) error {
	t := target{b.env, dbPause}
	n, held := b.s.PauseEvents, b.s.PauseHeld
	var without, with []Run
	for run := range b.s.DrainRuns {
		if err := b.loadEvents(ctx, t, n, loadOpts{}); err != nil {
			return err
		}
		r, err := b.processorDrain(ctx, t, n, nil)
		if err != nil {
			return fmt.Errorf("drain without a pause: %w", err)
		}
		without = append(without, r)
		if err := b.loadEvents(ctx, t, n, loadOpts{}); err != nil {
			return err
		}
		if err := b.loadEvents(ctx, t, held, loadOpts{Keep: true, Tag: "held_", Source: pausedSource}); err != nil {
			return err
		}
		if err := holdSource(ctx, t, held); err != nil {
			return err
		}
		if r, err = b.processorDrain(ctx, t, n, nil); err != nil {
			return fmt.Errorf("drain beside a pause: %w", err)
		}
		with = append(with, r)
		b.log.Info("pause run", "run", run+1, "without_per_sec", fmt.Sprintf("%.0f", without[run].EventsPerSec),
			"with_per_sec", fmt.Sprintf("%.0f", r.EventsPerSec), "held", held)
	}
	fig := &PauseFigure{Events: n, Held: held, Without: summarize(without), With: summarize(with)}
	fig.Ratio = ratio(fig.With.Median, fig.Without.Median)
	b.rep.Pause = fig
	return nil
}

// holdSource pauses pausedSource as an operator does (the pause's row and
// the hold of its waiting events, in one transaction), checks it held
// them all, then vacuums and checkpoints, as loadEvents does.
func holdSource(ctx context.Context, t target, want int) error {
	pool, err := pgxpool.New(ctx, t.URL())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", t.db, err)
	}
	defer pool.Close()
	store := storage.New(pool)
	tx, err := store.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.PauseInsert(ctx, inbox.Pause{Scope: inbox.PauseSource, Name: pausedSource, PausedAt: time.Now(), Actor: "bench"}); err != nil {
		return err
	}
	n, err := tx.EventHoldSource(ctx, pausedSource)
	if err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("the pause held %d events, want %d", n, want)
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	for _, q := range []string{`VACUUM ANALYZE webhook_events`, `CHECKPOINT`} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s on %s: %w", q, t.db, err)
		}
	}
	return nil
}
