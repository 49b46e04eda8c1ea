package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// claim is a claim being run: its record in webhook_claims, and its events,
// oldest due first.
type claim struct {
	storage.Claim
	// solo: an event that must run alone (the solo claim).
	solo   bool
	events []storage.ClaimedEvent
}

// errClaimLost: another processor recovered the claim after its lease
// passed; this one's work on it must not commit.
var errClaimLost = errors.New("the claim was recovered by another processor after its lease passed")

// runClaim claims events in a new transaction, records the claim, runs the
// events in that transaction and commits their outcomes with their
// handlers' work: one event that must run alone (solo), or a batch of
// events that may run together. It returns how many events it claimed;
// an error only when the processor's own bookkeeping failed (the
// database). Stats.Stopped is set when the drain must end.
//
// A claim whose transaction fails (a handler broke the connection, the
// commit failed) falls back to one transaction per event, under the same
// claim, so that one event's trouble never costs its neighbours more than
// a rerun.
func (p *Processor) runClaim(ctx context.Context, worker string, solo bool, st *Stats) (int, error) {
	tx, err := p.store.Begin(ctx)
	if err != nil {
		return 0, p.bookkeepingFailed(err, p.log)
	}
	now := p.clock.Now()
	var got storage.Claimed
	if solo {
		got, err = tx.EventClaimSolo(ctx, now, p.cfg.BodyBudget)
	} else {
		got, err = tx.EventClaimBatch(ctx, storage.ClaimParams{Now: now, Max: p.cfg.BatchSize, BodyBudget: p.cfg.BodyBudget})
	}
	evs := got.Events
	if err != nil || len(evs) == 0 {
		p.rollback(ctx, tx)
		if err != nil {
			return 0, p.bookkeepingFailed(err, p.log)
		}
		return 0, nil
	}
	claimed := len(evs)
	if evs, err = p.holdPaused(ctx, tx, got, st); err != nil {
		p.rollback(ctx, tx)
		return 0, p.bookkeepingFailed(err, p.log)
	}
	if len(evs) == 0 {
		// Every event claimed is paused: the holds are all there is to
		// commit. The count claimed keeps the drain going.
		if err := p.commitHolds(ctx, tx); err != nil {
			st.Held -= claimed
			return 0, p.bookkeepingFailed(err, p.log)
		}
		st.Claimed += claimed
		return claimed, nil
	}
	c := &claim{solo: solo, events: evs, Claim: storage.Claim{
		Processor: worker, Token: worker + "#" + strconv.FormatUint(p.seq.Add(1), 10),
		EventIDs: make([]int64, len(evs)), ClaimedAt: now, LockedUntil: now.Add(p.cfg.Lease),
	}}
	for i := range evs {
		c.EventIDs[i] = evs[i].ID
	}
	// The claim is committed before any handler runs, on the pool's other
	// connection while the transaction holds the events: if this process
	// dies, the processor that finds it past its lease records the
	// attempts that never finished.
	if err := p.store.ClaimSet(ctx, c.Claim); err != nil {
		p.rollback(ctx, tx)
		st.Held -= claimed - len(evs)
		return 0, p.bookkeepingFailed(err, p.log)
	}
	st.Batches++
	st.Claimed += claimed
	if solo {
		st.Solo++
	}

	attempts, txErr := p.runEvents(ctx, tx, c, st)
	if txErr == nil {
		if txErr = p.commit(ctx, tx, c, attempts); txErr == nil {
			p.report(c, attempts, st)
			return claimed, nil
		}
	}
	p.rollback(ctx, tx)
	// The holds rolled back with the claim's transaction: those events
	// are due again, and the next claim holds them.
	st.Held -= claimed - len(evs)
	if errors.Is(txErr, errClaimLost) {
		p.claimLost(c, st)
		return claimed, nil
	}
	return claimed, p.fallback(ctx, c, attempts, txErr, st)
}

// holdPaused holds the claimed events that a pause in force covers
// (EventHoldClaimed: no attempt is counted) and returns the others, to
// run. The claim's own statement read the pauses (Claimed.Pauses), so a
// pause committed before the claim began is seen, and one committed
// after it found the claim's rows locked and left them to run. With no
// pause, the common case, it costs nothing; routes are resolved only
// under a handler's pause.
func (p *Processor) holdPaused(ctx context.Context, tx *storage.Tx, got storage.Claimed, st *Stats) ([]storage.ClaimedEvent, error) {
	evs := got.Events
	if len(got.Pauses) == 0 {
		return evs, nil
	}
	pauses := make(map[string]bool, len(got.Pauses))
	handlers := false
	for _, name := range got.Pauses {
		pauses[name] = true
		handlers = handlers || strings.HasPrefix(name, string(inbox.PauseHandler)+":")
	}
	var holds []storage.Hold
	run := evs[:0:0]
	for _, ce := range evs {
		if by := p.pausedBy(&ce, pauses, handlers); by != "" {
			holds = append(holds, storage.Hold{ID: ce.ID, HeldBy: by})
			continue
		}
		run = append(run, ce)
	}
	if len(holds) == 0 {
		return evs, nil
	}
	if _, err := tx.EventHoldClaimed(ctx, holds); err != nil {
		return nil, err
	}
	st.Held += len(holds)
	p.log.Debug("processor: paused events held", "events", len(holds))
	return run, nil
}

// pausedBy names the pause that covers a claimed event (inbox.HoldOf), ""
// when none does: its source's, else its route's, as Lookup would route
// it now (only when handlers: a handler's pause is in force).
func (p *Processor) pausedBy(ce *storage.ClaimedEvent, pauses map[string]bool, handlers bool) string {
	if by := inbox.HoldOf(inbox.PauseSource, ce.Source); pauses[by] {
		return by
	}
	if !handlers {
		return ""
	}
	kind := ce.SourceKind
	if kind == "" {
		kind = p.cfg.SourceKinds[ce.Source]
	}
	rt, ok := p.reg.Resolve(ce.Source, kind, ce.Type)
	if !ok {
		return ""
	}
	if by := inbox.HoldOf(inbox.PauseHandler, rt.String()); pauses[by] {
		return by
	}
	return ""
}

// commitHolds commits a claim's transaction that only held events.
func (p *Processor) commitHolds(ctx context.Context, tx *storage.Tx) error {
	bctx, cancel := p.bookkeepingContext(ctx)
	defer cancel()
	if err := tx.Commit(bctx); err != nil {
		p.rollback(ctx, tx)
		return fmt.Errorf("commit the holds of paused events: %w", err)
	}
	return nil
}

// runEvents runs a claim's events in tx, one after the other, while they
// fit in the time and the lease left, and returns the attempts it made.
// The events it does not start are released when tx ends (their attempts
// were never counted). An error means tx is lost.
func (p *Processor) runEvents(ctx context.Context, tx *storage.Tx, c *claim, st *Stats) ([]attempt, error) {
	out := make([]attempt, 0, len(c.events))
	for i := range c.events {
		if !p.mayStart(ctx, c, st) {
			st.Released += len(c.events) - i
			return out, nil
		}
		if err := p.loadBodies(ctx, tx, c.events[i:]); err != nil {
			return out, err
		}
		a, err := p.attempt(ctx, tx, c, &c.events[i])
		out = append(out, a)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// mayStart reports whether the next event of c may start; when the drain
// must end (cancelled, deadline) it says why in st.Stopped. Running out of
// lease only ends the claim: the drain goes on with a fresh one.
func (p *Processor) mayStart(ctx context.Context, c *claim, st *Stats) bool {
	switch {
	case ctx.Err() != nil:
		st.Stopped = StopCancelled
	case !p.timeLeft(ctx, time.Time{}):
		st.Stopped = StopDeadline
	case !p.timeLeft(ctx, c.LockedUntil):
	default:
		return true
	}
	return false
}

// commit records the attempts in tx, copies the events that died into the
// dead letters, empties the claim (checking it is still this processor's)
// and commits, in the bookkeeping's own time.
func (p *Processor) commit(ctx context.Context, tx *storage.Tx, c *claim, attempts []attempt) error {
	bctx, cancel := p.bookkeepingContext(ctx)
	defer cancel()
	if err := p.record(bctx, tx, c, attempts); err != nil {
		return err
	}
	ok, err := tx.ClaimRelease(bctx, c.Processor, c.Token, p.clock.Now())
	switch {
	case err != nil:
		return err
	case !ok:
		return errClaimLost
	}
	if err := tx.Commit(bctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// record writes the attempts' outcomes (and the dead letters) in tx.
func (p *Processor) record(ctx context.Context, tx *storage.Tx, c *claim, attempts []attempt) error {
	if len(attempts) == 0 {
		return nil
	}
	results := make([]storage.AttemptResult, len(attempts))
	var dead []int64
	for i, a := range attempts {
		results[i] = a.AttemptResult
		if a.Dead {
			dead = append(dead, a.ID)
		}
	}
	n, err := tx.EventFinish(ctx, storage.EventFinishParams{Processor: c.Processor, BatchSize: len(c.events), Results: results})
	switch {
	case err != nil:
		return err
	case n != len(results):
		// The claim's row locks rule it out: something else changed the
		// events, and nothing of this transaction may commit.
		return fmt.Errorf("recorded %d of %d attempts: events changed under the claim's locks", n, len(results))
	}
	if len(dead) > 0 {
		if _, err := tx.EventDeadLetter(ctx, dead); err != nil {
			return err
		}
	}
	return nil
}

// report counts and logs committed attempts.
func (p *Processor) report(c *claim, attempts []attempt, st *Stats) {
	for _, a := range attempts {
		log := p.log.With("source", a.ev.Source, "event_id", a.ev.EventID, "event_type", a.ev.Type, "attempt", a.number)
		ss := st.source(a.ev.Source)
		switch {
		case a.Outcome == inbox.AttemptHandled:
			st.Handled++
			ss.Handled++
			lat := a.FinishedAt.Sub(a.ev.CreatedAt)
			st.Latencies = append(st.Latencies, lat)
			ss.Latencies = append(ss.Latencies, lat)
		case a.Outcome == inbox.AttemptUnhandled:
			st.Unhandled++
			ss.Unhandled++
			lat := a.FinishedAt.Sub(a.ev.CreatedAt)
			st.Latencies = append(st.Latencies, lat)
			ss.Latencies = append(ss.Latencies, lat)
			log.Debug("processor: no handler; marked processed", "cause", inbox.CauseNoHandler)
		case a.Dead:
			st.DeadLettered++
			ss.DeadLettered++
			log.Error("processor: event moved to the dead letters", "cause", a.Cause, "err", a.Error, "batch_size", len(c.events))
		default:
			st.Retried++
			ss.Retried++
			log.Warn("processor: attempt failed; will retry", "cause", a.Cause, "err", a.Error,
				"retry_in", a.NextAttemptAt.Sub(a.FinishedAt).String(), "next_attempt_at", a.NextAttemptAt, "batch_size", len(c.events))
		}
	}
}

// fallback runs a claim's events again, one transaction each, after the
// claim's transaction failed with txErr (its work rolled back). An event
// alone in its claim is not run again: its attempt failed, and that is
// recorded. The claim stays this processor's throughout, so no other
// processor takes the events meanwhile, and is emptied at the end.
func (p *Processor) fallback(ctx context.Context, c *claim, attempts []attempt, txErr error, st *Stats) error {
	st.Fallbacks++
	p.log.Warn("processor: a claim's transaction failed; running its events one transaction each",
		"cause", inbox.CauseCommitFailed, "err", txErr, "events", len(c.events), "claim", c.Token)
	var err error
	if len(c.events) == 1 {
		a := failedCommit(c, attempts, txErr, p)
		err = p.runAlone(ctx, c, &c.events[0], &a, st)
	} else {
		for i := range c.events {
			if !p.mayStart(ctx, c, st) {
				st.Released += len(c.events) - i
				break
			}
			if err = p.runAlone(ctx, c, &c.events[i], nil, st); err != nil {
				break
			}
		}
	}
	if errors.Is(err, errClaimLost) {
		p.claimLost(c, st)
		return nil
	}
	if err != nil {
		return p.bookkeepingFailed(err, p.log)
	}
	bctx, cancel := p.bookkeepingContext(ctx)
	defer cancel()
	if _, err := p.store.ClaimRelease(bctx, c.Processor, c.Token, p.clock.Now()); err != nil {
		// Its lease passing frees it: the next processor to look finds
		// every event processed or recorded.
		p.log.Warn("processor: could not empty a claim after its fallback; it ends with its lease",
			"cause", inbox.CauseDatabaseUnavailable, "err", err, "claim", c.Token)
	}
	return nil
}

// failedCommit is the attempt of an event alone in a claim whose
// transaction failed: the failure its handler met, if it did, else the
// transaction's.
func failedCommit(c *claim, attempts []attempt, txErr error, p *Processor) attempt {
	if len(attempts) == 1 && attempts[0].Outcome == inbox.AttemptFailed {
		return attempts[0]
	}
	ev := &c.events[0]
	a := attempt{ev: ev.Event, number: ev.Attempts + 1, AttemptResult: storage.AttemptResult{ID: ev.ID, StartedAt: c.ClaimedAt}}
	if len(attempts) == 1 {
		a = attempts[0]
	}
	p.fail(&a, ev, inbox.CauseCommitFailed, txErr, false)
	return a
}

// runAlone runs one event of a claim in a transaction of its own (the
// claim's fallback), or, when rec is set, records that attempt without
// running it. The transaction holds the claim against recovery and locks
// the event again; an event processed or dead meanwhile is skipped.
func (p *Processor) runAlone(ctx context.Context, c *claim, ev *storage.ClaimedEvent, rec *attempt, st *Stats) error {
	tx, err := p.store.Begin(ctx)
	if err != nil {
		return err
	}
	defer p.rollback(ctx, tx)
	if ok, err := tx.ClaimLock(ctx, c.Processor, c.Token); err != nil || !ok {
		if err == nil {
			err = errClaimLost
		}
		return err
	}
	if ok, err := tx.EventLockClaimed(ctx, ev.ID); err != nil || !ok {
		return err
	}
	one := &claim{Claim: c.Claim, solo: true, events: []storage.ClaimedEvent{*ev}}
	if rec == nil {
		if err := p.loadBodies(ctx, tx, one.events); err != nil {
			return err
		}
		a, err := p.attempt(ctx, tx, one, &one.events[0])
		if err != nil {
			// Its handler broke this transaction too: record the failure
			// in another.
			p.rollback(ctx, tx)
			if a.Outcome != inbox.AttemptFailed {
				p.fail(&a, &one.events[0], inbox.CauseCommitFailed, err, false)
			}
			return p.runAlone(ctx, c, ev, &a, st)
		}
		rec = &a
	}
	bctx, cancel := p.bookkeepingContext(ctx)
	defer cancel()
	if err := p.record(bctx, tx, one, []attempt{*rec}); err != nil {
		return err
	}
	if err := tx.Commit(bctx); err != nil {
		if rec.Outcome == inbox.AttemptFailed {
			return fmt.Errorf("commit: %w", err)
		}
		// The handler's work did not commit: a failure of its own.
		p.rollback(ctx, tx)
		a := *rec
		p.fail(&a, &one.events[0], inbox.CauseCommitFailed, err, false)
		return p.runAlone(ctx, c, ev, &a, st)
	}
	p.report(one, []attempt{*rec}, st)
	return nil
}

func (p *Processor) claimLost(c *claim, st *Stats) {
	st.LeaseLost += len(c.events)
	p.log.Warn("processor: claim recovered by another processor after its lease passed; its work was rolled back",
		"cause", inbox.CauseLeaseLost, "claim", c.Token, "events", len(c.events))
}

func (p *Processor) bookkeepingFailed(err error, log *slog.Logger) error {
	log.Error("processor: bookkeeping failed; stopping the drain", "cause", inbox.CauseDatabaseUnavailable, "err", err)
	return err
}

// rollback ends a transaction even when ctx is done: a rollback that
// cannot be sent makes pgx close the connection, which ends it too. After
// a commit it does nothing.
func (p *Processor) rollback(ctx context.Context, tx *storage.Tx) {
	bctx, cancel := p.bookkeepingContext(ctx)
	defer cancel()
	_ = tx.Rollback(bctx)
}
