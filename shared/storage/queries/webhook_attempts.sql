-- Queries on webhook_attempts: one row per processing attempt, for ever.
-- Rows are written by EventFinish and EventRecordInterrupted
-- (webhook_events.sql), in the statements that record the outcome on the
-- event; nothing deletes them, and only an expunge changes them
-- (AttemptExpunge).
;

-- name: AttemptListByEvent :many
-- An event's attempts, in order: its processing history.
SELECT * FROM webhook_attempts WHERE event_pk = @event_pk::bigint ORDER BY attempt;

-- name: AttemptExpunge :execrows
-- An expunge's erasure of an event's attempt history: each error text
-- (which a handler may have written quoting the body) becomes @redacted;
-- the attempt's number, times, outcome and cause code stay. Returns how
-- many texts it erased.
UPDATE webhook_attempts SET error = @redacted::text
 WHERE event_pk = @event_pk::bigint AND error NOT IN ('', @redacted::text);

-- name: AttemptCountByBucket :many
-- Finished attempts per time bucket of bucket_seconds from since up to
-- until, by finished_at: processed (handled or unhandled), failed, and the
-- failed ones that dead-lettered their event. The window bounds the scan
-- through webhook_attempts_finished_at_brin (00010); interrupted attempts
-- (no finished_at) are not counted; buckets without attempts are absent.
SELECT date_bin(make_interval(secs => @bucket_seconds::float8), finished_at, @since::timestamptz)::timestamptz AS bucket,
       count(*) FILTER (WHERE outcome IN ('handled', 'unhandled')) AS processed,
       count(*) FILTER (WHERE outcome = 'failed') AS failed,
       count(*) FILTER (WHERE dead) AS dead
  FROM webhook_attempts
 WHERE finished_at >= @since::timestamptz AND finished_at < @until::timestamptz
 GROUP BY 1 ORDER BY 1;
