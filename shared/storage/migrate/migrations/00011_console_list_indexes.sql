-- +goose NO TRANSACTION
-- +goose Up

-- Indexes of the console's lists (webhookctl console), each a keyset page
-- of 50 rows on a table of millions. Built CONCURRENTLY, as 00007: a
-- plain CREATE INDEX would hold off the receivers' inserts while it reads
-- the table, and a failed build leaves an invalid index that the DROP
-- before makes goose's rerun rebuild.

-- The open dead letters in the order they died (id), for the dead-letter
-- list paged by id (DeadLetterListPage): a page is a walk of this index
-- from the cursor, however many dead letters were requeued before (they
-- leave it).
DROP INDEX CONCURRENTLY IF EXISTS webhook_dead_letters_open_id_idx;
CREATE INDEX CONCURRENTLY webhook_dead_letters_open_id_idx
    ON webhook_dead_letters (id)
    WHERE requeued_at IS NULL;

-- The dead events, newest first, for the events list's state=dead: without
-- it the list walks every id down until it has found 50, the whole table
-- when few are dead. Only dead rows are in it, and the processor's
-- updates already change processed_at (webhook_events_due_idx's
-- predicate), so it costs no HOT update.
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_dead_idx;
CREATE INDEX CONCURRENTLY webhook_events_dead_idx
    ON webhook_events (id)
    WHERE dead_at IS NOT NULL AND expunged_at IS NULL;

-- The events list's time window (received from/to), which EventList
-- reads from here when the rows received after a bounded window outnumber
-- those in it (instead of walking the ids down to it). created_at is set
-- at the insert and never changes, and grows with it, so each insert adds
-- to the rightmost leaf, as for the primary key.
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_created_idx;
CREATE INDEX CONCURRENTLY webhook_events_created_idx
    ON webhook_events (created_at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_created_idx;
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_dead_idx;
DROP INDEX CONCURRENTLY IF EXISTS webhook_dead_letters_open_id_idx;
