-- +goose NO TRANSACTION
-- +goose Up

-- The console's charts count events by created_at and attempts by
-- finished_at over a window (24 hours by default) in time buckets. Both
-- columns grow with the rows' physical order (events are appended as they
-- arrive, attempts as they finish), so a BRIN index, one summary per 128
-- pages, finds a window's pages at a tiny fraction of a B-tree's size and
-- write cost: a few pages for millions of rows, and the receiver's and
-- processor's inserts only widen the last range. An update that moves an
-- event to another page (processing, archiving) only widens that page's
-- range: the index stays correct (BRIN is lossy; rows are rechecked) and
-- reads a little more. Built CONCURRENTLY (hence no transaction), as 00007,
-- so the receivers' inserts are never held off; a failed build leaves an
-- invalid index, which the DROP clears on the rerun.
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_created_at_brin;
CREATE INDEX CONCURRENTLY webhook_events_created_at_brin
    ON webhook_events USING brin (created_at);

DROP INDEX CONCURRENTLY IF EXISTS webhook_attempts_finished_at_brin;
CREATE INDEX CONCURRENTLY webhook_attempts_finished_at_brin
    ON webhook_attempts USING brin (finished_at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_attempts_finished_at_brin;
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_created_at_brin;
