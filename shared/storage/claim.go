package storage

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/internal/dbsqlc"
)

// The processor's queries: claims of events (webhook_events.sql, run in the
// transaction that runs them) and the claims table (webhook_claims.sql).
// The processor (shared/processor) says how they fit together.

// ClaimedEvent is an event a claim locked, as the processor gets it: the
// event without its payload, and its body when the claim's budget held it.
type ClaimedEvent struct {
	*inbox.Event
	// BodyLoaded reports that Body holds the body. When false, the body is
	// still in the row, beyond the claim's body budget (EventListBodies
	// reads it), or, for an event replayed from the archive (ArchivedAt
	// set), in S3.
	BodyLoaded bool
	// HasPayload reports that the row holds the body as JSONB: the body is
	// JSON, and a handler is handed it as the payload too.
	HasPayload bool
}

// ClaimParams is one claim.
type ClaimParams struct {
	// Now is the processor's clock: events due at or before it are taken.
	Now time.Time
	// Max is how many events the claim takes at most.
	Max int
	// BodyBudget bounds the bytes of bodies the claim reads (see
	// ClaimedEvent.BodyLoaded).
	BodyBudget int64
}

// Due says what a claim would find now.
type Due struct {
	// Solo: an event that must run alone; Batch: one that may run in a
	// batch; Expired: a claim past its lease, to recover.
	Solo, Batch, Expired bool
}

// EventGetDue tells whether a claim would find anything at now, locking
// nothing.
func (e executor) EventGetDue(ctx context.Context, now time.Time) (Due, error) {
	r, err := queries.EventGetDue(ctx, e.db, now)
	if err != nil {
		return Due{}, fmt.Errorf("look for due events: %w", err)
	}
	return Due{Solo: r.Solo, Batch: r.Batch, Expired: r.Expired}, nil
}

// EventClaimBatch locks up to p.Max due events that may run together,
// oldest due first, until the transaction ends: run it on the *Tx that
// runs them (see the query). Events of recorded claims are left out.
func (e executor) EventClaimBatch(ctx context.Context, p ClaimParams) ([]ClaimedEvent, error) {
	rows, err := queries.EventClaimBatch(ctx, e.db, dbsqlc.EventClaimBatchParams{Now: p.Now, Max: int32(p.Max), BodyBudget: p.BodyBudget})
	if err != nil {
		return nil, fmt.Errorf("claim events: %w", err)
	}
	return claimedFromRows(rows)
}

// EventClaimSolo locks the oldest due event that must run alone, if any,
// as EventClaimBatch does.
func (e executor) EventClaimSolo(ctx context.Context, now time.Time, bodyBudget int64) ([]ClaimedEvent, error) {
	rows, err := queries.EventClaimSolo(ctx, e.db, dbsqlc.EventClaimSoloParams{Now: now, BodyBudget: bodyBudget})
	if err != nil {
		return nil, fmt.Errorf("claim an event to run alone: %w", err)
	}
	batch := make([]dbsqlc.EventClaimBatchRow, len(rows))
	for i, r := range rows {
		batch[i] = dbsqlc.EventClaimBatchRow(r)
	}
	return claimedFromRows(batch)
}

func claimedFromRows(rows []dbsqlc.EventClaimBatchRow) ([]ClaimedEvent, error) {
	out := make([]ClaimedEvent, len(rows))
	for i, r := range rows {
		ev := &inbox.Event{
			ID: r.ID, Source: r.Source, SourceKind: r.SourceKind, EventID: r.EventID, Type: r.EventType,
			BodySHA256: r.BodySHA256, BodySize: int(r.BodySize), CreatedAt: r.CreatedAt,
			Attempts: int(r.Attempts), FailedAttempts: int(r.FailedAttempts), NextAttemptAt: r.NextAttemptAt,
			ArchiveKey: deref(r.ArchiveKey), ArchiveOffset: deref(r.ArchiveOffset), ArchiveLength: deref(r.ArchiveLength),
			ArchivedAt: r.ArchivedAt,
		}
		if r.BodyLoaded {
			ev.Body = r.Body
		}
		if err := decodeJSON(r.Metadata, &ev.Metadata); err != nil {
			return nil, fmt.Errorf("claim events: event %d: metadata: %w", r.ID, err)
		}
		out[i] = ClaimedEvent{Event: ev, BodyLoaded: r.BodyLoaded && r.Body != nil, HasPayload: r.HasPayload}
	}
	return out, nil
}

// EventListBodies reads the bodies of claimed events, by id (a missing id
// has no entry; a body erased meanwhile is nil).
func (e executor) EventListBodies(ctx context.Context, ids []int64) (map[int64][]byte, error) {
	rows, err := queries.EventListBodies(ctx, e.db, ids)
	if err != nil {
		return nil, fmt.Errorf("read %d claimed bodies: %w", len(ids), err)
	}
	out := make(map[int64][]byte, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Body
	}
	return out, nil
}

// EventLockClaimed locks again one event of a claim for its fallback;
// false when it is processed or dead already.
func (e executor) EventLockClaimed(ctx context.Context, id int64) (bool, error) {
	_, err := queries.EventLockClaimed(ctx, e.db, id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("lock claimed event %d: %w", id, err)
	}
	return true, nil
}

// AttemptResult is the outcome of one attempt, for EventFinish.
type AttemptResult struct {
	ID      int64
	Outcome inbox.AttemptOutcome
	// Cause and Error describe a failure ("" otherwise).
	Cause inbox.Cause
	Error string
	// StartedAt and FinishedAt bound the attempt (the processor's clock).
	StartedAt  time.Time
	FinishedAt time.Time
	// NextAttemptAt is when a failed event is due again (unless Dead).
	NextAttemptAt time.Time
	// Dead moves a failed event to the dead letters (EventDeadLetter then
	// copies it, in the same transaction).
	Dead bool
}

// EventFinishParams records the attempts of one transaction's events.
type EventFinishParams struct {
	Processor string
	// BatchSize is how many events the transaction ran.
	BatchSize int
	Results   []AttemptResult
}

// EventFinish records each result on its event and in the attempt history
// (see the query), in the transaction that ran them, and returns how many
// it recorded: fewer than given means some event was no longer to be
// processed, which a claim's row locks rule out.
func (e executor) EventFinish(ctx context.Context, p EventFinishParams) (int, error) {
	n := len(p.Results)
	arg := dbsqlc.EventFinishParams{
		Processor: p.Processor, BatchSize: int32(p.BatchSize),
		IDs: make([]int64, n), Outcomes: make([]string, n), Causes: make([]string, n), Errors: make([]string, n),
		StartedAt: make([]time.Time, n), FinishedAt: make([]time.Time, n), NextAttemptAt: make([]time.Time, n), Dead: make([]bool, n),
	}
	for i, r := range p.Results {
		arg.IDs[i], arg.Outcomes[i], arg.Causes[i], arg.Errors[i] = r.ID, string(r.Outcome), string(r.Cause), r.Error
		arg.StartedAt[i], arg.FinishedAt[i], arg.Dead[i] = r.StartedAt, r.FinishedAt, r.Dead
		arg.NextAttemptAt[i] = r.NextAttemptAt
		if r.NextAttemptAt.IsZero() {
			arg.NextAttemptAt[i] = r.FinishedAt // unused unless failed; never NULL in the array
		}
	}
	rows, err := queries.EventFinish(ctx, e.db, arg)
	if err != nil {
		return 0, fmt.Errorf("record the attempts of %d events: %w", n, err)
	}
	return len(rows), nil
}

// EventDeadLetter copies the events just marked dead (by EventFinish or
// EventRecordInterrupted, in this transaction) into the dead letters and
// returns the dead letters' ids by event.
func (e executor) EventDeadLetter(ctx context.Context, ids []int64) (map[int64]int64, error) {
	rows, err := queries.EventDeadLetter(ctx, e.db, ids)
	if err != nil {
		return nil, fmt.Errorf("dead-letter %d events: %w", len(ids), err)
	}
	out := make(map[int64]int64, len(rows))
	for _, r := range rows {
		out[r.EventPK] = r.ID
	}
	return out, nil
}

// Claim is a processor's claim (webhook_claims).
type Claim struct {
	Processor string
	Token     string
	EventIDs  []int64
	ClaimedAt time.Time
	// LockedUntil is the lease's end (zero in ClaimLockExpired's rows).
	LockedUntil time.Time
}

// ClaimSet records c as its processor's claim, committed asynchronously
// (see the query): run it on the *Store, while the claim's transaction
// holds the events.
func (e executor) ClaimSet(ctx context.Context, c Claim) error {
	err := queries.ClaimSet(ctx, e.db, dbsqlc.ClaimSetParams{
		Processor: c.Processor, Token: c.Token, EventIDs: c.EventIDs, ClaimedAt: c.ClaimedAt, LockedUntil: c.LockedUntil,
	})
	if err != nil {
		return fmt.Errorf("record claim %s of %d events: %w", c.Token, len(c.EventIDs), err)
	}
	return nil
}

// ClaimRelease empties the processor's claim token; false when it is no
// longer that claim (recovered by another processor).
func (e executor) ClaimRelease(ctx context.Context, processor, token string, now time.Time) (bool, error) {
	n, err := queries.ClaimRelease(ctx, e.db, dbsqlc.ClaimReleaseParams{Processor: processor, Token: token, Now: now})
	if err != nil {
		return false, fmt.Errorf("release claim %s: %w", token, err)
	}
	return n == 1, nil
}

// ClaimLock locks the processor's claim token against recovery until the
// transaction ends; false when it is no longer that claim.
func (e executor) ClaimLock(ctx context.Context, processor, token string) (bool, error) {
	_, err := queries.ClaimLock(ctx, e.db, dbsqlc.ClaimLockParams{Processor: processor, Token: token})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("lock claim %s: %w", token, err)
	}
	return true, nil
}

// ClaimLockExpired locks up to max claims past their lease at now, for
// their recovery in this transaction, in which statements then wait at
// most lockTimeout for a row lock (SQLSTATE 55P03 past it).
func (e executor) ClaimLockExpired(ctx context.Context, now time.Time, max int, lockTimeout time.Duration) ([]Claim, error) {
	rows, err := queries.ClaimLockExpired(ctx, e.db, dbsqlc.ClaimLockExpiredParams{
		Now: now, Max: int32(max), LockTimeout: strconv.FormatInt(lockTimeout.Milliseconds(), 10),
	})
	if err != nil {
		return nil, fmt.Errorf("find expired claims: %w", err)
	}
	out := make([]Claim, len(rows))
	for i, r := range rows {
		out[i] = Claim{Processor: r.Processor, Token: r.Token, EventIDs: r.EventIDs, ClaimedAt: deref(r.ClaimedAt)}
	}
	return out, nil
}

// ClaimDeleteIdle deletes the empty claims of processors idle since before
// idleBefore and returns how many.
func (e executor) ClaimDeleteIdle(ctx context.Context, idleBefore time.Time) (int, error) {
	n, err := queries.ClaimDeleteIdle(ctx, e.db, idleBefore)
	if err != nil {
		return 0, fmt.Errorf("delete idle claims: %w", err)
	}
	return int(n), nil
}

// ClaimListLive returns the claims holding events whose lease has not
// passed at now, oldest first.
func (e executor) ClaimListLive(ctx context.Context, now time.Time) ([]Claim, error) {
	rows, err := queries.ClaimListLive(ctx, e.db, now)
	if err != nil {
		return nil, fmt.Errorf("list claims: %w", err)
	}
	out := make([]Claim, len(rows))
	for i, r := range rows {
		out[i] = Claim{Processor: r.Processor, Token: r.Token, EventIDs: r.EventIDs, ClaimedAt: deref(r.ClaimedAt), LockedUntil: deref(r.LockedUntil)}
	}
	return out, nil
}

// InterruptedAttempt is one event of an expired claim.
type InterruptedAttempt struct {
	ID int64
	// StartedAt is when its claim was made; Processor the claim's;
	// BatchSize how many events the claim held.
	StartedAt time.Time
	Processor string
	BatchSize int
}

// EventRecordInterruptedParams records the attempts of expired claims.
type EventRecordInterruptedParams struct {
	Now         time.Time
	MaxAttempts int
	Cause       inbox.Cause
	Error       string
	Attempts    []InterruptedAttempt
}

// RecordedInterruption is an interrupted attempt as recorded.
type RecordedInterruption struct {
	ID      int64
	Source  string
	EventID string
	Attempt int
	// Dead reports the event moved to the dead letters (EventDeadLetter
	// copies it next, in the same transaction).
	Dead bool
}

// EventRecordInterrupted records the interrupted attempt of each event
// still to be processed (see the query); an event processed meanwhile is
// left out of the result.
func (e executor) EventRecordInterrupted(ctx context.Context, p EventRecordInterruptedParams) ([]RecordedInterruption, error) {
	n := len(p.Attempts)
	arg := dbsqlc.EventRecordInterruptedParams{
		Cause: string(p.Cause), Error: p.Error, Now: p.Now, MaxAttempts: int32(p.MaxAttempts),
		IDs: make([]int64, n), StartedAt: make([]time.Time, n), Processors: make([]string, n), BatchSizes: make([]int32, n),
	}
	for i, a := range p.Attempts {
		arg.IDs[i], arg.StartedAt[i], arg.Processors[i], arg.BatchSizes[i] = a.ID, a.StartedAt, a.Processor, int32(a.BatchSize)
	}
	rows, err := queries.EventRecordInterrupted(ctx, e.db, arg)
	if err != nil {
		return nil, fmt.Errorf("record %d interrupted attempts: %w", n, err)
	}
	out := make([]RecordedInterruption, len(rows))
	for i, r := range rows {
		out[i] = RecordedInterruption{ID: r.ID, Source: r.Source, EventID: r.EventID, Attempt: int(r.Attempts), Dead: r.Dead}
	}
	return out, nil
}

// AttemptExpunge replaces the error text of each of an event's attempts
// with Redacted (an expunge: a handler's error may quote the body) and
// returns how many it replaced.
func (e executor) AttemptExpunge(ctx context.Context, eventPK int64) (int, error) {
	n, err := queries.AttemptExpunge(ctx, e.db, dbsqlc.AttemptExpungeParams{EventPK: eventPK, Redacted: Redacted})
	if err != nil {
		return 0, fmt.Errorf("expunge attempt errors of event %d: %w", eventPK, err)
	}
	return int(n), nil
}

// AttemptListByEvent returns an event's attempts, in order.
func (e executor) AttemptListByEvent(ctx context.Context, eventPK int64) ([]inbox.Attempt, error) {
	rows, err := queries.AttemptListByEvent(ctx, e.db, eventPK)
	if err != nil {
		return nil, fmt.Errorf("list attempts of event %d: %w", eventPK, err)
	}
	out := make([]inbox.Attempt, len(rows))
	for i, r := range rows {
		out[i] = inbox.Attempt{
			EventPK: r.EventPK, Number: int(r.Attempt), StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
			Outcome: inbox.AttemptOutcome(r.Outcome), Cause: inbox.Cause(r.Cause), Error: r.Error, Dead: r.Dead,
			Processor: r.Processor, BatchSize: int(r.BatchSize),
		}
	}
	return out, nil
}

// AttemptCountByBucket counts the attempts that finished in each bucket
// of b, by outcome; buckets without attempts are absent.
func (e executor) AttemptCountByBucket(ctx context.Context, b Buckets) ([]AttemptBucket, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	rows, err := queries.AttemptCountByBucket(ctx, e.db, dbsqlc.AttemptCountByBucketParams{BucketSeconds: b.Width.Seconds(), Since: b.Since, Until: b.Until})
	if err != nil {
		return nil, fmt.Errorf("count attempts by time: %w", err)
	}
	out := make([]AttemptBucket, len(rows))
	for i, r := range rows {
		out[i] = AttemptBucket{At: r.Bucket, Processed: r.Processed, Failed: r.Failed, Dead: r.Dead}
	}
	return out, nil
}
