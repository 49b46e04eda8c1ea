-- +goose NO TRANSACTION
-- +goose Up

-- The events processed without a handler (outcome 'unhandled'), newest
-- first, for the events list's "unhandled" filter (the console's): without
-- it the list walks every id down until it has found a page, the whole
-- table when few are unhandled. Only such rows are in it; the processor's
-- update that sets the outcome is no HOT update anyway (it changes
-- processed_at, in webhook_events_due_idx's predicate). Built
-- CONCURRENTLY, as 00007.
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_unhandled_idx;
CREATE INDEX CONCURRENTLY webhook_events_unhandled_idx
    ON webhook_events (id)
    WHERE outcome = 'unhandled';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_unhandled_idx;
