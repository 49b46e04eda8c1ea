package archive

import (
	"context"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Body retention (Config.BodyRetention): a deployment with data-protection
// duties keeps bodies for so long after receipt, and no longer. Each run
// ends its archiving with a retention pass:
//
//  1. Archive objects whose events were all received before the cutoff
//     (the manifest's last_received_at), one at a time, oldest first: in a
//     transaction holding the object's manifest row (an expunge rewriting
//     it takes the same lock, and concurrent passes skip each other's
//     rows), the object is deleted, then its events are marked
//     (body_expired_at; any body left in a row or a dead letter cleared)
//     and the object recorded expired, and the transaction commits.
//  2. Bodies still in Postgres of processed events received before the
//     cutoff (not archived yet, or retention shorter than MinAge): cleared
//     and marked alike, a chunk at a time.
//
// An object is never deleted while one of its events is within retention,
// however old the others. The rows stay: the source, event id, hash and
// metadata, so a redelivery is still a duplicate, and reads and replays
// answer body_expired. A run stopped between the delete and the commit
// leaves the object gone and its rows unmarked: the next pass picks the
// same object (a delete of a missing key succeeds) and marks them. In a
// versioned bucket the delete leaves the bytes as a noncurrent version,
// which the bucket's lifecycle expires (the archiver may not delete
// versions); the template's retention rule expires current objects as a
// backstop should the pass not run.

// What one pass does at most, so that a run stays bounded like its
// batches; what is left makes the run truncated, and the next run goes on.
const (
	// expireObjectsPerRun bounds the objects one pass deletes: a delete
	// and a transaction each.
	expireObjectsPerRun = 100
	// expireRowChunk and expireRowChunks bound the rows whose bodies one
	// pass clears in Postgres: a statement per chunk.
	expireRowChunk  = 1000
	expireRowChunks = 10
)

// expiry is what a retention pass did.
type expiry struct {
	objects   int
	events    int
	truncated bool
}

// expireBodies runs the retention pass (see above); it does nothing when
// no retention is configured.
func (a *Archiver) expireBodies(ctx context.Context) (expiry, error) {
	var res expiry
	if a.cfg.BodyRetention <= 0 {
		return res, nil
	}
	cutoff := a.now().Add(-a.cfg.BodyRetention)
	for {
		if res.objects >= expireObjectsPerRun || nearDeadline(ctx) {
			res.truncated = true
			return res, nil
		}
		key, n, err := a.expireObject(ctx, cutoff)
		if err != nil {
			return res, err
		}
		if key == "" {
			break
		}
		res.objects++
		res.events += n
	}
	for range expireRowChunks {
		if nearDeadline(ctx) {
			res.truncated = true
			return res, nil
		}
		n, err := a.store.EventExpireBodies(ctx, cutoff, expireRowChunk)
		if err != nil {
			return res, dbError(err, "clear bodies past retention")
		}
		res.events += int(n)
		if n < expireRowChunk {
			return res, nil
		}
	}
	res.truncated = true
	return res, nil
}

// expireObject deletes the oldest object past retention and marks its
// events; "" when none is left (or every one is held by another pass or an
// expunge). The delete is done holding the manifest row, and the marks
// commit after it: a failure in between leaves the object for the next
// pass, which deletes it again (a no-op) and marks the rows.
func (a *Archiver) expireObject(ctx context.Context, cutoff time.Time) (string, int, error) {
	tx, err := a.store.Begin(ctx)
	if err != nil {
		return "", 0, dbError(err, "expire archive objects")
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// The transaction is idle while S3 deletes; should the run freeze
	// there, Postgres ends it and releases the row.
	if err := tx.PGSetIdleInTransactionTimeout(ctx, idleTimeout); err != nil {
		return "", 0, dbError(err, "expire archive objects")
	}
	o, ok, err := tx.ArchiveObjectLockExpirable(ctx, cutoff)
	if err != nil || !ok {
		return "", 0, dbErrorOrNil(err, "expire archive objects")
	}
	if err := a.blobs.Delete(ctx, o.Key); err != nil {
		return "", 0, storeError(err, "delete archive object past retention")
	}
	n, err := a.markExpired(ctx, tx, o)
	if err != nil {
		return "", 0, err
	}
	a.log.Info("archive: object past body retention deleted", "key", o.Key, "events", n, "first_id", o.FirstID, "last_id", o.LastID,
		"retention_days", int(a.cfg.BodyRetention/(24*time.Hour)))
	return o.Key, n, nil
}

// markExpired marks o's events and o itself expired and commits tx.
func (a *Archiver) markExpired(ctx context.Context, tx *storage.Tx, o storage.ExpirableObject) (int, error) {
	n, err := tx.EventExpireArchived(ctx, o)
	if err != nil {
		return 0, dbError(err, "mark events past retention")
	}
	if err := tx.ArchiveObjectMarkExpired(ctx, o.Key); err != nil {
		return 0, dbError(err, "mark events past retention")
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, dbError(err, "mark events past retention")
	}
	return int(n), nil
}

// nearDeadline reports whether the context's deadline is closer than the
// reserve a run keeps to end in good order.
func nearDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < reserve
}

// nextExpiry returns when the retention pass will next have work, or nil:
// the stored object whose events come past retention first. Bodies still
// in Postgres are armed for by their archiving (they expire no later than
// they come of age when retention is longer than MinAge, and armNext arms
// by the oldest processed one otherwise).
func (a *Archiver) nextExpiry(ctx context.Context) (*time.Time, error) {
	if a.cfg.BodyRetention <= 0 {
		return nil, nil
	}
	t, err := a.store.ArchiveObjectGetNextExpiry(ctx)
	if err != nil || t == nil {
		return nil, err
	}
	at := t.Add(a.cfg.BodyRetention)
	return &at, nil
}
