package processor

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// InterruptedError is what the history records for an attempt that
// started and never finished, with cause lease_expired.
const InterruptedError = "the attempt did not finish before its lease ended: its processor stopped (killed, timed out, or lost the database)"

// Recovery's bounds: a claim at a time (one whose processor is alive and
// late must not hold up the others), for at most this many claims per
// look, each waiting at most recoverLockTimeout for its events' row locks.
const (
	recoverMaxClaims   = 64
	recoverLockTimeout = 2 * time.Second
	// Empty claims rows of processors idle this long are deleted, at most
	// once per sweepEvery by each processor: each Lambda environment has a
	// name of its own, so their rows would pile up.
	claimIdleFor = 24 * time.Hour
	sweepEvery   = time.Hour
)

// recoverClaims records the attempts that never finished: the events of
// claims found past their lease, whose processor died or froze (its row
// locks went with its session; its claim stayed). Each such event gets an
// interrupted attempt in its history, runs alone from now on, and moves to
// the dead letters if its run's attempts are spent and it was alone in its
// claim (an attempt interrupted in a batch may have been a neighbour's
// doing: the neighbours each run alone once before that can happen). An
// error means the database failed.
func (p *Processor) recoverClaims(ctx context.Context, st *Stats) error {
	for range recoverMaxClaims {
		done, err := p.recoverOne(ctx, st)
		if err != nil || done {
			return err
		}
	}
	return nil
}

// recoverOne recovers one expired claim; done reports there was none (or
// none that can be recovered now).
func (p *Processor) recoverOne(ctx context.Context, st *Stats) (done bool, err error) {
	tx, err := p.store.Begin(ctx)
	if err != nil {
		return true, p.bookkeepingFailed(err, p.log)
	}
	defer p.rollback(ctx, tx)
	now := p.clock.Now()
	claims, err := tx.ClaimLockExpired(ctx, now, 1, recoverLockTimeout)
	if err != nil {
		return true, p.bookkeepingFailed(err, p.log)
	}
	if len(claims) == 0 {
		return true, nil
	}
	c := claims[0]
	started := c.ClaimedAt
	if started.IsZero() {
		started = now
	}
	attempts := make([]storage.InterruptedAttempt, len(c.EventIDs))
	for i, id := range c.EventIDs {
		attempts[i] = storage.InterruptedAttempt{ID: id, StartedAt: started, Processor: c.Processor, BatchSize: len(c.EventIDs)}
	}
	recorded, err := tx.EventRecordInterrupted(ctx, storage.EventRecordInterruptedParams{
		Now: now, MaxAttempts: p.cfg.MaxAttempts, Cause: inbox.CauseLeaseExpired, Error: InterruptedError, Attempts: attempts,
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		// Its events are still locked: its processor is alive, past its
		// lease. Its transaction ends within the session timeouts; the
		// next look finds the claim again.
		p.recoveryBlocked()
		p.log.Warn("processor: a claim past its lease still holds its events; its processor is late, not dead",
			"cause", inbox.CauseLeaseExpired, "claim", c.Token, "processor", c.Processor, "events", len(c.EventIDs))
		return true, nil
	}
	if err != nil {
		return true, p.bookkeepingFailed(err, p.log)
	}
	var dead []int64
	for _, r := range recorded {
		if r.Dead {
			dead = append(dead, r.ID)
		}
	}
	if len(dead) > 0 {
		if _, err := tx.EventDeadLetter(ctx, dead); err != nil {
			return true, p.bookkeepingFailed(err, p.log)
		}
	}
	if _, err := tx.ClaimRelease(ctx, c.Processor, c.Token, now); err != nil {
		return true, p.bookkeepingFailed(err, p.log)
	}
	if err := tx.Commit(ctx); err != nil {
		return true, p.bookkeepingFailed(err, p.log)
	}
	st.Interrupted += len(recorded)
	st.DeadLettered += len(dead)
	for _, r := range recorded {
		log := p.log.With("source", r.Source, "event_id", r.EventID, "cause", inbox.CauseLeaseExpired, "attempt", r.Attempt,
			"claim", c.Token, "processor", c.Processor, "batch_size", len(c.EventIDs))
		if r.Dead {
			log.Error("processor: an attempt never finished and the event's attempts are spent; moved to the dead letters")
		} else {
			log.Warn("processor: an attempt never finished (its processor stopped before its lease ended); the event runs alone next")
		}
	}
	return false, nil
}

// sweepClaims deletes the claims rows of processors long gone, at most
// once per sweepEvery; it is housekeeping, so a failure is only logged.
func (p *Processor) sweepClaims(ctx context.Context, now time.Time) {
	p.mu.Lock()
	due := p.lastSweep.IsZero() || now.Sub(p.lastSweep) >= sweepEvery
	if due {
		p.lastSweep = now
	}
	p.mu.Unlock()
	if !due {
		return
	}
	if _, err := p.store.ClaimDeleteIdle(ctx, now.Add(-claimIdleFor)); err != nil {
		p.log.Warn("processor: could not delete idle claims", "cause", inbox.CauseDatabaseUnavailable, "err", err)
	}
}
