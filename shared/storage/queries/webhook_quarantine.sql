-- Queries on webhook_quarantine (migration 00020): the deliveries to a
-- configured source refused for their signature or their signed time,
-- kept for an operator to re-ingest once the source's secrets are fixed.
-- The receiver inserts (within the cap per source); the operator lists,
-- shows, re-ingests (each verified again in Go), purges, and an expunge
-- erases the copies of an event it finds here. The processor never reads
-- it.
;

-- name: QuarantineInsert :execrows
-- Keeps a refused delivery unless its source already holds @cap of them:
-- 0 rows then, counted by the receiver. The count stops at the cap, on
-- the (provider, id) index. Two receivers may both see cap-1 and both
-- insert, so the cap holds within the receivers running at once.
INSERT INTO webhook_quarantine (provider, source_kind, cause, request_id, received_at, headers, body, body_sha256, body_size)
SELECT @source::text, @source_kind::text, @cause::text, @request_id::text, @received_at::timestamptz,
       sqlc.arg('headers')::text::jsonb, @body::bytea, @body_sha256::bytea, @body_size::int
 WHERE (SELECT count(*) FROM (SELECT 1 FROM webhook_quarantine WHERE provider = @source::text LIMIT @cap::int) held) < @cap::int;

-- name: QuarantineListPage :many
-- A page of the selected deliveries, newest first, before the cursor
-- @before (0: the first page); no body, no headers.
SELECT id, provider, source_kind, cause, request_id, received_at, body_sha256, body_size, tried_at, last_cause, last_error
  FROM webhook_quarantine
 WHERE (@id::bigint = 0 OR id = @id::bigint)
   AND (@source::text = '' OR provider = @source::text)
   AND (sqlc.narg('from')::timestamptz IS NULL OR received_at >= sqlc.narg('from')::timestamptz)
   AND (sqlc.narg('to')::timestamptz IS NULL OR received_at < sqlc.narg('to')::timestamptz)
   AND (@before::bigint = 0 OR id < @before::bigint)
 ORDER BY id DESC
 LIMIT @max::int;

-- name: QuarantineGetByID :one
-- One delivery, its headers and body included.
SELECT * FROM webhook_quarantine WHERE id = @id::bigint;

-- name: QuarantineCount :one
-- How many deliveries a re-ingest or a purge of the selection would take.
SELECT count(*)::int FROM webhook_quarantine
 WHERE (@id::bigint = 0 OR id = @id::bigint)
   AND (@source::text = '' OR provider = @source::text)
   AND (sqlc.narg('from')::timestamptz IS NULL OR received_at >= sqlc.narg('from')::timestamptz)
   AND (sqlc.narg('to')::timestamptz IS NULL OR received_at < sqlc.narg('to')::timestamptz);

-- name: QuarantineListForReingest :many
-- The selected deliveries after the id @after, whole, oldest first, locked
-- so that two re-ingests (or a re-ingest and a purge) take turns over
-- each; at most @max, so that a re-ingest holds a few bodies at a time.
SELECT * FROM webhook_quarantine
 WHERE id > @after::bigint
   AND (@id::bigint = 0 OR id = @id::bigint)
   AND (@source::text = '' OR provider = @source::text)
   AND (sqlc.narg('from')::timestamptz IS NULL OR received_at >= sqlc.narg('from')::timestamptz)
   AND (sqlc.narg('to')::timestamptz IS NULL OR received_at < sqlc.narg('to')::timestamptz)
 ORDER BY id
 LIMIT @max::int
   FOR UPDATE;

-- name: QuarantineDelete :execrows
-- Removes deliveries a re-ingest stored (or found stored already).
DELETE FROM webhook_quarantine WHERE id = ANY(@ids::bigint[]);

-- name: QuarantineMarkFailed :exec
-- Says why a re-ingest still refused a delivery, which stays.
UPDATE webhook_quarantine SET tried_at = @tried_at::timestamptz, last_cause = @last_cause::text, last_error = @last_error::text
 WHERE id = @id::bigint;

-- name: QuarantinePurge :execrows
-- Deletes the selected deliveries (a purge names an id or a source).
DELETE FROM webhook_quarantine
 WHERE (@id::bigint = 0 OR id = @id::bigint)
   AND (@source::text = '' OR provider = @source::text)
   AND (sqlc.narg('from')::timestamptz IS NULL OR received_at >= sqlc.narg('from')::timestamptz)
   AND (sqlc.narg('to')::timestamptz IS NULL OR received_at < sqlc.narg('to')::timestamptz);

-- name: QuarantineCountCopies :one
-- The quarantined copies of a stored event, for an expunge: of its source,
-- with its body (by hash), or carrying its event id as the whole value of
-- a kept header (the id header of the kinds that send one: GitHub's
-- X-GitHub-Delivery, Standard Webhooks' webhook-id, Shopify's
-- X-Shopify-Webhook-Id). Nothing of the row is trusted: a forged copy
-- claiming the id is erased with the real ones.
SELECT count(*)::int FROM webhook_quarantine q
 WHERE q.provider = @source::text
   AND (q.body_sha256 = @body_sha256::bytea
        OR EXISTS (SELECT 1 FROM jsonb_each(q.headers) h, jsonb_array_elements_text(h.value) v WHERE v = @event_id::text));

-- name: QuarantineDeleteCopies :execrows
-- Erases what QuarantineCountCopies counts.
DELETE FROM webhook_quarantine q
 WHERE q.provider = @source::text
   AND (q.body_sha256 = @body_sha256::bytea
        OR EXISTS (SELECT 1 FROM jsonb_each(q.headers) h, jsonb_array_elements_text(h.value) v WHERE v = @event_id::text));
