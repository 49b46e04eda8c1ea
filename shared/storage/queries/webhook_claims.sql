-- Queries on webhook_claims: each processor's lease on the events it is
-- running (migration 00006 says why it is a table of its own). A processor
-- sets its row (ClaimSet) once its transaction has locked a claim's
-- events, before any handler runs, and that transaction empties it
-- (ClaimRelease) as it commits. A claim found non-empty past locked_until
-- belongs to a processor that died: ClaimLockExpired and
-- EventRecordInterrupted recover it.
;

-- name: ClaimSet :exec
-- Records the claim of a processor, one row per processor updated in
-- place (a HOT update on the table's half-empty pages). It commits
-- asynchronously (synchronous_commit off for this statement's own
-- transaction): a processor crash cannot lose it, only a server crash can,
-- and then the claim's transaction, whose commit is synchronous and
-- flushes the WAL past this record first, is lost too.
INSERT INTO webhook_claims (processor, token, event_ids, claimed_at, locked_until, updated_at)
SELECT @processor::text, @token::text, @event_ids::bigint[], @claimed_at::timestamptz, @locked_until::timestamptz,
       @claimed_at::timestamptz
  FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
    ON CONFLICT (processor) DO UPDATE
   SET token = EXCLUDED.token, event_ids = EXCLUDED.event_ids, claimed_at = EXCLUDED.claimed_at,
       locked_until = EXCLUDED.locked_until, updated_at = EXCLUDED.updated_at;

-- name: ClaimRelease :execrows
-- Empties the processor's claim @token, in the transaction that ran its
-- events (or after its fallback). No row: the claim is no longer this one
-- (another processor recovered it after its lease).
UPDATE webhook_claims SET token = '', event_ids = '{}', locked_until = NULL, updated_at = @now::timestamptz
 WHERE processor = @processor::text AND token = @token::text;

-- name: ClaimLock :one
-- Checks, in a fallback transaction, that the claim @token is still the
-- processor's, and keeps a recovery off it until that transaction ends
-- (ClaimLockExpired skips locked claims).
SELECT processor FROM webhook_claims WHERE processor = @processor::text AND token = @token::text FOR SHARE;

-- name: ClaimLockExpired :many
-- Locks up to @max claims past their lease, skipping those another
-- processor is recovering (or a fallback holds). It also bounds, for the
-- rest of the recovery's transaction, how long a statement waits for a
-- row lock (@lock_timeout): the events of a claim past its lease are still
-- locked only if its processor is alive and late, and the recovery then
-- gives up rather than wait for it.
SELECT c.processor, c.token, c.event_ids, c.claimed_at
  FROM webhook_claims c, (SELECT set_config('lock_timeout', @lock_timeout::text, true)) AS bounded
 WHERE cardinality(c.event_ids) > 0 AND c.locked_until <= @now::timestamptz
 ORDER BY c.locked_until, c.processor
 LIMIT @max::int
   FOR UPDATE OF c SKIP LOCKED;

-- name: ClaimDeleteIdle :execrows
-- Deletes the empty rows of processors idle since before @idle_before
-- (Lambda environments come and go, each with a new name).
DELETE FROM webhook_claims WHERE cardinality(event_ids) = 0 AND updated_at < @idle_before::timestamptz;

-- name: ClaimListLive :many
-- The claims that hold events and whose lease has not passed, for
-- operators.
SELECT processor, token, event_ids, claimed_at, locked_until FROM webhook_claims
 WHERE cardinality(event_ids) > 0 AND locked_until > @now::timestamptz
 ORDER BY claimed_at;
