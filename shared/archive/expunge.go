package archive

import (
	"context"
	"errors"
	"fmt"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Unreachable lists, for an expunge's summary, the copies of a body that
// Expunge cannot erase: an operator must see to them.
var Unreachable = []string{
	"logs: the functions never log a body or an error text quoting one, but a handler's own log lines may quote it: search its log group for the event id",
	"handlers' own tables: what a handler wrote from the body (its effects) is the handler's to erase",
	"database backups and snapshots: they keep the body until they expire (the stack's DatabaseBackupRetentionDays)",
	"copies of the bucket made outside the stack (replication, backups, downloads)",
}

// ExpungeReport says what an expunge found and erased.
type ExpungeReport struct {
	// Event is the event as it was before the expunge.
	Event *inbox.Event
	// AlreadyExpunged: an earlier expunge had erased the row; this one
	// only looked for copies left in the bucket.
	AlreadyExpunged bool
	// In the event's row: payload, body, metadata and last error text.
	Payload, Body, Metadata, LastError bool
	// AttemptErrors is how many of its attempts' error texts were erased
	// (webhook_attempts), DeadLetters how many of its dead letters held a
	// copy (payload, body, error texts).
	AttemptErrors, DeadLetters int
	// ArchiveKey is the object that held the archived body, rewritten
	// without it ("" when the event was not archived or already erased).
	ArchiveKey string
	// Orphans are objects no committed batch owned whose id range held
	// the event, deleted with every version; Versions counts the object
	// versions deleted for good (the rewritten object's old bytes, an
	// earlier upload's, the orphans').
	Orphans  []string
	Versions int
}

// scrubbed is what the report records in the operator action.
func (r ExpungeReport) scrubbed() map[string]any {
	return map[string]any{
		"payload": r.Payload, "body": r.Body, "metadata": r.Metadata, "last_error": r.LastError,
		"attempt_errors": r.AttemptErrors, "dead_letters": r.DeadLetters, "archive_key": r.ArchiveKey,
	}
}

// Expunge erases the body of (source, eventID) everywhere it can reach, on
// request (a privacy erasure), and keeps the event row: its id, type,
// timestamps and hash stay, so a redelivery is still a duplicate and the
// audit trail still says the event existed.
//
//   - Postgres, in one transaction: the event's payload, body and metadata
//     are cleared and expunged_at set; every error text that may quote the
//     body (the event's last_error, each attempt's error in
//     webhook_attempts, the dead letters' errors and last_error) becomes
//     storage.Redacted; the dead letters' payload and body are cleared.
//     Payload mismatches hold hashes and a size only.
//   - S3, when the event is archived: the object is rewritten with the
//     event's gzip member replaced by empty gzip members of the same length
//     (see paddingMembers). The object stays a valid .jsonl.gz without the
//     line, and no other event's offset moves, so nothing else in Postgres
//     changes and readers of other events are never disturbed. The rewrite
//     happens with the event and the object's manifest row locked, so
//     expunges in one object take turns and never undo each other.
//   - S3, other copies (sweepCopies): the noncurrent versions of every
//     object whose key's id range holds the event (the rewritten one's old
//     bytes above all), and every version of such objects no committed
//     batch owns (orphans of batches that never committed), deleted for
//     good: a versioned bucket would otherwise keep the body until its
//     lifecycle expires the old versions.
//
// The expunge is recorded as by's action (webhook_operator_actions, its
// filter holding what was scrubbed in Postgres and the archive key), in
// the transaction that erases the rows. What it cannot reach is listed in
// Unreachable.
//
// It is idempotent: calling it again after any failure finishes the job
// (an expunged event's copies in the bucket are looked for again).
func (a *Archiver) Expunge(ctx context.Context, source, eventID string, by inbox.Actor) (ExpungeReport, error) {
	if by.Name == "" {
		return ExpungeReport{}, inbox.WrapError(inbox.CauseInvalidRequest, storage.ErrNoActor, "no actor")
	}
	rep, err := a.expunge(ctx, source, eventID, by)
	if err != nil {
		return rep, err
	}
	swept, err := a.sweepCopies(ctx, source, rep.Event.ID)
	rep.Orphans, rep.Versions = swept.orphans, swept.versions
	if err != nil {
		return rep, fmt.Errorf("expunge %s/%s: erased from Postgres and its archive object, but copies may remain in the bucket: %w", source, eventID, err)
	}
	a.log.Info("archive: event expunged", "source", source, "event_id", eventID, "actor", by.Name,
		"archived", rep.ArchiveKey != "", "already_expunged", rep.AlreadyExpunged,
		"attempt_errors", rep.AttemptErrors, "dead_letters", rep.DeadLetters,
		"orphans_deleted", len(rep.Orphans), "versions_deleted", rep.Versions)
	return rep, nil
}

// expunge erases the event in one transaction and reports what it erased.
// The event row is locked first (expunges of one event take turns, and an
// expunge waits for an archive batch holding it), then, when it is archived
// and not yet expunged, its object's manifest row while the object is
// rewritten without it, so expunges in one object take turns and never
// undo each other. If the rewrite fails nothing changes in Postgres, and
// calling Expunge again redoes it.
func (a *Archiver) expunge(ctx context.Context, source, eventID string, by inbox.Actor) (ExpungeReport, error) {
	var rep ExpungeReport
	tx, err := a.store.Begin(ctx)
	if err != nil {
		return rep, dbError(err, "expunge event")
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	ev, err := tx.EventGetByKeyForUpdate(ctx, source, eventID)
	switch {
	case errors.Is(err, storage.ErrEventNotFound):
		return rep, inbox.WrapError(inbox.CauseEventNotFound, err, "no such event")
	case err != nil:
		return rep, dbError(err, "expunge event")
	}
	rep.Event, rep.AlreadyExpunged = ev, ev.ExpungedAt != nil
	// An object the retention pass deleted holds nothing to rewrite.
	if ev.ArchiveKey != "" && ev.ExpungedAt == nil && ev.BodyExpiredAt == nil {
		if err := tx.ArchiveObjectLock(ctx, ev.ArchiveKey); err != nil {
			return rep, dbError(err, "expunge event")
		}
		data, err := a.rewriteWithout(ctx, ev)
		if err != nil {
			return rep, err
		}
		if err := tx.ArchiveObjectMarkRewritten(ctx, ev.ArchiveKey, int64(len(data)), sha256Sum(data)); err != nil {
			return rep, dbError(err, "expunge event")
		}
		rep.ArchiveKey = ev.ArchiveKey
	}
	sc, err := tx.EventExpunge(ctx, ev.ID)
	if err != nil {
		return rep, dbError(err, "expunge event")
	}
	rep.Payload, rep.Body, rep.Metadata, rep.LastError = sc.Payload, sc.Body, sc.Metadata, sc.LastError
	if rep.AttemptErrors, err = tx.AttemptExpunge(ctx, ev.ID); err != nil {
		return rep, dbError(err, "expunge event")
	}
	if rep.DeadLetters, err = tx.DeadLetterExpunge(ctx, ev.ID); err != nil {
		return rep, dbError(err, "expunge event")
	}
	selection := map[string]any{"id": ev.ID, "source": source, "event_id": eventID, "scrubbed": rep.scrubbed()}
	if _, err := tx.OperatorActionRecord(ctx, inbox.ActionExpunge, by, selection, []int64{ev.ID}); err != nil {
		return rep, dbError(err, "expunge event")
	}
	if err := tx.Commit(ctx); err != nil {
		return rep, dbError(err, "expunge event")
	}
	return rep, nil
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
	// In a versioned bucket the previous version, with the body, is still
	// there: Expunge's sweepCopies deletes it.
	return data, nil
}
