-- +goose NO TRANSACTION
-- +goose Up

-- The due events that must run alone (solo: an earlier attempt failed or
-- was interrupted), in the order the drain takes them. The batch claim
-- walks webhook_events_due_idx and skips them; the solo claim walks this
-- one, so finding the next solo event never scans a deep backlog of new
-- events. Built CONCURRENTLY (hence no transaction): a plain CREATE INDEX
-- would hold off the receivers' inserts while it reads the whole table.
-- A concurrent build that fails leaves an invalid index behind, and goose
-- runs this file again: the DROP first makes that rerun rebuild it.
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_solo_due_idx;
CREATE INDEX CONCURRENTLY webhook_events_solo_due_idx
    ON webhook_events (next_attempt_at, id)
    WHERE processed_at IS NULL AND dead_at IS NULL AND solo;

-- Statistics for the columns 00006 added, so the planner (and the bloat
-- estimate of webhookctl stats) need not wait for autovacuum.
ANALYZE webhook_events;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_solo_due_idx;
