-- Queries on webhook_source_activity: one row per source the receivers
-- have configured, with its silence setting and its last delivery (see
-- migration 00022). Each receiver container writes it at most once a
-- minute; the processor's runs and the operator pages read it whole.
;

-- name: SourceActivityRecord :exec
-- Records a receiver's sources at @now: each of @sources is configured,
-- with its silent_after (@silent_after_ms, 0: none) and, when it delivered
-- since the container's last record, the newest delivery
-- (@received_ms, Unix milliseconds, 0: none; never moved back, since
-- containers record in any order); every other row is no longer
-- configured. Times travel as numbers because an array element cannot be
-- null through sqlc's time type. The rows are written in name order, so
-- that two containers recording at once lock them in the same order.
WITH given AS (
    -- Three unnests in one select list step through the arrays together
    -- (the caller gives them one length).
    SELECT unnest(@sources::text[]) AS provider, unnest(@silent_after_ms::bigint[]) AS silent_after_ms,
           unnest(@received_ms::bigint[]) AS received_ms
), upserted AS (
    INSERT INTO webhook_source_activity AS a (provider, configured, silent_after, seen_at, last_received_at, updated_at)
    SELECT provider, true,
           CASE WHEN silent_after_ms > 0 THEN silent_after_ms * interval '1 millisecond' END,
           @now::timestamptz,
           CASE WHEN received_ms > 0 THEN to_timestamp(received_ms / 1000.0) END,
           @now::timestamptz
      FROM given
     ORDER BY provider
        ON CONFLICT (provider) DO UPDATE
       SET configured = true, silent_after = EXCLUDED.silent_after,
           last_received_at = GREATEST(a.last_received_at, EXCLUDED.last_received_at),
           updated_at = EXCLUDED.updated_at
)
UPDATE webhook_source_activity
   SET configured = false, silent_after = NULL, updated_at = @now::timestamptz
 WHERE configured AND provider <> ALL (@sources::text[]);

-- name: SourceActivityList :many
-- Every source's row, by name: a row per source ever configured.
SELECT provider, configured, coalesce((extract(epoch FROM silent_after) * 1000)::bigint, 0)::bigint AS silent_after_ms,
       seen_at, last_received_at
  FROM webhook_source_activity
 ORDER BY provider;
