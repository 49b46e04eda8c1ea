-- +goose Up

-- The processor (shared/processor) drains webhook_events exactly once. 00001
-- already holds its bookkeeping columns (attempts, next_attempt_at,
-- locked_until, last_error, outcome, dead_at); this migration adds what the
-- drain needs beyond them. Both columns are added with a constant default or
-- none, which PostgreSQL 11+ does without rewriting the table.

-- errors is the event's error history, one object per failed attempt:
--   {"attempt": 2, "at": "...", "cause": "handler_failed", "error": "..."}
-- It is appended by statements that run outside the handler's transaction,
-- so a rolled-back attempt still leaves its trace, and it is copied to
-- webhook_dead_letters.errors when the event dies: the whole history, not
-- only last_error, is what an operator needs to decide on a requeue.
-- Invariant the drain relies on: for an event that is neither processed nor
-- running, attempts = jsonb_array_length(errors). A claim that finds more
-- attempts than entries knows the last attempt never finished (the
-- processor was killed or timed out) and records it as "lease_expired".
-- The history is bounded by the processor's maximum attempts, and a requeue
-- resets it (the dead letter keeps the copy).
ALTER TABLE webhook_events
    ADD COLUMN errors JSONB NOT NULL DEFAULT '[]'::jsonb
        CONSTRAINT webhook_events_errors_is_array CHECK (jsonb_typeof(errors) = 'array');

-- locked_by is the claim token written together with locked_until: every
-- later write of the claimer (start of an attempt, processed, failure, dead
-- letter, release) is conditional on it. A processor whose lease passed and
-- whose events were claimed again by another one then changes nothing: its
-- late writes match no row. It also tells an operator which processor holds
-- a row (pg_stat_activity shows the connections, this shows the rows).
-- NULL when the row is not claimed.
ALTER TABLE webhook_events ADD COLUMN locked_by TEXT;

-- The dead letters of one event: requeue finds the event of a dead letter
-- by its primary key, but inspection goes the other way (every dead letter
-- of this event), and an index on the foreign key keeps that cheap.
CREATE INDEX webhook_dead_letters_event_pk_idx ON webhook_dead_letters (event_pk);

-- +goose Down
DROP INDEX webhook_dead_letters_event_pk_idx;
ALTER TABLE webhook_events DROP COLUMN locked_by;
ALTER TABLE webhook_events DROP COLUMN errors;
