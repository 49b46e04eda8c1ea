-- Queries on webhook_archive_objects, the archiver's manifest: one row per
-- S3 object of archived bodies (see migration 00004 for why). A pending row
-- (committed_at NULL) is written before anything is uploaded; the batch's
-- transaction locks it and commits it with the events' archive columns. A
-- pending row no transaction holds locked is an orphan for sure.
;

-- name: ArchiveObjectPrepare :one
-- Records, before anything is uploaded, that a batch's object key is about
-- to be written. A pending row with the key (an earlier attempt at the same
-- batch, or a concurrent archiver that chose it) is kept as is; committed
-- says whether a committed row holds the key. No row: the conflicting row
-- changed after this statement's snapshot (committed or swept); locking it
-- tells which.
WITH ins AS (
    INSERT INTO webhook_archive_objects (key, provider) VALUES (@key::text, @source::text)
    ON CONFLICT (key) DO NOTHING
    RETURNING key
)
SELECT false AS committed FROM ins
UNION ALL
SELECT committed_at IS NOT NULL FROM webhook_archive_objects WHERE key = @key::text AND NOT EXISTS (SELECT 1 FROM ins);

-- name: ArchiveObjectLockPending :one
-- Locks a batch's pending row for the batch's transaction. No row: it was
-- swept or committed meanwhile.
SELECT key FROM webhook_archive_objects WHERE key = @key::text AND committed_at IS NULL FOR UPDATE;

-- name: ArchiveObjectLockAbandoned :one
-- Locks the pending row of a batch its archiver abandoned (it failed after
-- recording the row, in a live process), so that the archiver's own sweep
-- removes its object at once; a row another archiver holds (it chose the
-- same batch) is skipped.
SELECT key FROM webhook_archive_objects WHERE key = @key::text AND committed_at IS NULL FOR UPDATE SKIP LOCKED;

-- name: ArchiveObjectCommit :execrows
-- Marks a pending object committed with its size and hash, in the
-- transaction that points its events at it, and the span of its events
-- (their ids, the newest receipt), which the retention pass judges it by.
UPDATE webhook_archive_objects SET committed_at = now(), event_count = @event_count::int, size = @size::bigint, sha256 = @sha256::bytea,
       first_id = @first_id::bigint, last_id = @last_id::bigint, last_received_at = @last_received_at::timestamptz
 WHERE key = @key::text AND committed_at IS NULL;

-- name: ArchiveObjectGet :one
SELECT * FROM webhook_archive_objects WHERE key = @key::text;

-- name: ArchiveObjectLockOrphan :one
-- The oldest pending object no transaction holds, recorded before
-- @created_before: an upload whose batch never committed. Locked, so that
-- two sweeps never take the same one. A row recorded since is left alone:
-- a live batch records its row, then locks it in its transaction, and a
-- sweep between the two would take it from under the batch.
SELECT key FROM webhook_archive_objects
 WHERE committed_at IS NULL AND created_at < @created_before::timestamptz
 ORDER BY created_at
 LIMIT 1
 FOR UPDATE SKIP LOCKED;

-- name: ArchiveObjectDelete :exec
DELETE FROM webhook_archive_objects WHERE key = @key::text;

-- name: ArchiveObjectLock :exec
-- Locks a committed object while an expunge rewrites it: expunges in one
-- object take turns and never undo each other.
SELECT key FROM webhook_archive_objects WHERE key = @key::text FOR UPDATE;

-- name: ArchiveObjectMarkRewritten :exec
UPDATE webhook_archive_objects SET size = @size::bigint, sha256 = @sha256::bytea, rewritten_at = now() WHERE key = @key::text;

-- name: ArchiveObjectGetStats :one
-- The committed objects (count, bytes, events) and the pending ones. The
-- manifest is small: one row per object.
-- Objects the retention pass deleted (expired_at) are no longer stored.
SELECT count(*) FILTER (WHERE committed_at IS NOT NULL AND expired_at IS NULL) AS objects,
       coalesce(sum(size) FILTER (WHERE committed_at IS NOT NULL AND expired_at IS NULL), 0)::bigint AS object_bytes,
       coalesce(sum(event_count) FILTER (WHERE committed_at IS NOT NULL AND expired_at IS NULL), 0)::bigint AS archived_events,
       count(*) FILTER (WHERE committed_at IS NULL) AS pending_objects
  FROM webhook_archive_objects;

-- name: ArchiveObjectListCommitted :many
-- Which of @keys are committed objects: the sweep of objects found by
-- listing the bucket never touches those.
SELECT key FROM webhook_archive_objects WHERE key = ANY(@keys::text[]) AND committed_at IS NOT NULL;

-- name: ArchiveObjectLockUnrecorded :one
-- Locks the pending row of an object found by listing the bucket, for the
-- sweep's transaction, which has just recorded it (ArchiveObjectPrepare)
-- if no row held the key: while the sweep holds it, no batch can lock the
-- key, upload to it or commit it. No row: a batch holds it (SKIP LOCKED),
-- or it is committed.
SELECT key FROM webhook_archive_objects WHERE key = @key::text AND committed_at IS NULL FOR UPDATE SKIP LOCKED;

-- name: ArchiveObjectLockExpirable :one
-- The stored object whose newest event was received longest ago, if that
-- is before @received_before (every event in it is past retention), for
-- the retention pass's transaction. Locked without waiting: concurrent
-- passes take different objects, and an expunge rewriting it (which holds
-- the same lock) finishes first. An object committed without its span (by
-- an archiver older than its columns) is judged by when it was recorded,
-- after all its events were received. first_id and last_id, when unknown,
-- span every id.
SELECT key, coalesce(first_id, 0)::bigint AS first_id, coalesce(last_id, 9223372036854775807)::bigint AS last_id
  FROM webhook_archive_objects
 WHERE committed_at IS NOT NULL AND expired_at IS NULL
   AND coalesce(last_received_at, created_at) < @received_before::timestamptz
 ORDER BY coalesce(last_received_at, created_at)
 LIMIT 1
 FOR UPDATE SKIP LOCKED;

-- name: ArchiveObjectMarkExpired :execrows
-- Records that the retention pass deleted the object, in the transaction
-- that marks its events.
UPDATE webhook_archive_objects SET expired_at = now() WHERE key = @key::text AND expired_at IS NULL;

-- name: ArchiveObjectGetNextExpiry :one
-- When the next stored object comes past retention: the earliest newest
-- receipt (or recording) among them; no row when no object is stored.
-- The archiver arms its next run from it.
SELECT coalesce(last_received_at, created_at)::timestamptz AS next_at
  FROM webhook_archive_objects
 WHERE committed_at IS NOT NULL AND expired_at IS NULL
 ORDER BY coalesce(last_received_at, created_at)
 LIMIT 1;
