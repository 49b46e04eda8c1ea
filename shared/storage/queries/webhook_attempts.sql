-- Queries on webhook_attempts: one row per processing attempt, for ever.
-- Rows are written by EventFinish and EventRecordInterrupted
-- (webhook_events.sql), in the statements that record the outcome on the
-- event; nothing deletes them, and only an expunge changes them
-- (AttemptExpunge).
;

-- name: AttemptListByEvent :many
-- An event's attempts, in order: its processing history.
SELECT * FROM webhook_attempts WHERE event_pk = @event_pk::bigint ORDER BY attempt;

-- name: AttemptExpunge :execrows
-- An expunge's erasure of an event's attempt history: each error text
-- (which a handler may have written quoting the body) becomes @redacted;
-- the attempt's number, times, outcome and cause code stay. Returns how
-- many texts it erased.
UPDATE webhook_attempts SET error = @redacted::text
 WHERE event_pk = @event_pk::bigint AND error NOT IN ('', @redacted::text);
