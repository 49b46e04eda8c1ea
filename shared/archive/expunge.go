package archive

import (
	"context"
	"errors"
	"fmt"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Expunge erases the body of (source, eventID) everywhere, on request (a
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
// The expunge is recorded as by's action (webhook_operator_actions), in
// the transaction that erases the body.
//
// It is idempotent: calling it again after any failure finishes the job.
// The archive bucket must not keep object versions (or must expire
// noncurrent versions quickly): a rewrite does not delete the previous
// version of an object. See docs/archiver.md.
func (a *Archiver) Expunge(ctx context.Context, source, eventID string, by inbox.Actor) error {
	if by.Name == "" {
		return inbox.WrapError(inbox.CauseInvalidRequest, storage.ErrNoActor, "no actor")
	}
	ev, err := a.expunge(ctx, source, eventID, by)
	if err != nil {
		return err
	}
	if _, err := a.SweepOrphans(ctx); err != nil {
		return fmt.Errorf("expunge %s/%s: erased from Postgres and its archive object, but orphan objects remain to be checked: %w", source, eventID, err)
	}
	a.log.Info("archive: event expunged", "source", source, "event_id", eventID, "actor", by.Name,
		"archived", ev.ArchiveKey != "", "already_expunged", ev.ExpungedAt != nil)
	return nil
}

// expunge erases the event in one transaction and returns it as it was.
// The event row is locked first (expunges of one event take turns, and an
// expunge waits for an archive batch holding it), then, when it is archived
// and not yet expunged, its object's manifest row while the object is
// rewritten without it, so expunges in one object take turns and never
// undo each other. If the rewrite fails nothing changes in Postgres, and
// calling Expunge again redoes it.
func (a *Archiver) expunge(ctx context.Context, source, eventID string, by inbox.Actor) (*inbox.Event, error) {
	tx, err := a.store.Begin(ctx)
	if err != nil {
		return nil, dbError(err, "expunge event")
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	ev, err := tx.EventGetByKeyForUpdate(ctx, source, eventID)
	switch {
	case errors.Is(err, storage.ErrEventNotFound):
		return nil, inbox.WrapError(inbox.CauseEventNotFound, err, "no such event")
	case err != nil:
		return nil, dbError(err, "expunge event")
	}
	if ev.ArchiveKey != "" && ev.ExpungedAt == nil {
		if err := tx.ArchiveObjectLock(ctx, ev.ArchiveKey); err != nil {
			return nil, dbError(err, "expunge event")
		}
		data, err := a.rewriteWithout(ctx, ev)
		if err != nil {
			return nil, err
		}
		if err := tx.ArchiveObjectMarkRewritten(ctx, ev.ArchiveKey, int64(len(data)), sha256Sum(data)); err != nil {
			return nil, dbError(err, "expunge event")
		}
	}
	if err := tx.EventExpunge(ctx, ev.ID); err != nil {
		return nil, dbError(err, "expunge event")
	}
	if err := tx.DeadLetterExpunge(ctx, ev.ID); err != nil {
		return nil, dbError(err, "expunge event")
	}
	selection := map[string]any{"id": ev.ID, "source": source, "event_id": eventID}
	if _, err := tx.OperatorActionRecord(ctx, inbox.ActionExpunge, by, selection, []int64{ev.ID}); err != nil {
		return nil, dbError(err, "expunge event")
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, dbError(err, "expunge event")
	}
	return ev, nil
}

// rewriteWithout rewrites the object holding ev without ev's line and
// returns the object as now stored.
func (a *Archiver) rewriteWithout(ctx context.Context, ev *inbox.Event) ([]byte, error) {
	key := ev.ArchiveKey
	data, err := a.blobs.Get(ctx, key)
	if err != nil {
		return nil, storeError(err, "read archive object to expunge from")
	}
	corrupt := func(err error) ([]byte, error) {
		return nil, inbox.WrapError(inbox.CauseArchiveCorrupt,
			fmt.Errorf("expunge %s/%s from %s [%d,+%d): %w: %w", ev.Source, ev.EventID, key, ev.ArchiveOffset, ev.ArchiveLength, ErrCorrupt, err),
			"archive object does not hold the event where recorded")
	}
	off, n := ev.ArchiveOffset, ev.ArchiveLength
	if off < 0 || n <= 0 || off+n > int64(len(data)) {
		return corrupt(fmt.Errorf("range outside the %d-byte object", len(data)))
	}
	// Check that the range is this event's member before overwriting it:
	// wrong offsets must never erase another event's body.
	_, err = bodyFromMember(data[off:off+n], ev.ID, ev.Source, ev.EventID)
	switch {
	case errors.Is(err, errEmptyMember):
		// An earlier expunge rewrote the object but did not commit.
		return data, nil
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
		return nil, storeError(err, "rewrite archive object")
	}
	if err := a.confirm(ctx, key, put.SHA256, int64(len(data))); err != nil {
		return nil, err
	}
	if put.VersionID != "" {
		// The previous version, with the body, is still in the bucket.
		a.log.Warn("archive: the archive bucket keeps versions; the expunged body remains in the object's previous version until it expires",
			"cause", "archive_bucket_versioned", "key", key, "source", ev.Source, "event_id", ev.EventID)
	}
	return data, nil
}
