-- Queries on webhook_events, the inbox: one row per (provider, event_id),
-- for ever. The schema is in ../migrate/migrations. Every time a processor
-- writes or compares (lease ends, due times, processed_at) comes from its
-- clock as a parameter, never from the server's now(): tests move that
-- clock instead of sleeping, and all processors judge leases by one rule.
-- Writes of a claimer are conditional on its claim token (locked_by), so a
-- processor that lost its lease cannot change a row claimed by another.
--
-- JSON values are passed as text and cast here, never as bytes: outside
-- prepared statements (RDS Proxy, PgBouncer: query mode exec) a []byte
-- travels as bytea.
;

-- name: EventInsert :one
-- The receiver's one statement: the insert that deduplicates and, for a
-- conflict, the stored row's hash in the same round trip. The second branch
-- reads with the statement's snapshot, so it misses a conflicting row
-- committed by a concurrent receiver after the snapshot was taken (ON
-- CONFLICT waits for that row, the snapshot cannot see it): that case
-- returns no row, and the caller re-reads with EventGetHashByKey.
WITH ins AS (
    INSERT INTO webhook_events (provider, event_id, event_type, payload, body, body_sha256, body_size, metadata, source_kind)
    VALUES (@source::text, @event_id::text, @event_type::text, sqlc.narg('payload')::text::jsonb, @body::bytea,
            @body_sha256::bytea, @body_size::int, sqlc.narg('metadata')::text::jsonb, @source_kind::text)
    ON CONFLICT (provider, event_id) DO NOTHING
    RETURNING id
)
SELECT id, true AS inserted, NULL::bytea AS stored_sha256 FROM ins
UNION ALL
SELECT e.id, false, e.body_sha256 FROM webhook_events e
 WHERE e.provider = @source::text AND e.event_id = @event_id::text AND NOT EXISTS (SELECT 1 FROM ins);

-- name: EventGetHashByKey :one
SELECT id, body_sha256 FROM webhook_events WHERE provider = @source::text AND event_id = @event_id::text;

-- name: EventInsertFull :one
-- Stores an event in any state, every column given: the test factory's
-- statement (River's JobInsertFull). The receiver uses EventInsert.
INSERT INTO webhook_events (
    provider, source_kind, event_id, event_type, payload, body, body_sha256, body_size, metadata, created_at,
    attempts, next_attempt_at, locked_until, locked_by, errors, last_error, outcome, processed_at, dead_at,
    archive_key, archive_offset, archive_length, archived_at, expunged_at
) VALUES (
    @source::text, @source_kind::text, @event_id::text, @event_type::text, sqlc.narg('payload')::text::jsonb,
    sqlc.narg('body')::bytea, @body_sha256::bytea, @body_size::int, sqlc.narg('metadata')::text::jsonb,
    coalesce(sqlc.narg('created_at')::timestamptz, now()),
    @attempts::int, coalesce(sqlc.narg('next_attempt_at')::timestamptz, now()), sqlc.narg('locked_until')::timestamptz,
    sqlc.narg('locked_by')::text, sqlc.arg('errors')::text::jsonb, sqlc.narg('last_error')::text, sqlc.narg('outcome')::text,
    sqlc.narg('processed_at')::timestamptz, sqlc.narg('dead_at')::timestamptz,
    sqlc.narg('archive_key')::text, sqlc.narg('archive_offset')::bigint, sqlc.narg('archive_length')::bigint,
    sqlc.narg('archived_at')::timestamptz, sqlc.narg('expunged_at')::timestamptz
)
RETURNING *;

-- name: EventGetByID :one
SELECT * FROM webhook_events WHERE id = @id::bigint;

-- name: EventGetByKey :one
SELECT * FROM webhook_events WHERE provider = @source::text AND event_id = @event_id::text;

-- name: EventGetByKeyForUpdate :one
-- Locks the event for an expunge: expunges of one event take turns, and an
-- expunge waits for an archive batch holding the row.
SELECT * FROM webhook_events WHERE provider = @source::text AND event_id = @event_id::text FOR UPDATE;

-- name: EventClaim :many
-- Claims up to @max due rows, oldest due first.
--
-- The inner SELECT walks webhook_events_due_idx (next_attempt_at, id) WHERE
-- processed_at IS NULL AND dead_at IS NULL, so its cost follows the
-- backlog, not the table. FOR UPDATE SKIP LOCKED makes concurrent claimers
-- take disjoint rows without waiting on each other; a row another claimer
-- just claimed or processed is re-checked against the WHERE on its newest
-- version and dropped.
--
-- The claim moves next_attempt_at to the lease end as well as
-- locked_until: a claimed row is simply not due until its lease passes, so
-- the due scan skips running rows without a second condition, and a row
-- whose processor died becomes claimable again by the same rule that runs
-- retries. The locked_until condition is redundant with it, kept as a guard
-- against a hand-edited next_attempt_at.
--
-- A row with more attempts than error entries was started by a processor
-- that never recorded the outcome: the claim writes that attempt's entry
-- (at = the lease end it outlived) so the history is complete and a poison
-- event that kills its processor still runs out of attempts.
WITH due AS (
    SELECT id, next_attempt_at, attempts > jsonb_array_length(errors) AS interrupted
      FROM webhook_events
     WHERE processed_at IS NULL AND dead_at IS NULL
       AND next_attempt_at <= @now::timestamptz
       AND (locked_until IS NULL OR locked_until <= @now::timestamptz)
     ORDER BY next_attempt_at, id
     LIMIT @max::int
       FOR UPDATE SKIP LOCKED
)
UPDATE webhook_events e
   SET locked_until = @locked_until::timestamptz, locked_by = @token::text, next_attempt_at = @locked_until::timestamptz,
       errors = CASE WHEN due.interrupted
                     THEN e.errors || jsonb_build_array(jsonb_build_object(
                              'attempt', e.attempts, 'at', coalesce(e.locked_until, @now::timestamptz),
                              'cause', @interrupted_cause::text, 'error', @interrupted_error::text))
                     ELSE e.errors END,
       last_error = CASE WHEN due.interrupted THEN @interrupted_error::text ELSE e.last_error END
  FROM due
 WHERE e.id = due.id
RETURNING sqlc.embed(e), due.interrupted, due.next_attempt_at AS due_at;

-- name: EventStartAttempt :one
-- Counts the attempt about to run, committed before the handler starts, so
-- a handler that kills its processor still spends an attempt. No row: the
-- claim is no longer this token's, or its lease has ended.
--
-- The commit is asynchronous: set_config(..., true) turns
-- synchronous_commit off for this statement's own transaction alone, so
-- counting costs one round trip and no WAL flush. That is safe: a processor
-- crash cannot lose an asynchronous commit, only a server crash can, and
-- the handler's commit, which is synchronous, flushes the WAL past this
-- record first, so an effect is never durable without the attempt that made
-- it. The set_config sits in a FROM subquery joined to the row, so it runs
-- whenever a row is updated, whatever the plan. The setting ends with the
-- transaction.
UPDATE webhook_events e SET attempts = e.attempts + 1
  FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
 WHERE e.id = @id::bigint AND e.locked_by = @token::text AND e.locked_until > @now::timestamptz
   AND e.processed_at IS NULL AND e.dead_at IS NULL
RETURNING e.attempts;

-- name: EventMarkProcessed :execrows
-- Sets processed_at and the outcome and ends the claim. Run in the
-- handler's transaction, before the handler: the UPDATE locks the row until
-- that transaction ends and checks, on the row's newest version, that it is
-- still unprocessed and still claimed with this token, so two processors
-- can never both commit an event.
UPDATE webhook_events
   SET processed_at = @now::timestamptz, outcome = @outcome::text, locked_until = NULL, locked_by = NULL
 WHERE id = @id::bigint AND locked_by = @token::text AND processed_at IS NULL AND dead_at IS NULL;

-- name: EventRecordFailure :execrows
-- Appends a failed attempt to the history, sets last_error and the next
-- attempt's time, and ends the claim; run after the handler's transaction
-- rolled back, so the record survives it.
UPDATE webhook_events
   SET errors = errors || jsonb_build_array(jsonb_build_object(
                    'attempt', attempts, 'at', @now::timestamptz, 'cause', @cause::text, 'error', @error::text)),
       last_error = @error::text, next_attempt_at = @next_attempt_at::timestamptz, locked_until = NULL, locked_by = NULL
 WHERE id = @id::bigint AND locked_by = @token::text AND processed_at IS NULL AND dead_at IS NULL;

-- name: EventDeadLetter :one
-- Marks the event dead and copies it, with its whole error history, into
-- webhook_dead_letters in one statement, so there is never a dead event
-- without its dead letter or the reverse. An empty @cause appends nothing
-- (the claim already recorded an attempt that never finished). No row: the
-- claim is no longer this token's.
WITH ev AS (
    UPDATE webhook_events
       SET dead_at = @now::timestamptz, locked_until = NULL, locked_by = NULL,
           errors = CASE WHEN @cause::text = '' THEN errors
                         ELSE errors || jsonb_build_array(jsonb_build_object(
                              'attempt', attempts, 'at', @now::timestamptz, 'cause', @cause::text, 'error', @error::text)) END,
           last_error = CASE WHEN @cause::text = '' THEN last_error ELSE @error::text END
     WHERE id = @id::bigint AND locked_by = @token::text AND processed_at IS NULL AND dead_at IS NULL
    RETURNING id, provider, event_id, event_type, payload, body, attempts, errors, last_error
)
INSERT INTO webhook_dead_letters (event_pk, provider, event_id, event_type, payload, body, attempts, errors, last_error, dead_at)
SELECT id, provider, event_id, event_type, payload, body, attempts, errors, last_error, @now::timestamptz FROM ev
RETURNING id;

-- name: EventRelease :execrows
-- Gives back claimed events that were not started: due again at @now,
-- attempts unchanged, instead of waiting for the lease to pass.
UPDATE webhook_events SET locked_until = NULL, locked_by = NULL, next_attempt_at = @now::timestamptz
 WHERE id = ANY(@ids::bigint[]) AND locked_by = @token::text AND processed_at IS NULL AND dead_at IS NULL;

-- name: EventGetBacklog :one
-- The processor's to-do list at @now. Both predicates restate
-- webhook_events_due_idx's, and every column read is in it, so this is an
-- index-only scan of the backlog: its cost follows the backlog, never the
-- table. The processor runs it at the end of each drain.
SELECT count(*) AS count,
       count(*) FILTER (WHERE next_attempt_at <= @now::timestamptz) AS due,
       min(next_attempt_at) FILTER (WHERE next_attempt_at <= @now::timestamptz) AS oldest_due_at
  FROM webhook_events
 WHERE processed_at IS NULL AND dead_at IS NULL;

-- name: EventGetBacklogStats :one
-- The backlog in an operator's detail. It visits every backlog row
-- (created_at and attempts are not in the index): fine for a command, not
-- for every drain.
SELECT count(*) AS count,
       count(*) FILTER (WHERE next_attempt_at <= @now::timestamptz) AS due,
       min(next_attempt_at) FILTER (WHERE next_attempt_at <= @now::timestamptz) AS oldest_due_at,
       count(*) FILTER (WHERE locked_until > @now::timestamptz) AS in_flight,
       count(*) FILTER (WHERE attempts > 0 AND (locked_until IS NULL OR locked_until <= @now::timestamptz)) AS retrying,
       min(created_at) AS oldest_created_at
  FROM webhook_events
 WHERE processed_at IS NULL AND dead_at IS NULL;

-- name: EventCountReplay :one
-- What a replay filter selects among processed, unexpunged events:
-- replayable, the events whose body is still in Postgres (and not dead:
-- what EventListReplayableIDs returns and EventReplay resets), and
-- archived, the ones a replay skips because their bodies are in S3 (a
-- handler is handed the body and payload from the row). NULL filter values
-- match anything. One statement for replay's dry run and its report.
SELECT count(*) FILTER (WHERE e.archived_at IS NULL AND e.body IS NOT NULL AND e.dead_at IS NULL) AS replayable,
       count(*) FILTER (WHERE e.archived_at IS NOT NULL) AS archived
  FROM webhook_events e
 WHERE e.processed_at IS NOT NULL AND e.expunged_at IS NULL
   AND (sqlc.narg('id')::bigint IS NULL OR e.id = sqlc.narg('id')::bigint)
   AND (sqlc.narg('source')::text IS NULL OR e.provider = sqlc.narg('source')::text)
   AND (sqlc.narg('event_type')::text IS NULL OR e.event_type = sqlc.narg('event_type')::text)
   AND (sqlc.narg('outcome')::text IS NULL OR e.outcome = sqlc.narg('outcome')::text)
   AND (sqlc.narg('processed_from')::timestamptz IS NULL OR e.processed_at >= sqlc.narg('processed_from')::timestamptz)
   AND (sqlc.narg('processed_to')::timestamptz IS NULL OR e.processed_at < sqlc.narg('processed_to')::timestamptz);

-- name: EventListReplayableIDs :many
-- The ids EventReplay resets (the replayable of EventCountReplay; the
-- predicate is webhook_events_archivable_idx's, so a processed_at window is
-- an index range), selected once so that each event is replayed
-- at most once even if the processor finishes an early chunk while later
-- ones are being reset.
SELECT e.id FROM webhook_events e
 WHERE e.processed_at IS NOT NULL AND e.archived_at IS NULL AND e.body IS NOT NULL
   AND e.dead_at IS NULL AND e.expunged_at IS NULL
   AND (sqlc.narg('id')::bigint IS NULL OR e.id = sqlc.narg('id')::bigint)
   AND (sqlc.narg('source')::text IS NULL OR e.provider = sqlc.narg('source')::text)
   AND (sqlc.narg('event_type')::text IS NULL OR e.event_type = sqlc.narg('event_type')::text)
   AND (sqlc.narg('outcome')::text IS NULL OR e.outcome = sqlc.narg('outcome')::text)
   AND (sqlc.narg('processed_from')::timestamptz IS NULL OR e.processed_at >= sqlc.narg('processed_from')::timestamptz)
   AND (sqlc.narg('processed_to')::timestamptz IS NULL OR e.processed_at < sqlc.narg('processed_to')::timestamptz)
 ORDER BY e.id;

-- name: EventReplay :execrows
-- Makes a chunk of replayable events unprocessed and due at @now, with
-- attempts, history, last error and outcome reset (the drain's invariant,
-- attempts = the history's length, needs it); each row is re-checked
-- against the replayable predicate.
UPDATE webhook_events e
   SET processed_at = NULL, outcome = NULL, attempts = 0, errors = '[]'::jsonb, last_error = NULL,
       next_attempt_at = @now::timestamptz, locked_until = NULL, locked_by = NULL
 WHERE e.id = ANY(@ids::bigint[])
   AND e.processed_at IS NOT NULL AND e.archived_at IS NULL AND e.body IS NOT NULL
   AND e.dead_at IS NULL AND e.expunged_at IS NULL;

-- name: EventCountArchivable :one
-- How many events an archive run with this cutoff would archive now.
SELECT count(*) FROM webhook_events
 WHERE processed_at IS NOT NULL AND archived_at IS NULL AND body IS NOT NULL AND processed_at < @processed_before::timestamptz;

-- name: EventGetArchiveProgress :one
-- Processed events whose body is still in Postgres, read from
-- webhook_events_archivable_idx alone: all of them, the part processed
-- before the cutoff, and the oldest.
SELECT count(*) AS waiting,
       count(*) FILTER (WHERE processed_at < @cutoff::timestamptz) AS due,
       min(processed_at) AS oldest_processed_at
  FROM webhook_events
 WHERE processed_at IS NOT NULL AND archived_at IS NULL AND body IS NOT NULL;

-- name: EventListArchiveCandidates :many
-- Picks an archive batch: the oldest archivable event no other archiver
-- holds (head), then the oldest archivable events of its provider, skipping
-- rows other archivers hold, so that concurrent archivers take disjoint
-- batches and never wait for each other. One provider per batch keeps one
-- provider per object, so that keys (and Athena partitions) can name it.
-- processed_at IS NOT NULL restates the partial index's predicate so that
-- the planner uses webhook_events_archivable_idx. Run on its own
-- (autocommit): its row locks only make SKIP LOCKED skip rows others hold.
WITH head AS (
    SELECT provider FROM webhook_events
     WHERE processed_at IS NOT NULL AND archived_at IS NULL AND body IS NOT NULL
       AND processed_at < @processed_before::timestamptz
     ORDER BY processed_at, id
     LIMIT 1
     FOR NO KEY UPDATE SKIP LOCKED
)
SELECT e.id, e.provider, e.body_size, e.created_at FROM webhook_events e JOIN head ON e.provider = head.provider
 WHERE e.processed_at IS NOT NULL AND e.archived_at IS NULL AND e.body IS NOT NULL
   AND e.processed_at < @processed_before::timestamptz
 ORDER BY e.processed_at, e.id
 LIMIT @max::int
 FOR NO KEY UPDATE OF e SKIP LOCKED;

-- name: EventLockForArchive :many
-- Locks exactly the chosen events of a batch, still archivable, and reads
-- them, oldest processed first. FOR NO KEY UPDATE keeps other archivers and
-- expunges off these rows, but not receivers (ON CONFLICT DO NOTHING takes
-- no row lock) nor the dead-letter table's foreign key checks.
SELECT * FROM webhook_events
 WHERE id = ANY(@ids::bigint[]) AND processed_at IS NOT NULL AND archived_at IS NULL AND body IS NOT NULL
 ORDER BY processed_at, id
   FOR NO KEY UPDATE SKIP LOCKED;

-- name: EventMarkArchived :execrows
-- Points a batch's events at their object and clears their payload and
-- body; only events still unarchived.
UPDATE webhook_events e
   SET archive_key = @key::text, archive_offset = u.off, archive_length = u.len,
       archived_at = now(), payload = NULL, body = NULL
  FROM (SELECT unnest(@ids::bigint[]) AS id, unnest(@offsets::bigint[]) AS off, unnest(@lengths::bigint[]) AS len) AS u
 WHERE e.id = u.id AND e.archived_at IS NULL AND e.body IS NOT NULL;

-- name: EventExpunge :exec
-- Erases the event's payload and body, keeping the row (the dedup memory
-- and audit trail). An event erased before it was processed leaves the
-- drain: there is nothing left to apply, and it must not reach a handler
-- bodiless.
UPDATE webhook_events SET payload = NULL, body = NULL, expunged_at = coalesce(expunged_at, now()),
       outcome = CASE WHEN processed_at IS NULL THEN 'expunged' ELSE outcome END,
       processed_at = coalesce(processed_at, now())
 WHERE id = @id::bigint;
