-- Queries on webhook_attempts: one row per processing attempt, for ever.
-- Rows are written by EventFinish and EventRecordInterrupted
-- (webhook_events.sql), in the statements that record the outcome on the
-- event; nothing updates or deletes them.
;

-- name: AttemptListByEvent :many
-- An event's attempts, in order: its processing history.
SELECT * FROM webhook_attempts WHERE event_pk = @event_pk::bigint ORDER BY attempt;
