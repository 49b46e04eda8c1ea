-- Queries on the server itself rather than on a table of ours.
;

-- name: PGNow :one
-- The database server's clock. Operator commands use it rather than the
-- clock of the machine they run on, which may be a laptop's.
SELECT statement_timestamp()::timestamptz AS now;

-- name: PGSetIdleInTransactionTimeout :exec
-- Bounds how long the current transaction may sit idle (SET LOCAL with a
-- parameter: it ends with the transaction). Past it Postgres ends the
-- session and so releases its locks, should the client hang.
SELECT set_config('idle_in_transaction_session_timeout', @timeout::text, true);

-- name: PGTableSizes :many
-- The disk use of webhook-inbox's tables, largest first. reltuples is the
-- planner's estimate: exact counts of a table that grows for ever are too
-- dear.
SELECT c.relname::text AS name, c.reltuples::bigint AS rows,
       pg_relation_size(c.oid)::bigint AS table_bytes,
       coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0)::bigint AS toast_bytes,
       pg_indexes_size(c.oid)::bigint AS index_bytes,
       pg_total_relation_size(c.oid)::bigint AS total_bytes
  FROM pg_catalog.pg_class c
 WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace
   AND c.relname IN ('webhook_events', 'webhook_dead_letters', 'webhook_rejections',
                     'webhook_payload_mismatches', 'webhook_archive_objects')
 ORDER BY pg_total_relation_size(c.oid) DESC, c.relname;
