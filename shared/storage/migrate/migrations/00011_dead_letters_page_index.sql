-- +goose NO TRANSACTION
-- +goose Up

-- The open dead letters in the order they died (id), for the console's
-- dead-letter list, paged by id (DeadLetterListPage): each page is a walk
-- of this index from the cursor, however many dead letters were requeued
-- before (they leave the index). Built CONCURRENTLY, as 00007: a failed
-- build leaves an invalid index, and the DROP makes goose's rerun rebuild
-- it.
DROP INDEX CONCURRENTLY IF EXISTS webhook_dead_letters_open_id_idx;
CREATE INDEX CONCURRENTLY webhook_dead_letters_open_id_idx
    ON webhook_dead_letters (id)
    WHERE requeued_at IS NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_dead_letters_open_id_idx;
