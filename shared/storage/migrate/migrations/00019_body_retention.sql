-- +goose Up

-- Body retention: a deployment with data-protection duties keeps event
-- bodies for a configured number of days (ARCHIVE_BODY_RETENTION_DAYS);
-- the archiver's retention pass then deletes the archive objects whose
-- events are all past it and clears any body still in Postgres, while the
-- row (the dedup key, the hash, the metadata, the processing record) stays,
-- so that a redelivery is still a duplicate.
--
-- body_expired_at says when the pass removed the event's body: its
-- archive object deleted (or, for a body never archived, the row's payload
-- and body cleared). Reads and replays then say "expired" rather than
-- failing on a missing object. Fixed width: it stays in the row.
ALTER TABLE webhook_events ADD COLUMN body_expired_at TIMESTAMPTZ;

-- An object may be deleted only when every event in it is past retention,
-- so the manifest keeps, per object, the newest receipt among its events
-- (last_received_at) and the range of their ids (first_id, last_id), which
-- finds its rows through the primary key rather than a scan for its key.
-- expired_at is when the pass deleted the object; the row stays, so that
-- its key is never reused and the stats can leave it out.
ALTER TABLE webhook_archive_objects
    ADD COLUMN first_id         BIGINT,
    ADD COLUMN last_id          BIGINT,
    ADD COLUMN last_received_at TIMESTAMPTZ,
    ADD COLUMN expired_at       TIMESTAMPTZ;

-- The objects committed before this migration learn their span from their
-- events, in one pass over the table. An object committed by an archiver
-- older than this migration (between the migration and the functions'
-- update) has none: the pass then judges it by when it was recorded, which
-- is after every one of its events was received, so never too early.
UPDATE webhook_archive_objects o
   SET first_id = m.first_id, last_id = m.last_id, last_received_at = m.last_received_at
  FROM (SELECT archive_key, min(id) AS first_id, max(id) AS last_id, max(created_at) AS last_received_at
          FROM webhook_events WHERE archive_key IS NOT NULL GROUP BY archive_key) m
 WHERE o.key = m.archive_key AND o.committed_at IS NOT NULL;

-- No index for the pass: the manifest holds one row per object (a
-- thousand events each by default), which it reads whole in a moment, and
-- an index on an expression would hide its statistics from the roles that
-- estimate the tables' bloat.

-- +goose Down
ALTER TABLE webhook_archive_objects
    DROP COLUMN first_id, DROP COLUMN last_id, DROP COLUMN last_received_at, DROP COLUMN expired_at;
ALTER TABLE webhook_events DROP COLUMN body_expired_at;
