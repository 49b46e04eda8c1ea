-- +goose NO TRANSACTION
-- +goose Up

-- An operator closes a dead letter without running its event again
-- (resolve): the dead letter is then no longer open, as a requeued one is
-- not, and leaves every open count (the console, the stats, the
-- processor's DeadLettersOpen gauge and so the DeadLettersOpenAlarm). The
-- action that resolved it is in webhook_operator_action_events with its
-- reason; resolved_at says when, and that it was resolved rather than
-- requeued. A discarded event (never run) needs no column: it is finished
-- with outcome 'discarded' (and a resolved dead letter's event with
-- outcome 'resolved'), processed_at set, so that it leaves
-- webhook_events_due_idx and the archiver archives its body as any
-- other's. outcome has no check constraint, so neither needs one.
ALTER TABLE webhook_dead_letters ADD COLUMN IF NOT EXISTS resolved_at timestamptz;

-- The open dead letters are now those neither requeued nor resolved: the
-- two partial indexes that hold exactly them (00003's, for the counts by
-- source and type and the processor's gauge, an index-only scan; 00011's,
-- for the list paged by id) are built again with the new predicate, under
-- new names so that the old ones serve until the new ones are valid.
-- Built CONCURRENTLY, as 00007: the processor inserts dead letters while
-- this runs.
DROP INDEX CONCURRENTLY IF EXISTS webhook_dead_letters_unresolved_idx;
CREATE INDEX CONCURRENTLY webhook_dead_letters_unresolved_idx
    ON webhook_dead_letters (provider, event_type, dead_at)
    WHERE requeued_at IS NULL AND resolved_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS webhook_dead_letters_unresolved_id_idx;
CREATE INDEX CONCURRENTLY webhook_dead_letters_unresolved_id_idx
    ON webhook_dead_letters (id)
    WHERE requeued_at IS NULL AND resolved_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS webhook_dead_letters_open_idx;
DROP INDEX CONCURRENTLY IF EXISTS webhook_dead_letters_open_id_idx;

-- The bulk actions' new filters need no index of their own. The failure
-- cause is the last attempt's (webhook_attempts.cause), read by primary
-- key (event_pk, attempt) for each row the other predicates keep; the
-- error text is a bounded, case-insensitive substring of last_error,
-- which no btree serves. Both are applied to rows an index already
-- bounds: the open dead letters (above), the due events
-- (webhook_events_due_idx, a discard's), or the processed events of a
-- replay's source, type and window. The receipt window is created_at,
-- which webhook_events_created_at_brin serves.

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_dead_letters_open_idx;
CREATE INDEX CONCURRENTLY webhook_dead_letters_open_idx
    ON webhook_dead_letters (provider, event_type, dead_at)
    WHERE requeued_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS webhook_dead_letters_open_id_idx;
CREATE INDEX CONCURRENTLY webhook_dead_letters_open_id_idx
    ON webhook_dead_letters (id)
    WHERE requeued_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS webhook_dead_letters_unresolved_idx;
DROP INDEX CONCURRENTLY IF EXISTS webhook_dead_letters_unresolved_id_idx;
ALTER TABLE webhook_dead_letters DROP COLUMN IF EXISTS resolved_at;
