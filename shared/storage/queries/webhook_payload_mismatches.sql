-- Queries on webhook_payload_mismatches: a stored event's anomalies. A
-- redelivery whose body differs from the stored event's (cause
-- payload_mismatch: the event stays a duplicate, the first body wins), and
-- the stored body of a guarded source posted under another id (cause
-- suspected_replay: never stored, never processed). The record lets an
-- operator see either. event_id is always the stored event's.
;

-- name: PayloadMismatchInsert :execrows
-- Records one anomaly unless the stored event has @cap records already: a
-- sender, or whoever replays its captured deliveries, cannot grow the
-- table without limit (at most @cap rows per stored event, a few more when
-- receivers race at the cap). The count stops at @cap over
-- webhook_payload_mismatches_event_idx.
INSERT INTO webhook_payload_mismatches (provider, event_id, stored_sha256, received_sha256, received_size, cause,
                                        received_event_id, received_event_type)
SELECT @source::text, @event_id::text, @stored_sha256::bytea, @received_sha256::bytea, @received_size::int, @cause::text,
       sqlc.narg('received_event_id')::text, sqlc.narg('received_event_type')::text
 WHERE (SELECT count(*) FROM (SELECT 1 FROM webhook_payload_mismatches
                               WHERE provider = @source::text AND event_id = @event_id::text LIMIT @cap::int) n) < @cap::int;

-- name: PayloadMismatchCountByEvent :one
SELECT count(*) FROM webhook_payload_mismatches WHERE provider = @source::text AND event_id = @event_id::text;

-- name: PayloadMismatchListByEvent :many
-- The anomalies of one event, oldest first.
SELECT * FROM webhook_payload_mismatches
 WHERE provider = @source::text AND event_id = @event_id::text ORDER BY received_at, id;

-- name: PayloadMismatchCountBySource :many
-- Anomalies since @since per source and cause, largest first, over
-- webhook_payload_mismatches_received_idx (00009): the window's rows, not
-- the table.
SELECT provider, cause, count(*) AS count, max(received_at) AS last_at
  FROM webhook_payload_mismatches WHERE received_at >= @since::timestamptz
 GROUP BY provider, cause ORDER BY count(*) DESC, provider, cause;
