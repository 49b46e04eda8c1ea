-- Queries on webhook_rejections, the receiver's ring buffer of recent
-- refusals (see migration 00002): slot = nextval(seq) % capacity with an
-- upsert, so the table never holds more than capacity rows and needs no
-- pruning job.
;

-- name: RejectionInsert :exec
-- Writes a refusal into the ring buffer, overwriting the oldest slot; at
-- the server's now unless @received_at says otherwise (tests).
INSERT INTO webhook_rejections (slot, provider, cause, message, request_id, remote_addr, body_size, suppressed, received_at)
VALUES ((nextval('webhook_rejections_seq') % @capacity::bigint)::int, @source::text, @cause::text, @message::text,
        @request_id::text, @remote_addr::text, @body_size::bigint, @suppressed::bigint,
        coalesce(sqlc.narg('received_at')::timestamptz, now()))
ON CONFLICT (slot) DO UPDATE SET
    provider = EXCLUDED.provider, cause = EXCLUDED.cause, message = EXCLUDED.message,
    request_id = EXCLUDED.request_id, remote_addr = EXCLUDED.remote_addr, body_size = EXCLUDED.body_size,
    suppressed = EXCLUDED.suppressed, received_at = EXCLUDED.received_at;

-- name: RejectionList :many
-- Rejections received since @since, newest first.
SELECT provider, cause, message, request_id, remote_addr, body_size, suppressed, received_at
  FROM webhook_rejections WHERE received_at >= @since::timestamptz ORDER BY received_at DESC, slot DESC LIMIT @max::int;

-- name: RejectionCountByCause :many
-- Rejections since @since per source and cause, counting the suppressed
-- ones each record stands for, largest first.
SELECT provider, cause, sum(1 + suppressed)::bigint AS count
  FROM webhook_rejections WHERE received_at >= @since::timestamptz
 GROUP BY provider, cause ORDER BY count DESC, provider, cause;

-- name: RejectionCountByBucket :many
-- Rejections per time bucket of bucket_seconds from since up to until and
-- cause, counting the suppressed ones each record stands for (they were
-- refused before it, since the previous record of its source and cause,
-- and are counted in the record's bucket). The ring buffer is small and
-- indexed by received_at.
SELECT date_bin(make_interval(secs => @bucket_seconds::float8), received_at, @since::timestamptz)::timestamptz AS bucket,
       cause, sum(1 + suppressed)::bigint AS count
  FROM webhook_rejections
 WHERE received_at >= @since::timestamptz AND received_at < @until::timestamptz
 GROUP BY 1, 2 ORDER BY 1, 2;
