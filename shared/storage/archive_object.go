package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/internal/dbsqlc"
)

// The queries on webhook_archive_objects, the archiver's manifest
// (queries/webhook_archive_objects.sql). The archive package owns the
// order of operations around them (see its doc): storage never calls S3.

// ErrArchiveObjectCommitted is returned (wrapped) by ArchiveObjectPrepare
// when a committed object already has the key: events point into it, so it
// must never be overwritten by another batch.
var ErrArchiveObjectCommitted = errors.New("archive object already committed")

// ArchiveObjectPrepare records, before anything is uploaded, that the
// object key of source's batch is about to be written (a pending row),
// committed at once on a *Store so that the record survives the batch's
// transaction failing. A pending row with the same key is kept as is:
// whoever locks it (ArchiveObjectLockPending) writes the object.
func (e executor) ArchiveObjectPrepare(ctx context.Context, key, source string) error {
	committed, err := queries.ArchiveObjectPrepare(ctx, e.db, dbsqlc.ArchiveObjectPrepareParams{Key: key, Source: source})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// The conflicting row changed after this statement's snapshot
		// (committed or swept): locking it finds out which.
		return nil
	case err != nil:
		return fmt.Errorf("prepare archive object %s: %w", key, err)
	case committed:
		return fmt.Errorf("prepare archive object %s: %w", key, ErrArchiveObjectCommitted)
	}
	return nil
}

// ArchiveObjectLockAbandoned locks the pending row of key, which its own
// archiver abandoned, unless another transaction holds it; ok=false when
// it is held, committed or gone.
func (e executor) ArchiveObjectLockAbandoned(ctx context.Context, key string) (bool, error) {
	_, err := queries.ArchiveObjectLockAbandoned(ctx, e.db, key)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("lock abandoned archive object: %w", err)
	}
	return true, nil
}

// ArchiveObjectLockPending locks the pending row of key for the
// transaction it runs in; ok=false when it is gone (swept, or committed by
// another archiver).
func (e executor) ArchiveObjectLockPending(ctx context.Context, key string) (bool, error) {
	_, err := queries.ArchiveObjectLockPending(ctx, e.db, key)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("lock archive object %s: %w", key, err)
	}
	return true, nil
}

// ArchiveObjectCommit marks the pending object o.Key committed with its
// event count, size and SHA-256.
func (e executor) ArchiveObjectCommit(ctx context.Context, o inbox.ArchiveObject) error {
	n, err := queries.ArchiveObjectCommit(ctx, e.db, dbsqlc.ArchiveObjectCommitParams{
		Key: o.Key, EventCount: int32(o.EventCount), Size: o.Size, SHA256: o.SHA256,
		FirstID: o.FirstID, LastID: o.LastID, LastReceivedAt: deref(o.LastReceivedAt),
	})
	if err != nil {
		return fmt.Errorf("commit archive object %s: %w", o.Key, err)
	}
	if n != 1 {
		return fmt.Errorf("commit archive object %s: no pending manifest row", o.Key)
	}
	return nil
}

// ArchiveObjectGet returns the manifest row of key.
func (e executor) ArchiveObjectGet(ctx context.Context, key string) (*inbox.ArchiveObject, error) {
	r, err := queries.ArchiveObjectGet(ctx, e.db, key)
	if err != nil {
		return nil, fmt.Errorf("get archive object %s: %w", key, err)
	}
	return &inbox.ArchiveObject{
		Key: r.Key, Source: r.Source, EventCount: int(deref(r.EventCount)), Size: deref(r.Size), SHA256: r.SHA256,
		CreatedAt: r.CreatedAt, CommittedAt: r.CommittedAt, RewrittenAt: r.RewrittenAt,
		FirstID: deref(r.FirstID), LastID: deref(r.LastID), LastReceivedAt: r.LastReceivedAt, ExpiredAt: r.ExpiredAt,
	}, nil
}

// ArchiveObjectLockOrphan locks the oldest orphan (a pending object no
// transaction holds: its batch never committed) recorded before
// createdBefore, for the transaction it runs in; ok=false when there is
// none.
func (e executor) ArchiveObjectLockOrphan(ctx context.Context, createdBefore time.Time) (string, bool, error) {
	key, err := queries.ArchiveObjectLockOrphan(ctx, e.db, createdBefore)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("find orphan archive objects: %w", err)
	}
	return key, true, nil
}

// ArchiveObjectDelete removes the manifest row of key.
func (e executor) ArchiveObjectDelete(ctx context.Context, key string) error {
	if err := queries.ArchiveObjectDelete(ctx, e.db, key); err != nil {
		return fmt.Errorf("delete archive object %s: %w", key, err)
	}
	return nil
}

// ArchiveObjectLock locks the manifest row of key for the transaction it
// runs in, while an expunge rewrites the object.
func (e executor) ArchiveObjectLock(ctx context.Context, key string) error {
	if err := queries.ArchiveObjectLock(ctx, e.db, key); err != nil {
		return fmt.Errorf("lock archive object %s: %w", key, err)
	}
	return nil
}

// ArchiveObjectMarkRewritten records an object's new size and hash after
// an expunge rewrote it.
func (e executor) ArchiveObjectMarkRewritten(ctx context.Context, key string, size int64, sha256 []byte) error {
	if err := queries.ArchiveObjectMarkRewritten(ctx, e.db, dbsqlc.ArchiveObjectMarkRewrittenParams{Key: key, Size: size, SHA256: sha256}); err != nil {
		return fmt.Errorf("update archive object %s: %w", key, err)
	}
	return nil
}

// ArchiveObjectStats sums the manifest.
type ArchiveObjectStats struct {
	// Objects, ObjectBytes and ArchivedEvents sum the committed objects
	// (events counted as archived, expunged ones included).
	Objects        int64
	ObjectBytes    int64
	ArchivedEvents int64
	// PendingObjects are rows not committed: batches being written, or
	// orphans the next run sweeps.
	PendingObjects int64
}

// ArchiveObjectGetStats reads the manifest's totals.
func (e executor) ArchiveObjectGetStats(ctx context.Context) (ArchiveObjectStats, error) {
	r, err := queries.ArchiveObjectGetStats(ctx, e.db)
	if err != nil {
		return ArchiveObjectStats{}, fmt.Errorf("read archive objects: %w", err)
	}
	return ArchiveObjectStats(r), nil
}

// ArchiveObjectListCommitted returns which of keys are committed objects.
func (e executor) ArchiveObjectListCommitted(ctx context.Context, keys []string) ([]string, error) {
	out, err := queries.ArchiveObjectListCommitted(ctx, e.db, keys)
	if err != nil {
		return nil, fmt.Errorf("list committed archive objects: %w", err)
	}
	return out, nil
}

// ArchiveObjectLockUnrecorded locks the pending row of key without
// waiting; ok=false when a batch holds it or it is committed. The orphan
// sweep of listed objects records the key first (ArchiveObjectPrepare) in
// the same transaction.
func (e executor) ArchiveObjectLockUnrecorded(ctx context.Context, key string) (bool, error) {
	_, err := queries.ArchiveObjectLockUnrecorded(ctx, e.db, key)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("lock listed archive object %s: %w", key, err)
	}
	return true, nil
}

// ExpirableObject is a stored archive object whose events are all past
// the body retention: its key, and the range of its events' ids.
type ExpirableObject struct {
	Key             string
	FirstID, LastID int64
}

// ArchiveObjectLockExpirable locks, for the retention pass's transaction,
// the stored object whose newest event was received longest ago, when
// that is before receivedBefore; ok=false when there is none (or every
// one is held by another pass or an expunge).
func (e executor) ArchiveObjectLockExpirable(ctx context.Context, receivedBefore time.Time) (ExpirableObject, bool, error) {
	r, err := queries.ArchiveObjectLockExpirable(ctx, e.db, receivedBefore)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ExpirableObject{}, false, nil
	case err != nil:
		return ExpirableObject{}, false, fmt.Errorf("find archive objects past retention: %w", err)
	}
	return ExpirableObject(r), true, nil
}

// ArchiveObjectMarkExpired records that the retention pass deleted the
// object key.
func (e executor) ArchiveObjectMarkExpired(ctx context.Context, key string) error {
	if _, err := queries.ArchiveObjectMarkExpired(ctx, e.db, key); err != nil {
		return fmt.Errorf("mark archive object %s expired: %w", key, err)
	}
	return nil
}

// ArchiveObjectGetNextExpiry returns the newest receipt among the events
// of the stored object that comes past retention first; nil when no
// object is stored.
func (e executor) ArchiveObjectGetNextExpiry(ctx context.Context) (*time.Time, error) {
	t, err := queries.ArchiveObjectGetNextExpiry(ctx, e.db)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("find the next archive object to expire: %w", err)
	}
	return &t, nil
}
