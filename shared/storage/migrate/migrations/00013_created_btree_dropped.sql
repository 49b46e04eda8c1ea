-- +goose NO TRANSACTION
-- +goose Up

-- webhook_events_created_idx (00011), a btree on created_at for the
-- console's time windows, cost every event a btree entry twice: at the
-- insert, and again at the processor's update, which is no HOT update (it
-- changes processed_at, in the partial indexes' predicates), so it writes
-- a new entry in every btree of the table. make bench measured the drain
-- at 0.83x River's CPU per event with it, 0.95x without. The window reads
-- the BRIN index of 00010 instead (webhook_events_created_at_brin): a
-- bitmap scan of the window's block ranges, whose upkeep on an update
-- is a summary check, not an entry.
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_created_idx;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_created_idx;
CREATE INDEX CONCURRENTLY webhook_events_created_idx
    ON webhook_events (created_at);
