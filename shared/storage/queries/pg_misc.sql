-- Queries on the server itself rather than on a table of ours.
;

-- name: PGNow :one
-- The database server's clock. Operator commands use it rather than the
-- clock of the machine they run on, which may be a laptop's.
SELECT statement_timestamp()::timestamptz AS now;

-- name: PGCurrentUser :one
-- The role the statements run as: what an operator action's record keeps
-- (db_user), shown before an operator acts.
SELECT current_user::text AS role;

-- name: PGSetIdleInTransactionTimeout :exec
-- Bounds how long the current transaction may sit idle (SET LOCAL with a
-- parameter: it ends with the transaction). Past it Postgres ends the
-- session and so releases its locks, should the client hang.
SELECT set_config('idle_in_transaction_session_timeout', @timeout::text, true);

-- name: PGTableSizes :many
-- The disk use of webhook-inbox's tables (every core table is named
-- webhook_*, as storage.InboxTables says), largest first. reltuples is the
-- planner's estimate: exact counts of a table that grows for ever are too
-- dear.
SELECT c.relname::text AS name, c.reltuples::bigint AS rows,
       pg_relation_size(c.oid)::bigint AS table_bytes,
       coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0)::bigint AS toast_bytes,
       pg_indexes_size(c.oid)::bigint AS index_bytes,
       pg_total_relation_size(c.oid)::bigint AS total_bytes
  FROM pg_catalog.pg_class c
 WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace
   AND c.relname LIKE 'webhook\_%'
 ORDER BY pg_total_relation_size(c.oid) DESC, c.relname;

-- name: PGBloatEstimate :many
-- Estimated bloat of every table whose name matches @table_pattern (LIKE)
-- in the current schema, of its TOAST table, and of each of its indexes:
-- one row per relation, from the catalogue alone (pg_class, pg_index,
-- pg_attribute, pg_stats, pg_relation_size), so it costs the same on a
-- table of ten rows as on one of a hundred million, and needs no
-- extension (pgstattuple, which reads every page, is neither installed by
-- default nor creatable by the functions' roles).
--
-- The method is the statistical estimate of ioguix's pgsql-bloat-estimation
-- (github.com/ioguix/pgsql-bloat-estimation, table/table_bloat.sql and
-- btree/btree_bloat.sql), the one check_postgres's bloat action made
-- common: from each column's average width and null fraction (pg_stats,
-- what ANALYZE measured), the size of an average tuple; from the row count
-- (reltuples) and the fill factor, the pages the relation would need if
-- packed; bloat is what the relation has (relpages) beyond that. Both
-- counts come from the same VACUUM or ANALYZE, so the ratio is that of the
-- last one. Written here anew, with these differences:
--
--   * no default width for a column without statistics: a table not
--     analyzed since it was created or since a column was added is
--     'not_analyzed', not an estimate built on a guess; a column whose
--     statistics the role may not read (pg_stats shows a column only to a
--     role that may SELECT it) makes it 'no_privilege'. The caller says
--     "unknown", never 0.
--   * an index tuple's header is IndexTupleData's 8 bytes, plus 4 of null
--     bitmap when a key column holds NULLs, aligned; the upstream query
--     counts 2 and under-counts every tuple by up to 8 bytes.
--   * a partial index is counted by its own reltuples (the rows its
--     predicate keeps), as upstream does, with the whole column's widths.
--   * TOAST is its own row. Its chunks have no statistics; a chunk is at
--     most a quarter of a page (TOAST_TUPLES_PER_PAGE), so reltuples / 4
--     pages is the most its chunks need: its estimate can only be low.
--   * a relation of at most one page is not estimated (nothing to gain),
--     nor an index that is invalid (left by a failed CONCURRENTLY build:
--     it costs writes and serves no read) or not a btree.
--   * MAXALIGN is 8: every 64-bit server (x86-64, arm64 such as Graviton).
--
-- Each estimate leaves out the padding between columns of a row, so a
-- freshly packed table reads a few percent, up to 10-15% with many
-- varlena columns; a btree filled by random keys (a UUID, the dedup key of
-- (provider, event_id)) settles 60-75% full, which reads 20-35%; btree
-- deduplication of repeated keys makes an index smaller than the estimate,
-- read as no bloat. docs/operations.md sets the threshold above all that.
WITH rel AS (
    SELECT c.oid, c.relname AS table_name, c.relpages, c.reltuples, c.reltoastrelid,
           coalesce((SELECT substring(o FROM '^fillfactor=([0-9]+)$')::int
                       FROM unnest(c.reloptions) AS o WHERE o LIKE 'fillfactor=%'), 100) AS fillfactor
      FROM pg_catalog.pg_class c
     WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace
       AND c.relname LIKE @table_pattern::text
),
-- A heap tuple: a 4-byte line pointer, the 23-byte header with a null
-- bitmap (one bit per column, dropped ones included) when any column holds
-- NULLs, aligned, then the data: each column's average stored width (for a
-- TOASTed value, its pointer's) times the share of rows where it is not
-- NULL, aligned.
heap AS (
    SELECT r.oid,
           count(*) FILTER (WHERE NOT a.attisdropped) AS columns,
           count(s.attname) AS with_stats,
           coalesce(bool_and(has_column_privilege(r.oid, a.attnum, 'SELECT')) FILTER (WHERE NOT a.attisdropped), true) AS readable,
           4 + ceil((23 + CASE WHEN max(s.null_frac) > 0 THEN (max(a.attnum) + 7) / 8 ELSE 0 END) / 8.0) * 8
             + ceil(coalesce(sum((1 - s.null_frac) * s.avg_width), 0) / 8.0) * 8 AS tuple_bytes
      FROM rel r
      JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0
      LEFT JOIN pg_catalog.pg_stats s
        ON s.schemaname = current_schema() AND s.tablename = r.table_name AND s.attname = a.attname
       AND NOT s.inherited AND NOT a.attisdropped
     GROUP BY r.oid
),
idx AS (
    SELECT r.table_name, r.oid AS table_oid, r.reltuples AS table_tuples, ci.oid, ci.relname,
           ci.relpages, ci.reltuples, i.indisvalid, am.amname, i.indkey,
           coalesce((SELECT substring(o FROM '^fillfactor=([0-9]+)$')::int
                       FROM unnest(ci.reloptions) AS o WHERE o LIKE 'fillfactor=%'), 90) AS fillfactor
      FROM rel r
      JOIN pg_catalog.pg_index i ON i.indrelid = r.oid
      JOIN pg_catalog.pg_class ci ON ci.oid = i.indexrelid
      JOIN pg_catalog.pg_am am ON am.oid = ci.relam
),
-- A btree leaf tuple: a 4-byte line pointer, the 8-byte IndexTupleData
-- (16 with the null bitmap, aligned), the key and INCLUDE columns'
-- average widths, aligned. An expression column's statistics are the
-- index's own (ANALYZE keeps them under the index's name).
idx_cols AS (
    SELECT x.oid,
           count(*) AS columns,
           count(s.attname) AS with_stats,
           coalesce(bool_and(has_column_privilege(x.table_oid, k.attnum, 'SELECT')) FILTER (WHERE k.attnum <> 0), true) AS readable,
           4 + CASE WHEN max(s.null_frac) > 0 THEN 16 ELSE 8 END
             + ceil(coalesce(sum((1 - s.null_frac) * s.avg_width), 0) / 8.0) * 8 AS tuple_bytes
      FROM idx x
      CROSS JOIN LATERAL unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, pos)
      LEFT JOIN pg_catalog.pg_attribute a
        ON a.attrelid = CASE WHEN k.attnum = 0 THEN x.oid ELSE x.table_oid END
       AND a.attnum = CASE WHEN k.attnum = 0 THEN k.pos ELSE k.attnum END
      LEFT JOIN pg_catalog.pg_stats s
        ON s.schemaname = current_schema() AND NOT s.inherited AND s.attname = a.attname
       AND s.tablename = CASE WHEN k.attnum = 0 THEN x.relname ELSE x.table_name END
     GROUP BY x.oid
),
-- expected_pages is what each relation would need packed: the heap at its
-- fill factor after its 24-byte page header; an index at its fill factor
-- (leaves; btree default 90) after the page header and the 16 bytes of
-- btree special space, plus its metapage. reltuples < 0 is PostgreSQL's
-- (14+) "never vacuumed nor analyzed"; 0 with no page recorded on a
-- relation that has some is how 13 says it.
est AS (
    SELECT r.oid AS table_oid, r.table_name, r.table_name AS name, 0 AS ord, 'table' AS kind,
           pg_relation_size(r.oid) AS size_bytes, r.relpages AS pages,
           CASE WHEN pg_relation_size(r.oid) <= current_setting('block_size')::int THEN ''
                WHEN r.reltuples < 0 OR (r.reltuples = 0 AND r.relpages = 0) THEN 'not_analyzed'
                WHEN r.reltuples = 0 THEN ''
                WHEN NOT h.readable THEN 'no_privilege'
                WHEN h.with_stats < h.columns THEN 'not_analyzed'
                ELSE '' END AS unknown,
           CASE WHEN r.reltuples <= 0 THEN 0
                ELSE ceil(r.reltuples / ((current_setting('block_size')::int - 24) * r.fillfactor / 100.0 / h.tuple_bytes))
           END AS expected_pages
      FROM rel r JOIN heap h ON h.oid = r.oid
    UNION ALL
    SELECT r.oid, r.table_name, t.relname, 1, 'toast',
           pg_relation_size(t.oid), t.relpages,
           CASE WHEN pg_relation_size(t.oid) <= current_setting('block_size')::int THEN ''
                WHEN t.reltuples < 0 OR (t.reltuples = 0 AND t.relpages = 0) THEN 'not_analyzed'
                ELSE '' END,
           ceil(greatest(t.reltuples, 0) / 4)
      FROM rel r JOIN pg_catalog.pg_class t ON t.oid = r.reltoastrelid
    UNION ALL
    SELECT x.table_oid, x.table_name, x.relname, 2, 'index',
           pg_relation_size(x.oid), x.relpages,
           CASE WHEN NOT x.indisvalid THEN 'invalid'
                WHEN x.amname <> 'btree' THEN 'not_btree'
                WHEN pg_relation_size(x.oid) <= current_setting('block_size')::int THEN ''
                WHEN x.table_tuples < 0 OR x.reltuples < 0 OR (x.reltuples = 0 AND x.relpages = 0) THEN 'not_analyzed'
                WHEN x.reltuples = 0 THEN ''
                WHEN NOT ic.readable THEN 'no_privilege'
                WHEN ic.with_stats < ic.columns THEN 'not_analyzed'
                ELSE '' END,
           CASE WHEN x.reltuples <= 0 THEN 1
                ELSE 1 + ceil(x.reltuples / ((current_setting('block_size')::int - 24 - 16) * x.fillfactor / 100.0 / ic.tuple_bytes))
           END
      FROM idx x JOIN idx_cols ic ON ic.oid = x.oid
)
SELECT table_name::text AS table_name, name::text AS name, kind::text AS kind,
       size_bytes::bigint AS size_bytes, pages::bigint AS pages,
       (CASE WHEN unknown = '' THEN least(expected_pages, pages) ELSE 0 END)::bigint AS expected_pages,
       unknown::text AS unknown
  FROM est
 ORDER BY pg_total_relation_size(table_oid) DESC, table_name, ord, name;
