-- +goose NO TRANSACTION
-- +goose Up

-- body_guard marks the events of sources whose event id the signature does
-- not cover (github, shopify, an hmac source with an unsigned id header):
-- for them a captured signed body can be posted again under a fresh id,
-- with any event type. The unique index below stores each such body once
-- per source: the receiver's insert (ON CONFLICT DO NOTHING, no target)
-- turns a second id for a stored body into a conflict, which it answers as
-- a suspected replay, never as a new event. Two requests with one body at
-- once cannot both insert: the index serialises them as the key does.
-- Rows stored before this migration are false, so building the index
-- needs no clean-up of bodies that were stored twice, and events of the
-- other kinds (their id is signed or in the signed body) add no index
-- entry at all. ADD COLUMN with a constant default rewrites nothing.
ALTER TABLE webhook_events ADD COLUMN IF NOT EXISTS body_guard BOOLEAN NOT NULL DEFAULT false;

-- Built CONCURRENTLY (hence no transaction), as 00007: a plain build would
-- hold off the receivers' inserts while it reads the whole table. A failed
-- concurrent build leaves an invalid index, which the DROP clears on the
-- rerun.
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_body_guard_key;
CREATE UNIQUE INDEX CONCURRENTLY webhook_events_body_guard_key
    ON webhook_events (provider, body_sha256)
    WHERE body_guard;

-- webhook_payload_mismatches also records suspected replays: cause says
-- which ('payload_mismatch': the stored id with another body;
-- 'suspected_replay': a stored body under another id, received_event_id,
-- with received_event_type). The row's event_id is the stored event's, so
-- an event's anomalies are listed together, and the receiver caps them per
-- stored event: no request pattern grows the table without limit.
ALTER TABLE webhook_payload_mismatches ADD COLUMN IF NOT EXISTS cause TEXT NOT NULL DEFAULT 'payload_mismatch';
ALTER TABLE webhook_payload_mismatches ADD COLUMN IF NOT EXISTS received_event_id TEXT;
ALTER TABLE webhook_payload_mismatches ADD COLUMN IF NOT EXISTS received_event_type TEXT;

-- The statistics (PayloadMismatchCountBySource) read a window of recent
-- rows by received_at; without this index they read the whole table.
DROP INDEX CONCURRENTLY IF EXISTS webhook_payload_mismatches_received_idx;
CREATE INDEX CONCURRENTLY webhook_payload_mismatches_received_idx
    ON webhook_payload_mismatches (received_at, provider);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_payload_mismatches_received_idx;
ALTER TABLE webhook_payload_mismatches DROP COLUMN IF EXISTS received_event_type;
ALTER TABLE webhook_payload_mismatches DROP COLUMN IF EXISTS received_event_id;
ALTER TABLE webhook_payload_mismatches DROP COLUMN IF EXISTS cause;
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_body_guard_key;
ALTER TABLE webhook_events DROP COLUMN IF EXISTS body_guard;
