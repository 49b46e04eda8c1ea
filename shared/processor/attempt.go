package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// BodyReader reads the body of an archived event from the archive, byte
// for byte as received (Deps.Bodies; archive.OpenBodies gives one).
type BodyReader interface {
	Body(ctx context.Context, ev *inbox.Event) ([]byte, error)
}

// attempt is one attempt made in a claim's transaction: its outcome as
// EventFinish records it, and the event, for the logs.
type attempt struct {
	storage.AttemptResult
	ev *inbox.Event
	// number is the attempt's number for the event.
	number int
}

// attempt runs one claimed event in tx: routes it, runs its handler under
// a savepoint of its own, and returns the outcome to record. A handler's
// failure is an outcome, not an error; an error means tx is lost (the
// savepoint could not be released or rolled back), and the attempt is
// still returned.
func (p *Processor) attempt(ctx context.Context, tx *storage.Tx, c *claim, ce *storage.ClaimedEvent) (attempt, error) {
	ev := ce.Event
	if ev.SourceKind == "" {
		// Stored before the receiver recorded kinds: the configured map,
		// when there is one, still routes it.
		ev.SourceKind = p.cfg.SourceKinds[ev.Source]
	}
	// A handler sees this attempt's number, as the history will record
	// it; the claimed event keeps the number recorded so far, for a rerun
	// in the claim's fallback.
	recorded := ev.Attempts
	ev.Attempts = recorded + 1
	a := attempt{ev: ev, number: recorded + 1, AttemptResult: storage.AttemptResult{ID: ev.ID, StartedAt: p.clock.Now()}}
	// The body is only this attempt's to hold: the claim's budget counts
	// on it being dropped once the event is done.
	defer func() { ev.Attempts, ce.Body, ce.Payload, ce.BodyLoaded = recorded, nil, nil, false }()

	if ev.FailedAttempts >= p.cfg.MaxAttempts {
		// Every attempt of the run is spent (the maximum was lowered since
		// the last one): nothing runs.
		p.fail(&a, ce, inbox.CauseMaxAttempts,
			fmt.Errorf("%d attempts already failed; the maximum is now %d", ev.FailedAttempts, p.cfg.MaxAttempts), true)
		return a, nil
	}
	h, found := p.reg.Lookup(ev.Source, ev.SourceKind, ev.Type)
	if !found {
		switch p.cfg.Unhandled {
		case UnhandledDeadLetter:
			p.fail(&a, ce, inbox.CauseNoHandler, errNoHandler, true)
		case UnhandledRetry:
			p.fail(&a, ce, inbox.CauseNoHandler, errNoHandler, false)
		default:
			// Nothing runs, so nothing needs a savepoint.
			a.Outcome, a.FinishedAt = inbox.AttemptUnhandled, p.clock.Now()
		}
		return a, nil
	}
	if err := p.body(ctx, ce); err != nil {
		cause := inbox.CauseOf(err)
		p.fail(&a, ce, cause, err, bodyGone(cause))
		return a, nil
	}

	hctx, cancel := context.WithTimeout(ctx, p.cfg.HandlerTimeout)
	defer cancel()
	htx := &handlerTx{outer: tx.Pgx()}
	herr := callHandler(hctx, h, htx, ev)
	if herr == nil && htx.err != nil {
		// Its statements never ran (no savepoint): whatever the handler
		// made of that, its work is not done.
		herr = htx.err
	}
	bctx, bcancel := p.bookkeepingContext(ctx)
	defer bcancel()
	if herr == nil {
		if err := htx.release(bctx); err != nil {
			p.fail(&a, ce, inbox.CauseCommitFailed, err, false)
			return a, fmt.Errorf("release the savepoint of event %d: %w", ev.ID, err)
		}
		a.Outcome, a.FinishedAt = inbox.AttemptHandled, p.clock.Now()
		return a, nil
	}
	if perr := privilegeError(herr, htx.last); perr != nil {
		herr = perr
	}
	cause := causeOf(herr, hctx)
	var pe *panicError
	if errors.As(herr, &pe) {
		p.log.Error("processor: handler panicked", "source", ev.Source, "event_id", ev.EventID, "attempt", a.number,
			"cause", cause, "err", herr, "stack", string(pe.stack))
	}
	p.fail(&a, ce, cause, herr, cause == inbox.CausePermanent)
	if err := htx.rollback(bctx); err != nil {
		return a, fmt.Errorf("roll back the savepoint of event %d: %w", ev.ID, err)
	}
	return a, nil
}

// fail makes a a failed attempt with this cause: the event goes to the
// dead letters when dead says so, or when this failure spends the run's
// MaxAttempts, else it is due again after the backoff.
func (p *Processor) fail(a *attempt, ce *storage.ClaimedEvent, cause inbox.Cause, err error, dead bool) {
	now := p.clock.Now()
	failures := ce.FailedAttempts + 1
	a.Outcome, a.Cause, a.Error, a.FinishedAt = inbox.AttemptFailed, cause, errorText(err), now
	a.Dead = dead || failures >= p.cfg.MaxAttempts
	a.NextAttemptAt = now
	if !a.Dead {
		a.NextAttemptAt = now.Add(p.backoff.Delay(failures))
	}
}

// callHandler runs h, turning a panic into an error of this event alone.
func callHandler(ctx context.Context, h Handler, tx pgx.Tx, ev *Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return h.Handle(ctx, tx, ev)
}

// body makes sure the event's body is in hand for its handler: read with
// the claim (or by loadBodies), or, for an archived event, read back from
// the archive. The payload a handler gets is the body itself when it is
// JSON.
func (p *Processor) body(ctx context.Context, ce *storage.ClaimedEvent) error {
	switch {
	case ce.BodyLoaded:
	case int64(ce.BodySize) > p.cfg.BodyBudget:
		return inbox.Errorf(inbox.CauseBodyOverBudget, "the body (%d bytes) is larger than the processor's body budget (%d bytes)",
			ce.BodySize, p.cfg.BodyBudget)
	case ce.ArchivedAt != nil:
		if p.bodies == nil {
			return inbox.Errorf(inbox.CauseArchiveStoreUnavailable, "the event's body is archived and the processor has no archive to read it from (ARCHIVE_BUCKET)")
		}
		b, err := p.bodies.Body(ctx, ce.Event)
		if err != nil {
			return fmt.Errorf("read the archived body: %w", err)
		}
		ce.Body, ce.BodyLoaded = b, true
		// The archive keeps the body alone; it was stored as JSONB (the
		// payload) when it was JSON.
		ce.HasPayload = json.Valid(b)
	default:
		return inbox.Errorf(inbox.CauseInternal, "the body of event %d was not read", ce.ID)
	}
	if ce.HasPayload {
		ce.Payload = json.RawMessage(ce.Body)
	}
	return nil
}

// loadBodies reads, in tx, the bodies the claim left in the row for the
// next events, as many as fit the body budget (at least the first, when it
// fits alone): the bodies of the events already run have been dropped.
func (p *Processor) loadBodies(ctx context.Context, tx *storage.Tx, next []storage.ClaimedEvent) error {
	var ids []int64
	var size int64
	for i := range next {
		ce := &next[i]
		if ce.BodyLoaded || ce.ArchivedAt != nil || int64(ce.BodySize) > p.cfg.BodyBudget {
			if i == 0 {
				return nil // its body is in hand, in S3, or never will be
			}
			continue
		}
		if size+int64(ce.BodySize) > p.cfg.BodyBudget {
			break
		}
		size += int64(ce.BodySize)
		ids = append(ids, ce.ID)
	}
	if len(ids) == 0 {
		return nil
	}
	bodies, err := tx.EventListBodies(ctx, ids)
	if err != nil {
		return err
	}
	for i := range next {
		if b, ok := bodies[next[i].ID]; ok && b != nil {
			next[i].Body, next[i].BodyLoaded = b, true
		}
	}
	return nil
}

// bodyGone reports whether a body the processor could not read can never
// be had, so that its event dies at once rather than being retried: over
// the claim's budget, an archive object that fails its checks, expunged,
// or past the body retention. Anything else (an archive out of reach, the
// database) may pass, and is retried.
func bodyGone(cause inbox.Cause) bool {
	switch cause {
	case inbox.CauseBodyOverBudget, inbox.CauseArchiveCorrupt, inbox.CauseEventExpunged, inbox.CauseBodyExpired:
		return true
	}
	return false
}
