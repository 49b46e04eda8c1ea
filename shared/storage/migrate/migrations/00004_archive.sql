-- +goose Up

-- webhook_archive_objects is the archiver's manifest: one row per S3 object
-- holding archived bodies.
--
-- Why a table and not just the archive_key column of webhook_events: the
-- archiver uploads an object BEFORE the transaction that points events at it
-- commits (so that a payload is never cleared before its copy is safe). An
-- upload whose transaction then never commits (a crash, a Lambda timeout,
-- the database going away) leaves an object that no event references: an
-- orphan, which costs storage and, worse, keeps copies of bodies that an
-- expunge would not find. So the row is written first (committed_at NULL:
-- pending), and the batch's transaction locks it, uploads, and sets
-- committed_at together with the events' archive columns. A pending row that
-- no transaction holds locked is therefore an orphan for sure: the archiver
-- deletes its object, then the row (FOR UPDATE SKIP LOCKED, so never one
-- being written).
--
-- Committed rows serialise rewrites of an object: an expunge locks the row
-- while it rewrites the object without one event, so that two expunges in
-- the same object cannot undo each other.
CREATE TABLE webhook_archive_objects (
    key          TEXT        PRIMARY KEY,
    provider     TEXT        NOT NULL,
    -- event_count, size and sha256 describe the object as committed (and
    -- after each rewrite); a pending row may not know them yet, since it is
    -- written before the batch's bodies are read.
    event_count  INTEGER     CHECK (event_count > 0),
    size         BIGINT      CHECK (size > 0),
    sha256       BYTEA       CHECK (octet_length(sha256) = 32),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- committed_at is set in the transaction that archives the events; NULL
    -- means pending (being written, or an orphan once unlocked).
    committed_at TIMESTAMPTZ,
    -- rewritten_at is the last expunge that rewrote the object.
    rewritten_at TIMESTAMPTZ,
    CONSTRAINT webhook_archive_objects_committed_complete
        CHECK (committed_at IS NULL OR (event_count IS NOT NULL AND size IS NOT NULL AND sha256 IS NOT NULL))
);

-- The orphan sweep reads pending rows only; committed ones, almost all of
-- them, stay out of the index.
CREATE INDEX webhook_archive_objects_pending_idx
    ON webhook_archive_objects (created_at)
    WHERE committed_at IS NULL;

-- +goose Down
DROP TABLE webhook_archive_objects;
