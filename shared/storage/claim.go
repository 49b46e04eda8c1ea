package storage

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/storage/internal/dbsqlc"
)

// The queries on webhook_claims (queries/webhook_claims.sql): each
// processor's claim, recorded while the claim's transaction holds its
// events (event.go claims, finishes and recovers the events themselves).
// The processor (shared/processor) says how they fit together.

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
