package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The archiver's queries: selecting and locking a batch, the object manifest
// (webhook_archive_objects, see migration 00004), marking events archived,
// locating a body for read back, and expunging one.

// ErrEventNotFound is returned (wrapped) when no event has the given
// (provider, event_id).
var ErrEventNotFound = errors.New("event not found")

// ErrArchiveObjectCommitted is returned (wrapped) by ArchiveObjectPrepare
// when a committed object already has the key: events point into it, so it
// must never be overwritten by another batch.
var ErrArchiveObjectCommitted = errors.New("archive object already committed")

// DefaultArchiveIdleTimeout bounds how long a batch's transaction may sit
// idle (it is idle while the object uploads). Past it Postgres ends the
// session and so releases the batch's locks, should the archiver hang or its
// Lambda be frozen mid-upload; the batch is then simply redone.
const DefaultArchiveIdleTimeout = 5 * time.Minute

// ArchivableEvent is an event of a batch, with its raw body.
type ArchivableEvent struct {
	ID          int64
	Provider    string
	EventID     string
	EventType   string
	Body        []byte
	BodySHA256  []byte
	BodySize    int
	CreatedAt   time.Time
	ProcessedAt time.Time
}

// EventArchiveParams selects a batch.
type EventArchiveParams struct {
	// ProcessedBefore: only events processed before this instant.
	ProcessedBefore time.Time
	// Limit is the most events in the batch.
	Limit int
	// MaxBytes bounds the batch's total body size (so that a batch of
	// large bodies fits in memory); the first event is always taken, so a
	// body larger than MaxBytes makes a batch of its own. 0 means no bound.
	MaxBytes int64
}

// ArchiveCandidates is the next batch, as chosen by EventArchiveCandidates:
// enough to name its object before reading any body.
type ArchiveCandidates struct {
	Provider string
	// IDs are the events, oldest processed first.
	IDs []int64
	// FirstCreatedAt is the earliest created_at of the events.
	FirstCreatedAt time.Time
}

// eventArchiveCandidatesSQL picks a batch: the oldest archivable event no
// other archiver holds (head), then the oldest archivable events of its
// provider, skipping rows other archivers hold, so that concurrent archivers
// take disjoint batches and never wait for each other. One provider per
// batch keeps one provider per object, so that keys (and Athena partitions)
// can name it. processed_at IS NOT NULL restates the partial index's
// predicate so that the planner uses webhook_events_archivable_idx.
//
// The statement runs on its own (autocommit): its row locks exist only to
// make SKIP LOCKED skip rows others hold, and end with it.
const eventArchiveCandidatesSQL = `
WITH head AS (
    SELECT provider FROM webhook_events
     WHERE processed_at IS NOT NULL AND archived_at IS NULL AND body IS NOT NULL
       AND processed_at < $1
     ORDER BY processed_at, id
     LIMIT 1
     FOR NO KEY UPDATE SKIP LOCKED
)
SELECT e.id, e.provider, e.body_size, e.created_at FROM webhook_events e JOIN head ON e.provider = head.provider
 WHERE e.processed_at IS NOT NULL AND e.archived_at IS NULL AND e.body IS NOT NULL
   AND e.processed_at < $1
 ORDER BY e.processed_at, e.id
 LIMIT $2
 FOR NO KEY UPDATE OF e SKIP LOCKED`

// EventArchiveCandidates chooses the next batch of processed, not yet
// archived events, without keeping them: EventArchiveBegin locks them. No
// event left gives no IDs.
//
// Choosing first and locking later lets the caller record the batch's
// object in the manifest between the two with no transaction open: a batch
// then never needs two connections at once, so archivers sharing a pool
// cannot starve each other of connections.
func (s *Store) EventArchiveCandidates(ctx context.Context, p EventArchiveParams) (ArchiveCandidates, error) {
	var c ArchiveCandidates
	if p.Limit <= 0 {
		return c, fmt.Errorf("choose archive batch: limit %d", p.Limit)
	}
	rows, err := s.pool.Query(ctx, eventArchiveCandidatesSQL, p.ProcessedBefore, p.Limit)
	if err != nil {
		return c, fmt.Errorf("choose archive batch: %w", err)
	}
	defer rows.Close()
	var total int64
	full := false
	for rows.Next() {
		var id int64
		var provider string
		var size int
		var created time.Time
		if err := rows.Scan(&id, &provider, &size, &created); err != nil {
			return c, fmt.Errorf("choose archive batch: %w", err)
		}
		// The batch ends at the first event past the byte budget, so it
		// stays the oldest events in order, and the cut is deterministic:
		// a re-run after a crash chooses the same batch.
		if full || (p.MaxBytes > 0 && len(c.IDs) > 0 && total+int64(size) > p.MaxBytes) {
			full = true
			continue
		}
		if len(c.IDs) == 0 || created.Before(c.FirstCreatedAt) {
			c.FirstCreatedAt = created
		}
		c.Provider = provider
		c.IDs = append(c.IDs, id)
		total += int64(size)
	}
	if err := rows.Err(); err != nil {
		return c, fmt.Errorf("choose archive batch: %w", err)
	}
	return c, nil
}

// ErrArchiveBatchChanged is returned (wrapped) by EventArchiveBegin when the
// batch cannot be locked as chosen: another archiver took some of its
// events, or an orphan sweep took its pending manifest row. Choose again.
var ErrArchiveBatchChanged = errors.New("archive batch changed since it was chosen")

// EventArchiveTx is a batch of events locked for archiving, in an open
// transaction that also holds the batch's pending manifest row: other
// archivers skip these events, expunges of them wait, and no orphan sweep
// touches the object, until it ends. Either EventArchiveMark then Commit,
// or Rollback, which leaves the events as they were. Not safe for
// concurrent use.
type EventArchiveTx struct {
	tx pgx.Tx
	// Events are the batch, oldest processed first.
	Events []ArchivableEvent
}

// EventArchiveBegin opens the batch's transaction: it locks the pending
// manifest row of key (see ArchiveObjectPrepare) and exactly the events of
// c, and reads them. If either is no longer there to lock, it returns
// ErrArchiveBatchChanged.
//
// The event locks are FOR NO KEY UPDATE: they keep other archivers and
// expunges off these rows, but not receivers (ON CONFLICT DO NOTHING takes
// no row lock) nor the dead-letter table's foreign key checks.
// idleTimeout is the transaction's idle_in_transaction_session_timeout; 0
// means DefaultArchiveIdleTimeout.
func (s *Store) EventArchiveBegin(ctx context.Context, key string, c ArchiveCandidates, idleTimeout time.Duration) (*EventArchiveTx, error) {
	if idleTimeout <= 0 {
		idleTimeout = DefaultArchiveIdleTimeout
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock archive batch %s: begin: %w", key, err)
	}
	fail := func(err error) (*EventArchiveTx, error) {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	// set_config(..., true) is SET LOCAL with a parameter: it ends with the
	// transaction.
	if _, err := tx.Exec(ctx, `SELECT set_config('idle_in_transaction_session_timeout', $1, true)`,
		fmt.Sprintf("%dms", idleTimeout.Milliseconds())); err != nil {
		return fail(fmt.Errorf("lock archive batch %s: set idle timeout: %w", key, err))
	}
	var one int
	err = tx.QueryRow(ctx, `SELECT 1 FROM webhook_archive_objects WHERE key = $1 AND committed_at IS NULL FOR UPDATE`, key).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fail(fmt.Errorf("lock archive batch %s: pending manifest row gone: %w", key, ErrArchiveBatchChanged))
	}
	if err != nil {
		return fail(fmt.Errorf("lock archive batch %s: manifest row: %w", key, err))
	}
	// The archivable conditions again: between choosing and locking, an
	// event may have been archived by another archiver, or expunged.
	rows, err := tx.Query(ctx, `
SELECT id, provider, event_id, event_type, body, body_sha256, body_size, created_at, processed_at
  FROM webhook_events
 WHERE id = ANY($1) AND processed_at IS NOT NULL AND archived_at IS NULL AND body IS NOT NULL
 ORDER BY processed_at, id
   FOR NO KEY UPDATE SKIP LOCKED`, c.IDs)
	if err != nil {
		return fail(fmt.Errorf("lock archive batch %s: %w", key, err))
	}
	events, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ArchivableEvent, error) {
		var e ArchivableEvent
		err := r.Scan(&e.ID, &e.Provider, &e.EventID, &e.EventType, &e.Body, &e.BodySHA256, &e.BodySize, &e.CreatedAt, &e.ProcessedAt)
		return e, err
	})
	if err != nil {
		return fail(fmt.Errorf("lock archive batch %s: %w", key, err))
	}
	if len(events) != len(c.IDs) {
		return fail(fmt.Errorf("lock archive batch %s: %d of %d events still archivable and free: %w", key, len(events), len(c.IDs), ErrArchiveBatchChanged))
	}
	return &EventArchiveTx{tx: tx, Events: events}, nil
}

// ArchiveLocation is where one event's bytes are in an object.
type ArchiveLocation struct {
	EventPK int64 // webhook_events.id
	Offset  int64
	Length  int64
}

// EventArchiveMark points the batch's events at the object obj.Key, clears
// their payload and body, and marks the object committed with its size and
// SHA-256. It fails, changing
// nothing once rolled back, unless every location is an event of this batch
// still unarchived.
func (b *EventArchiveTx) EventArchiveMark(ctx context.Context, obj ArchiveObject, locs []ArchiveLocation) error {
	key := obj.Key
	ids := make([]int64, len(locs))
	offs := make([]int64, len(locs))
	lens := make([]int64, len(locs))
	for i, l := range locs {
		ids[i], offs[i], lens[i] = l.EventPK, l.Offset, l.Length
	}
	tag, err := b.tx.Exec(ctx, `
UPDATE webhook_events e
   SET archive_key = $1, archive_offset = u.off, archive_length = u.len,
       archived_at = now(), payload = NULL, body = NULL
  FROM unnest($2::bigint[], $3::bigint[], $4::bigint[]) AS u(id, off, len)
 WHERE e.id = u.id AND e.archived_at IS NULL AND e.body IS NOT NULL`, key, ids, offs, lens)
	if err != nil {
		return fmt.Errorf("mark events archived in %s: %w", key, err)
	}
	if tag.RowsAffected() != int64(len(locs)) {
		return fmt.Errorf("mark events archived in %s: %d of %d events updated", key, tag.RowsAffected(), len(locs))
	}
	tag, err = b.tx.Exec(ctx, `
UPDATE webhook_archive_objects SET committed_at = now(), event_count = $2, size = $3, sha256 = $4
 WHERE key = $1 AND committed_at IS NULL`, key, len(locs), obj.Size, obj.SHA256)
	if err != nil {
		return fmt.Errorf("commit archive object %s: %w", key, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("commit archive object %s: no pending manifest row", key)
	}
	return nil
}

// Commit commits the batch.
func (b *EventArchiveTx) Commit(ctx context.Context) error {
	if err := b.tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit archive batch: %w", err)
	}
	return nil
}

// Rollback ends the batch changing nothing; after Commit it does nothing.
func (b *EventArchiveTx) Rollback(ctx context.Context) error {
	if err := b.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("roll back archive batch: %w", err)
	}
	return nil
}

// ArchiveObject is a manifest row: an S3 object of archived bodies.
type ArchiveObject struct {
	Key      string
	Provider string
	// EventCount, Size and SHA256 are known once committed (zero while
	// pending).
	EventCount  int
	Size        int64
	SHA256      []byte
	CreatedAt   time.Time
	CommittedAt *time.Time
	RewrittenAt *time.Time
}

// ArchiveObjectPrepare records, before anything is uploaded, that the
// object key of provider's batch is about to be written (a pending row). A
// pending row with the same key, left by an earlier attempt at the same
// batch or made by a concurrent archiver that chose the same batch, is kept
// as is: whoever locks it in EventArchiveBegin writes the object. A
// committed row with the key is never touched: it returns
// ErrArchiveObjectCommitted. It commits at once, so that the record
// survives the batch's transaction failing.
func (s *Store) ArchiveObjectPrepare(ctx context.Context, key, provider string) error {
	var committed bool
	err := s.pool.QueryRow(ctx, `
WITH ins AS (
    INSERT INTO webhook_archive_objects (key, provider) VALUES ($1, $2)
    ON CONFLICT (key) DO NOTHING
    RETURNING key
)
SELECT false FROM ins
UNION ALL
SELECT committed_at IS NOT NULL FROM webhook_archive_objects WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM ins)`,
		key, provider).Scan(&committed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// The conflicting row changed after this statement's snapshot
		// (committed or swept): EventArchiveBegin finds out which.
		return nil
	case err != nil:
		return fmt.Errorf("prepare archive object %s: %w", key, err)
	case committed:
		return fmt.Errorf("prepare archive object %s: %w", key, ErrArchiveObjectCommitted)
	}
	return nil
}

// ArchiveObjectGet returns the manifest row of key.
func (s *Store) ArchiveObjectGet(ctx context.Context, key string) (ArchiveObject, error) {
	var o ArchiveObject
	var count *int
	var size *int64
	err := s.pool.QueryRow(ctx, `
SELECT key, provider, event_count, size, sha256, created_at, committed_at, rewritten_at
  FROM webhook_archive_objects WHERE key = $1`, key).Scan(
		&o.Key, &o.Provider, &count, &size, &o.SHA256, &o.CreatedAt, &o.CommittedAt, &o.RewrittenAt)
	if count != nil && size != nil {
		o.EventCount, o.Size = *count, *size
	}
	if err != nil {
		return o, fmt.Errorf("get archive object %s: %w", key, err)
	}
	return o, nil
}

// ArchiveObjectSweep removes up to limit orphans: pending objects no
// transaction holds locked, i.e. uploads whose batch never committed. For
// each it calls remove (which deletes the object from S3) while holding the
// manifest row locked, then deletes the row; a remove error stops the sweep
// and leaves that row for the next one. It returns the keys removed.
func (s *Store) ArchiveObjectSweep(ctx context.Context, limit int, remove func(ctx context.Context, key string) error) ([]string, error) {
	var swept []string
	for len(swept) < limit {
		key, err := s.archiveObjectSweepOne(ctx, remove)
		if err != nil || key == "" {
			return swept, err
		}
		swept = append(swept, key)
	}
	return swept, nil
}

func (s *Store) archiveObjectSweepOne(ctx context.Context, remove func(ctx context.Context, key string) error) (string, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("sweep archive objects: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var key string
	err = tx.QueryRow(ctx, `
SELECT key FROM webhook_archive_objects
 WHERE committed_at IS NULL
 ORDER BY created_at
 LIMIT 1
 FOR UPDATE SKIP LOCKED`).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("sweep archive objects: %w", err)
	}
	if err := remove(ctx, key); err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM webhook_archive_objects WHERE key = $1`, key); err != nil {
		return "", fmt.Errorf("sweep archive object %s: %w", key, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return "", fmt.Errorf("sweep archive object %s: commit: %w", key, err)
	}
	return key, nil
}

// EventBody is where an event's body is: in Body while in Postgres, else at
// ArchiveKey/Offset/Length; neither once expunged.
type EventBody struct {
	ID            int64
	Provider      string
	EventID       string
	Body          []byte
	BodySHA256    []byte
	BodySize      int
	ArchiveKey    *string
	ArchiveOffset int64
	ArchiveLength int64
	ExpungedAt    *time.Time
}

// EventBodyLocate returns where the body of (provider, eventID) is.
func (s *Store) EventBodyLocate(ctx context.Context, provider, eventID string) (EventBody, error) {
	var b EventBody
	var off, length *int64
	err := s.pool.QueryRow(ctx, `
SELECT id, provider, event_id, body, body_sha256, body_size, archive_key, archive_offset, archive_length, expunged_at
  FROM webhook_events WHERE provider = $1 AND event_id = $2`, provider, eventID).Scan(
		&b.ID, &b.Provider, &b.EventID, &b.Body, &b.BodySHA256, &b.BodySize, &b.ArchiveKey, &off, &length, &b.ExpungedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, fmt.Errorf("locate body of %s/%s: %w", provider, eventID, ErrEventNotFound)
	}
	if err != nil {
		return b, fmt.Errorf("locate body of %s/%s: %w", provider, eventID, err)
	}
	if off != nil && length != nil {
		b.ArchiveOffset, b.ArchiveLength = *off, *length
	}
	return b, nil
}

// EventExpungeTarget is the event an expunge erases, as locked.
type EventExpungeTarget struct {
	ID            int64
	Provider      string
	EventID       string
	ArchiveKey    *string
	ArchiveOffset int64
	ArchiveLength int64
	// AlreadyExpunged is true when an earlier expunge committed.
	AlreadyExpunged bool
}

// ArchiveObjectRewrite describes an object after a rewrite.
type ArchiveObjectRewrite struct {
	Size   int64
	SHA256 []byte
}

// EventExpunge erases the body of (provider, eventID) from Postgres: the
// event's payload and body, and the copies in webhook_dead_letters, keeping
// the row (the dedup memory and audit trail) with expunged_at set.
//
// When the event is archived and not yet expunged, rewrite is called first,
// with the event row and the object's manifest row locked, to rewrite the S3
// object without the event; its result updates the manifest. The locks make
// expunges of events in one object take turns, and make an expunge wait for
// an archive batch holding the event. If rewrite fails nothing is changed in
// Postgres, and calling EventExpunge again redoes it.
func (s *Store) EventExpunge(ctx context.Context, provider, eventID string, rewrite func(ctx context.Context, t EventExpungeTarget) (ArchiveObjectRewrite, error)) (EventExpungeTarget, error) {
	var t EventExpungeTarget
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return t, fmt.Errorf("expunge %s/%s: begin: %w", provider, eventID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var off, length *int64
	err = tx.QueryRow(ctx, `
SELECT id, provider, event_id, archive_key, archive_offset, archive_length, expunged_at IS NOT NULL
  FROM webhook_events WHERE provider = $1 AND event_id = $2
   FOR UPDATE`, provider, eventID).Scan(&t.ID, &t.Provider, &t.EventID, &t.ArchiveKey, &off, &length, &t.AlreadyExpunged)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, fmt.Errorf("expunge %s/%s: %w", provider, eventID, ErrEventNotFound)
	}
	if err != nil {
		return t, fmt.Errorf("expunge %s/%s: %w", provider, eventID, err)
	}
	if off != nil && length != nil {
		t.ArchiveOffset, t.ArchiveLength = *off, *length
	}
	if t.ArchiveKey != nil && !t.AlreadyExpunged {
		key := *t.ArchiveKey
		if _, err := tx.Exec(ctx, `SELECT 1 FROM webhook_archive_objects WHERE key = $1 FOR UPDATE`, key); err != nil {
			return t, fmt.Errorf("expunge %s/%s: lock archive object %s: %w", provider, eventID, key, err)
		}
		rw, err := rewrite(ctx, t)
		if err != nil {
			return t, err
		}
		if _, err := tx.Exec(ctx, `
UPDATE webhook_archive_objects SET size = $2, sha256 = $3, rewritten_at = now() WHERE key = $1`,
			key, rw.Size, rw.SHA256); err != nil {
			return t, fmt.Errorf("expunge %s/%s: update archive object %s: %w", provider, eventID, key, err)
		}
	}
	if _, err := tx.Exec(ctx, `
UPDATE webhook_events SET payload = NULL, body = NULL, expunged_at = coalesce(expunged_at, now()),
       -- An event erased before it was processed leaves the drain: there is
       -- nothing left to apply, and it must not reach a handler bodiless.
       outcome = CASE WHEN processed_at IS NULL THEN 'expunged' ELSE outcome END,
       processed_at = coalesce(processed_at, now())
 WHERE id = $1`, t.ID); err != nil {
		return t, fmt.Errorf("expunge %s/%s: %w", provider, eventID, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE webhook_dead_letters SET payload = NULL, body = NULL WHERE event_pk = $1`, t.ID); err != nil {
		return t, fmt.Errorf("expunge %s/%s: dead letters: %w", provider, eventID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return t, fmt.Errorf("expunge %s/%s: commit: %w", provider, eventID, err)
	}
	return t, nil
}
