package archive

import (
	"context"
	"errors"
	"fmt"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Expunge erases the body of (provider, eventID) everywhere, on request (a
// privacy erasure), and keeps the event row: its id, type, timestamps and
// hash stay, so a redelivery is still a duplicate and the audit trail still
// says the event existed.
//
//   - Postgres: payload and body are cleared (also the dead-letter copy) and
//     expunged_at is set, in one transaction.
//   - S3, when the event is archived: the object is rewritten with the
//     event's gzip member replaced by empty gzip members of the same length
//     (see paddingMembers). The object stays a valid .jsonl.gz without the
//     line, and no other event's offset moves, so nothing else in Postgres
//     changes and readers of other events are never disturbed. The rewrite
//     happens with the event and the object's manifest row locked, so
//     expunges in one object take turns and never undo each other.
//   - Orphan objects (uploads whose batch never committed) may hold a copy
//     of a body that is not archived; Expunge sweeps them.
//
// It is idempotent: calling it again after any failure finishes the job.
// The archive bucket must not keep object versions (or must expire
// noncurrent versions quickly): a rewrite does not delete the previous
// version of an object. See docs/archiver.md.
func (a *Archiver) Expunge(ctx context.Context, provider, eventID string) error {
	t, err := a.store.EventExpunge(ctx, provider, eventID, a.rewriteWithout)
	if err != nil {
		var ie *inbox.Error
		switch {
		case errors.Is(err, storage.ErrEventNotFound):
			return inbox.WrapError(inbox.CauseEventNotFound, err, "no such event")
		case errors.As(err, &ie):
			return err
		default:
			return dbError(err, "expunge event")
		}
	}
	if _, err := a.SweepOrphans(ctx); err != nil {
		return fmt.Errorf("expunge %s/%s: erased from Postgres and its archive object, but orphan objects remain to be checked: %w", provider, eventID, err)
	}
	a.log.Info("archive: event expunged", "source", provider, "event_id", eventID,
		"archived", t.ArchiveKey != nil, "already_expunged", t.AlreadyExpunged)
	return nil
}

// rewriteWithout rewrites the object holding t without t's line.
func (a *Archiver) rewriteWithout(ctx context.Context, t storage.EventExpungeTarget) (storage.ArchiveObjectRewrite, error) {
	key := *t.ArchiveKey
	data, err := a.blobs.Get(ctx, key)
	if err != nil {
		return storage.ArchiveObjectRewrite{}, storeError(err, "read archive object to expunge from")
	}
	corrupt := func(err error) (storage.ArchiveObjectRewrite, error) {
		return storage.ArchiveObjectRewrite{}, inbox.WrapError(inbox.CauseArchiveCorrupt,
			fmt.Errorf("expunge %s/%s from %s [%d,+%d): %w: %w", t.Provider, t.EventID, key, t.ArchiveOffset, t.ArchiveLength, ErrCorrupt, err),
			"archive object does not hold the event where recorded")
	}
	off, n := t.ArchiveOffset, t.ArchiveLength
	if off < 0 || n <= 0 || off+n > int64(len(data)) {
		return corrupt(fmt.Errorf("range outside the %d-byte object", len(data)))
	}
	// Check that the range is this event's member before overwriting it:
	// wrong offsets must never erase another event's body.
	_, err = bodyFromMember(data[off:off+n], t.ID, t.Provider, t.EventID)
	switch {
	case errors.Is(err, errEmptyMember):
		// An earlier expunge rewrote the object but did not commit.
		return rewriteOf(data), nil
	case err != nil:
		return corrupt(err)
	}
	pad, err := paddingMembers(n)
	if err != nil {
		return corrupt(err)
	}
	copy(data[off:off+n], pad)
	put, err := a.blobs.Put(ctx, key, data, ContentType)
	if err != nil {
		return storage.ArchiveObjectRewrite{}, storeError(err, "rewrite archive object")
	}
	if err := a.confirm(ctx, key, put.SHA256, int64(len(data))); err != nil {
		return storage.ArchiveObjectRewrite{}, err
	}
	if put.VersionID != "" {
		// The previous version, with the body, is still in the bucket.
		a.log.Warn("archive: the archive bucket keeps versions; the expunged body remains in the object's previous version until it expires",
			"cause", "archive_bucket_versioned", "key", key, "source", t.Provider, "event_id", t.EventID)
	}
	return rewriteOf(data), nil
}

func rewriteOf(data []byte) storage.ArchiveObjectRewrite {
	sum := sha256Sum(data)
	return storage.ArchiveObjectRewrite{Size: int64(len(data)), SHA256: sum}
}
