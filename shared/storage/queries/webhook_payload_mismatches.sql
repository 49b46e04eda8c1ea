-- Queries on webhook_payload_mismatches: redeliveries whose body differs
-- from the stored event's. The event stays a duplicate (the first body
-- wins); the record lets an operator see a sender that changed an event
-- under one id.
;

-- name: PayloadMismatchInsert :exec
INSERT INTO webhook_payload_mismatches (provider, event_id, stored_sha256, received_sha256, received_size)
VALUES (@source::text, @event_id::text, @stored_sha256::bytea, @received_sha256::bytea, @received_size::int);

-- name: PayloadMismatchCountByEvent :one
SELECT count(*) FROM webhook_payload_mismatches WHERE provider = @source::text AND event_id = @event_id::text;

-- name: PayloadMismatchListByEvent :many
-- The mismatching redeliveries of one event, oldest first.
SELECT * FROM webhook_payload_mismatches
 WHERE provider = @source::text AND event_id = @event_id::text ORDER BY received_at, id;

-- name: PayloadMismatchCountBySource :many
-- Mismatching redeliveries since @since per source, largest first.
SELECT provider, count(*) AS count, max(received_at) AS last_at
  FROM webhook_payload_mismatches WHERE received_at >= @since::timestamptz
 GROUP BY provider ORDER BY count(*) DESC, provider;
