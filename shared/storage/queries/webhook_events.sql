-- Queries on webhook_events, the inbox: one row per (provider, event_id),
-- for ever. The schema is in ../migrate/migrations. Every time a processor
-- writes or compares (lease ends, due times, processed_at) comes from its
-- clock as a parameter, never from the server's now(): tests move that
-- clock instead of sleeping, and all processors judge leases by one rule.
--
-- The processor runs the events of a claim in one transaction that holds
-- their row locks from the claim (FOR NO KEY UPDATE) to its commit: no
-- other processor can take, mark or record them meanwhile, and the
-- outcome of each (EventFinish) is written in that transaction. The claim
-- itself is recorded in webhook_claims (webhook_claims.sql) before any
-- handler runs, so that the events of a processor that dies are known.
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
--
-- ON CONFLICT names no target: besides the key (provider, event_id), a row
-- with body_guard conflicts on webhook_events_body_guard_key, (provider,
-- body_sha256), when its body is stored under another id: that case too
-- returns no row, EventGetHashByKey finds none, and EventGetByBodyHash
-- finds the stored event (a suspected replay). Events without body_guard
-- have no other unique index to meet, so for them nothing changed.
WITH ins AS (
    INSERT INTO webhook_events (provider, event_id, event_type, payload, body, body_sha256, body_size, metadata, source_kind, body_guard)
    VALUES (@source::text, @event_id::text, @event_type::text, sqlc.narg('payload')::text::jsonb, @body::bytea,
            @body_sha256::bytea, @body_size::int, sqlc.narg('metadata')::text::jsonb, @source_kind::text, @body_guard::boolean)
    ON CONFLICT DO NOTHING
    RETURNING id
)
SELECT id, true AS inserted, NULL::bytea AS stored_sha256 FROM ins
UNION ALL
SELECT e.id, false, e.body_sha256 FROM webhook_events e
 WHERE e.provider = @source::text AND e.event_id = @event_id::text AND NOT EXISTS (SELECT 1 FROM ins);

-- name: EventGetHashByKey :one
SELECT id, body_sha256 FROM webhook_events WHERE provider = @source::text AND event_id = @event_id::text;

-- name: EventGetByBodyHash :one
-- The stored event of a guarded source (body_guard) with this body: what a
-- suspected replay repeats. At most one row (webhook_events_body_guard_key).
SELECT id, event_id, event_type FROM webhook_events
 WHERE provider = @source::text AND body_sha256 = @body_sha256::bytea AND body_guard;

-- name: EventInsertFull :one
-- Stores an event in any state, every column given: the test factory's
-- statement (River's JobInsertFull). The receiver uses EventInsert.
INSERT INTO webhook_events (
    provider, source_kind, event_id, event_type, payload, body, body_sha256, body_size, metadata, created_at,
    attempts, failed_attempts, solo, last_attempt_at, next_attempt_at, last_error, outcome, processed_at, dead_at,
    archive_key, archive_offset, archive_length, archived_at, expunged_at
) VALUES (
    @source::text, @source_kind::text, @event_id::text, @event_type::text, sqlc.narg('payload')::text::jsonb,
    sqlc.narg('body')::bytea, @body_sha256::bytea, @body_size::int, sqlc.narg('metadata')::text::jsonb,
    coalesce(sqlc.narg('created_at')::timestamptz, now()),
    @attempts::int, @failed_attempts::int, @solo::boolean, sqlc.narg('last_attempt_at')::timestamptz,
    coalesce(sqlc.narg('next_attempt_at')::timestamptz, now()), sqlc.narg('last_error')::text, sqlc.narg('outcome')::text,
    sqlc.narg('processed_at')::timestamptz, sqlc.narg('dead_at')::timestamptz,
    sqlc.narg('archive_key')::text, sqlc.narg('archive_offset')::bigint, sqlc.narg('archive_length')::bigint,
    sqlc.narg('archived_at')::timestamptz, sqlc.narg('expunged_at')::timestamptz
)
RETURNING *;

-- name: EventGetByID :one
-- An event and, when a processor's claim holds it, that claim.
SELECT sqlc.embed(e), coalesce(c.processor, '')::text AS claimed_by, c.locked_until AS claimed_until
  FROM webhook_events e
  LEFT JOIN LATERAL (SELECT processor, locked_until FROM webhook_claims WHERE e.id = ANY(event_ids) LIMIT 1) c ON true
 WHERE e.id = @id::bigint;

-- name: EventGetByKey :one
SELECT sqlc.embed(e), coalesce(c.processor, '')::text AS claimed_by, c.locked_until AS claimed_until
  FROM webhook_events e
  LEFT JOIN LATERAL (SELECT processor, locked_until FROM webhook_claims WHERE e.id = ANY(event_ids) LIMIT 1) c ON true
 WHERE e.provider = @source::text AND e.event_id = @event_id::text;

-- name: EventListByEventID :many
-- The events whose sender's id is @event_id, whatever their source (the
-- console's "find" without a source), oldest first. The unique key leads
-- with provider, so this walks the few distinct providers (a loose index
-- scan: one probe each) and probes (provider, event_id) for each, instead
-- of scanning the table or keeping an index on event_id alone.
WITH RECURSIVE p AS (
    (SELECT provider FROM webhook_events ORDER BY provider LIMIT 1)
    UNION ALL
    SELECT (SELECT w.provider FROM webhook_events w WHERE w.provider > p.provider ORDER BY w.provider LIMIT 1)
      FROM p WHERE p.provider IS NOT NULL
)
SELECT e.* FROM p JOIN webhook_events e ON e.provider = p.provider AND e.event_id = @event_id::text
 ORDER BY e.id
 LIMIT @max::int;

-- name: EventGetNewestCreatedAt :one
-- When the newest event (by id) was received: one probe of the primary
-- key. EventList weighs a bounded time window with it.
SELECT created_at FROM webhook_events ORDER BY id DESC LIMIT 1;

-- name: EventSearchChunk :one
-- One chunk of a search by content (the operator's events list with a
-- payload or metadata filter): the next @chunk events below @before_id in
-- the receipt window, of the source and type when given, newest first;
-- which of them contain @match in their payload and @metadata in their
-- metadata (jsonb @>, NULL: any); and how far down the walk got. The chunk
-- reads ids and receipt times alone (the primary key, or the receipt
-- time's BRIN index for a window far in the past), and only its rows are
-- joined back for the containment test: a chunk costs @chunk rows
-- whatever matches, so that a search without a payload index stays
-- bounded. NULL payloads (archived, expired, expunged) never match.
WITH chunk AS (
    SELECT e.id, e.created_at FROM webhook_events e
     WHERE e.id < @before_id::bigint
       AND e.created_at >= @created_from::timestamptz AND e.created_at < @created_to::timestamptz
       AND (sqlc.narg('source')::text IS NULL OR e.provider = sqlc.narg('source')::text)
       AND (sqlc.narg('event_type')::text IS NULL OR e.event_type = sqlc.narg('event_type')::text)
     ORDER BY e.id DESC
     LIMIT @chunk::int
), tested AS MATERIALIZED (
    SELECT c.id, c.created_at,
           (sqlc.narg('match')::text IS NULL OR e.payload @> sqlc.narg('match')::text::jsonb)
           AND (sqlc.narg('metadata')::text IS NULL OR e.metadata @> sqlc.narg('metadata')::text::jsonb) AS hit
      FROM chunk c JOIN webhook_events e ON e.id = c.id
)
SELECT count(*)::int AS scanned, coalesce(min(id), 0)::bigint AS lowest_id,
       coalesce(min(created_at), @created_from::timestamptz)::timestamptz AS lowest_created_at,
       coalesce(array_agg(id ORDER BY id DESC) FILTER (WHERE hit), '{}')::bigint[] AS hits
  FROM tested;

-- name: EventGetByKeyForUpdate :one
-- Locks the event for an expunge: expunges of one event take turns, and an
-- expunge waits for an archive batch, or a processor's transaction,
-- holding the row.
SELECT * FROM webhook_events WHERE provider = @source::text AND event_id = @event_id::text FOR UPDATE;

-- name: EventGetDue :one
-- Whether a claim would find anything now, without opening a transaction
-- or locking a row: a due event that must run alone (solo), one that may
-- run in a batch, and a claim past its lease to recover (expired). The
-- processor asks before it claims, so that an idle poll costs this one
-- statement. Each EXISTS stops at the first row of its index
-- (webhook_events_solo_due_idx, webhook_events_due_idx; webhook_claims is
-- a few pages).
SELECT EXISTS (SELECT 1 FROM webhook_events e
                WHERE e.processed_at IS NULL AND e.dead_at IS NULL AND e.solo AND e.next_attempt_at <= @now::timestamptz
                  AND e.id NOT IN (SELECT unnest(c.event_ids) FROM webhook_claims c)) AS solo,
       EXISTS (SELECT 1 FROM webhook_events e
                WHERE e.processed_at IS NULL AND e.dead_at IS NULL AND NOT e.solo AND e.next_attempt_at <= @now::timestamptz
                  AND e.id NOT IN (SELECT unnest(c.event_ids) FROM webhook_claims c)) AS batch,
       EXISTS (SELECT 1 FROM webhook_claims c
                WHERE cardinality(c.event_ids) > 0 AND c.locked_until <= @now::timestamptz) AS expired;

-- name: EventClaimBatch :many
-- Claims up to @max due events that may run together (not solo), oldest
-- due first, for the transaction that runs them: FOR NO KEY UPDATE SKIP
-- LOCKED locks them until it ends, so concurrent processors take disjoint
-- events without waiting on each other, and nobody else changes them
-- meanwhile (the receiver's ON CONFLICT DO NOTHING takes no row lock,
-- so it is never held up by a claim). The events
-- of any claim in webhook_claims are left out: those of a running
-- fallback, and those of a processor that died, whose locks went with its
-- session but whose attempts are still to be recorded as interrupted.
--
-- The inner SELECT walks webhook_events_due_idx (next_attempt_at, id), so
-- its cost follows the backlog, not the table. Bodies are returned while
-- their running total stays within @body_budget (body_loaded); the others
-- are read later, a budget at a time (EventListBodies), or not at all (an
-- archived body is in S3; a body larger than the budget is refused).
-- Payloads are not read: a handler is handed the body, which is the JSON
-- the payload was parsed from, and has_payload says it was JSON.
--
-- pauses is every pause in force, as the events it holds name it
-- ("source:NAME", "handler:ROUTE"; inbox.HoldOf), the same in every row:
-- an uncorrelated subquery, run once per statement (a few rows of
-- webhook_pauses). Reading them here rather than in a statement of their
-- own saves each claim a round trip, about a tenth of the processor's
-- time per event in make bench's drain.
WITH locked AS (
    SELECT e.id, e.provider, e.source_kind, e.event_id, e.event_type, e.metadata, e.body_sha256, e.body_size,
           e.created_at, e.attempts, e.failed_attempts, e.next_attempt_at, e.archive_key, e.archive_offset,
           e.archive_length, e.archived_at, e.payload IS NOT NULL AS has_payload, e.body
      FROM webhook_events e
     WHERE e.processed_at IS NULL AND e.dead_at IS NULL AND NOT e.solo
       AND e.next_attempt_at <= @now::timestamptz
       AND e.id NOT IN (SELECT unnest(c.event_ids) FROM webhook_claims c)
     ORDER BY e.next_attempt_at, e.id
     LIMIT @max::int
       FOR NO KEY UPDATE SKIP LOCKED
)
SELECT l.id, l.provider, l.source_kind, l.event_id, l.event_type, l.metadata, l.body_sha256, l.body_size, l.created_at,
       l.attempts, l.failed_attempts, l.next_attempt_at, l.archive_key, l.archive_offset, l.archive_length, l.archived_at,
       l.has_payload::boolean AS has_payload, (sum(l.body_size) OVER w) <= @body_budget::bigint AS body_loaded,
       (CASE WHEN (sum(l.body_size) OVER w) <= @body_budget::bigint THEN l.body END)::bytea AS body,
       (SELECT coalesce(array_agg(p.scope || ':' || p.name), '{}') FROM webhook_pauses p)::text[] AS pauses
  FROM locked l
WINDOW w AS (ORDER BY l.next_attempt_at, l.id)
 ORDER BY l.next_attempt_at, l.id;

-- name: EventClaimSolo :many
-- Claims the oldest due event that must run alone (solo: an attempt of it
-- failed or was interrupted), as EventClaimBatch does, over
-- webhook_events_solo_due_idx.
WITH locked AS (
    SELECT e.id, e.provider, e.source_kind, e.event_id, e.event_type, e.metadata, e.body_sha256, e.body_size,
           e.created_at, e.attempts, e.failed_attempts, e.next_attempt_at, e.archive_key, e.archive_offset,
           e.archive_length, e.archived_at, e.payload IS NOT NULL AS has_payload, e.body
      FROM webhook_events e
     WHERE e.processed_at IS NULL AND e.dead_at IS NULL AND e.solo
       AND e.next_attempt_at <= @now::timestamptz
       AND e.id NOT IN (SELECT unnest(c.event_ids) FROM webhook_claims c)
     ORDER BY e.next_attempt_at, e.id
     LIMIT 1
       FOR NO KEY UPDATE SKIP LOCKED
)
SELECT l.id, l.provider, l.source_kind, l.event_id, l.event_type, l.metadata, l.body_sha256, l.body_size, l.created_at,
       l.attempts, l.failed_attempts, l.next_attempt_at, l.archive_key, l.archive_offset, l.archive_length, l.archived_at,
       l.has_payload::boolean AS has_payload, (sum(l.body_size) OVER w) <= @body_budget::bigint AS body_loaded,
       (CASE WHEN (sum(l.body_size) OVER w) <= @body_budget::bigint THEN l.body END)::bytea AS body,
       (SELECT coalesce(array_agg(p.scope || ':' || p.name), '{}') FROM webhook_pauses p)::text[] AS pauses
  FROM locked l
WINDOW w AS (ORDER BY l.next_attempt_at, l.id)
 ORDER BY l.next_attempt_at, l.id;

-- name: EventListBodies :many
-- The bodies of claimed events that EventClaimBatch left out of its
-- budget, read in the claim's transaction a budget at a time.
SELECT id, body FROM webhook_events WHERE id = ANY(@ids::bigint[]);

-- name: EventLockClaimed :one
-- Locks again one event of a claim whose transaction failed, for the
-- claim's fallback (one transaction per event), if it is still to be
-- processed; no row: it is processed or dead.
SELECT id FROM webhook_events WHERE id = @id::bigint AND processed_at IS NULL AND dead_at IS NULL FOR NO KEY UPDATE;

-- name: EventFinish :many
-- Records the attempts of a claim's events, in the transaction that ran
-- them and holds their row locks, so that an event's outcome commits with
-- its handler's work, or not at all. Per event (the arrays are parallel):
-- the attempt is counted (attempts + 1, the history's row number); handled
-- and unhandled mark the event processed; failed counts a failure of the
-- run, makes the event solo (it runs alone from now on), records the error
-- and the next attempt's time, or the death when @dead. The history row is
-- written by the same statement.
WITH result AS (
    SELECT unnest(@ids::bigint[]) AS id, unnest(@outcomes::text[]) AS outcome, unnest(@causes::text[]) AS cause,
           unnest(@errors::text[]) AS error, unnest(@started_at::timestamptz[]) AS started_at,
           unnest(@finished_at::timestamptz[]) AS finished_at, unnest(@next_attempt_at::timestamptz[]) AS next_attempt_at,
           unnest(@dead::boolean[]) AS dead
), ev AS (
    UPDATE webhook_events e
       SET attempts = e.attempts + 1,
           last_attempt_at = r.started_at,
           processed_at = CASE WHEN r.outcome IN ('handled', 'unhandled') THEN r.finished_at END,
           outcome = CASE WHEN r.outcome IN ('handled', 'unhandled') THEN r.outcome END,
           failed_attempts = e.failed_attempts + CASE WHEN r.outcome = 'failed' THEN 1 ELSE 0 END,
           solo = e.solo OR r.outcome = 'failed',
           last_error = CASE WHEN r.outcome = 'failed' THEN r.error ELSE e.last_error END,
           next_attempt_at = CASE WHEN r.outcome = 'failed' AND NOT r.dead THEN r.next_attempt_at ELSE e.next_attempt_at END,
           dead_at = CASE WHEN r.dead THEN r.finished_at END
      FROM result r
     WHERE e.id = r.id AND e.processed_at IS NULL AND e.dead_at IS NULL
    RETURNING e.id, e.attempts
)
INSERT INTO webhook_attempts (event_pk, attempt, started_at, finished_at, outcome, cause, error, dead, processor, batch_size)
SELECT ev.id, ev.attempts, r.started_at, r.finished_at, r.outcome, r.cause, r.error, r.dead, @processor::text, @batch_size::int
  FROM ev JOIN result r ON r.id = ev.id
RETURNING event_pk, attempt;

-- name: EventRecordInterrupted :many
-- Records the attempt that never finished of each still-unprocessed event
-- of claims found past their lease (their processor died or froze), in
-- the transaction that then empties those claims. Such an event runs alone
-- from now on (solo). If it ran alone (batch size 1) the attempt counts as
-- a failure of the run, and moves it to the dead letters when that spends
-- @max_attempts; an attempt interrupted in a batch may have been a
-- neighbour's doing, so it is recorded but not charged: the event gets its
-- attempt alone, where it answers for itself.
WITH interrupted AS (
    SELECT unnest(@ids::bigint[]) AS id, unnest(@started_at::timestamptz[]) AS started_at,
           unnest(@processors::text[]) AS processor, unnest(@batch_sizes::int[]) AS batch_size
), ev AS (
    UPDATE webhook_events e
       SET attempts = e.attempts + 1, last_attempt_at = i.started_at,
           failed_attempts = e.failed_attempts + CASE WHEN i.batch_size = 1 THEN 1 ELSE 0 END, solo = true,
           last_error = @error::text, next_attempt_at = @now::timestamptz,
           dead_at = CASE WHEN i.batch_size = 1 AND e.failed_attempts + 1 >= @max_attempts::int THEN @now::timestamptz END
      FROM interrupted i
     WHERE e.id = i.id AND e.processed_at IS NULL AND e.dead_at IS NULL
    RETURNING e.id, e.provider, e.event_id, e.attempts, (e.dead_at IS NOT NULL)::boolean AS dead
), history AS (
    INSERT INTO webhook_attempts (event_pk, attempt, started_at, outcome, cause, error, dead, processor, batch_size)
    SELECT ev.id, ev.attempts, i.started_at, 'interrupted', @cause::text, @error::text, ev.dead, i.processor, i.batch_size
      FROM ev JOIN interrupted i ON i.id = ev.id
    RETURNING event_pk
)
SELECT ev.id, ev.provider, ev.event_id, ev.attempts, ev.dead::boolean AS dead FROM ev JOIN history h ON h.event_pk = ev.id;

-- name: EventDeadLetter :many
-- Copies events that EventFinish or EventRecordInterrupted just marked
-- dead, in the same transaction, into webhook_dead_letters, with the
-- history of their failed and interrupted attempts, so there is never a
-- dead event without its dead letter or the reverse. An archived event
-- (replayed from the archive) has no body here: its body stays in S3.
INSERT INTO webhook_dead_letters (event_pk, provider, event_id, event_type, payload, body, attempts, errors, last_error, dead_at)
SELECT e.id, e.provider, e.event_id, e.event_type, e.payload, e.body, e.attempts,
       coalesce((SELECT jsonb_agg(jsonb_build_object(
                            'attempt', a.attempt, 'at', coalesce(a.finished_at, a.started_at), 'cause', a.cause, 'error', a.error)
                        ORDER BY a.attempt)
                   FROM webhook_attempts a WHERE a.event_pk = e.id AND a.outcome IN ('failed', 'interrupted')), '[]'::jsonb),
       e.last_error, e.dead_at
  FROM webhook_events e
 WHERE e.id = ANY(@ids::bigint[]) AND e.dead_at IS NOT NULL
RETURNING id, event_pk;

-- name: EventGetBacklog :one
-- The processor's to-do list at @now. Both predicates restate
-- webhook_events_due_idx's, and every column read is in it, so this is an
-- index-only scan of the backlog: its cost follows the backlog, never the
-- table. Events a live claim holds are running, not waiting: they are in
-- the count, not in the due part. Events a pause holds (next_attempt_at
-- 9999-12-31, 00017) are in the count, never due (so never the oldest
-- due), and counted apart as paused, still from the index alone. The
-- processor runs it at the end of each run.
SELECT count(*) AS count,
       count(*) FILTER (WHERE next_attempt_at = '9999-12-31 00:00:00+00'::timestamptz) AS paused,
       count(*) FILTER (WHERE next_attempt_at <= @now::timestamptz AND id NOT IN (
           SELECT unnest(c.event_ids) FROM webhook_claims c WHERE c.locked_until > @now::timestamptz)) AS due,
       min(next_attempt_at) FILTER (WHERE next_attempt_at <= @now::timestamptz AND id NOT IN (
           SELECT unnest(c.event_ids) FROM webhook_claims c WHERE c.locked_until > @now::timestamptz)) AS oldest_due_at
  FROM webhook_events
 WHERE processed_at IS NULL AND dead_at IS NULL;

-- name: EventGetNextWake :one
-- When the processor has work next, for the wake-up it arms as it stops
-- (shared/wake): the earliest next attempt among the unprocessed live
-- events (the first entry of webhook_events_due_idx, whose predicate this
-- restates), and the earliest end of a claim's lease (a processor that
-- died leaves its events to be recovered then). NULL: nothing is waiting.
--
-- Held events (a pause's: next_attempt_at 9999-12-31, 00017) wait for a
-- resume, which wakes the processor itself: they are left out, which
-- stops the scan at the held part of the index.
SELECT least(
    (SELECT min(next_attempt_at) FROM webhook_events
      WHERE processed_at IS NULL AND dead_at IS NULL AND next_attempt_at < '9999-12-31 00:00:00+00'::timestamptz),
    (SELECT min(locked_until) FROM webhook_claims WHERE cardinality(event_ids) > 0)
) AS next_wake_at;

-- name: EventGetBacklogStats :one
-- The backlog in an operator's detail. It visits every backlog row
-- (created_at and failed_attempts are not in the index): fine for a
-- command, not for every drain. in_flight counts what live claims hold;
-- retrying the others with a failed or interrupted attempt in this run;
-- paused the events a pause holds (00017), never due.
WITH running AS (
    SELECT unnest(c.event_ids) AS id FROM webhook_claims c WHERE c.locked_until > @now::timestamptz
)
SELECT count(*) AS count,
       count(*) FILTER (WHERE e.next_attempt_at <= @now::timestamptz AND e.id NOT IN (SELECT id FROM running)) AS due,
       min(e.next_attempt_at) FILTER (WHERE e.next_attempt_at <= @now::timestamptz AND e.id NOT IN (SELECT id FROM running)) AS oldest_due_at,
       count(*) FILTER (WHERE e.id IN (SELECT id FROM running)) AS in_flight,
       count(*) FILTER (WHERE e.failed_attempts > 0 AND e.held_by IS NULL AND e.id NOT IN (SELECT id FROM running)) AS retrying,
       count(*) FILTER (WHERE e.held_by IS NOT NULL) AS paused,
       min(e.created_at) AS oldest_created_at
  FROM webhook_events e
 WHERE e.processed_at IS NULL AND e.dead_at IS NULL;

-- name: EventCountReplay :one
-- What a replay filter selects among processed, unexpunged, live events
-- whose body is still somewhere (not expired by the retention pass), an
-- event an operator discarded or resolved only when the filter names it,
-- by id or by that outcome (a replay by source or time does not run what
-- someone decided must not run):
-- replayable, the events EventListReplayableIDs returns and EventReplay
-- resets, and archived, the part of them whose body is in S3 (the
-- processor reads it back from its archive object, hash verified). NULL
-- filter values match anything. One statement for replay's dry run and
-- its report; last_id, the highest id selected, bounds a replay done in
-- several calls (EventReplay's Max).
SELECT count(*) AS replayable,
       count(*) FILTER (WHERE e.archived_at IS NOT NULL) AS archived,
       coalesce(max(e.id), 0)::bigint AS last_id
  FROM webhook_events e
 WHERE e.processed_at IS NOT NULL AND e.dead_at IS NULL AND e.expunged_at IS NULL
   AND (e.body IS NOT NULL OR (e.archived_at IS NOT NULL AND e.body_expired_at IS NULL))
   AND (sqlc.narg('id')::bigint IS NULL OR e.id = sqlc.narg('id')::bigint)
   AND (sqlc.narg('source')::text IS NULL OR e.provider = sqlc.narg('source')::text)
   AND (sqlc.narg('event_type')::text IS NULL OR e.event_type = sqlc.narg('event_type')::text)
   AND (sqlc.narg('outcome')::text IS NULL OR e.outcome = sqlc.narg('outcome')::text)
   AND (sqlc.narg('processed_from')::timestamptz IS NULL OR e.processed_at >= sqlc.narg('processed_from')::timestamptz)
   AND (sqlc.narg('processed_to')::timestamptz IS NULL OR e.processed_at < sqlc.narg('processed_to')::timestamptz)
   AND (sqlc.narg('ids')::bigint[] IS NULL OR e.id = ANY(sqlc.narg('ids')::bigint[]))
   AND (sqlc.narg('received_from')::timestamptz IS NULL OR e.created_at >= sqlc.narg('received_from')::timestamptz)
   AND (sqlc.narg('received_to')::timestamptz IS NULL OR e.created_at < sqlc.narg('received_to')::timestamptz)
   AND (sqlc.narg('error_text')::text IS NULL OR strpos(lower(coalesce(e.last_error, '')), lower(sqlc.narg('error_text')::text)) > 0)
   AND (sqlc.narg('cause')::text IS NULL OR EXISTS (
        SELECT 1 FROM webhook_attempts a WHERE a.event_pk = e.id AND a.attempt = e.attempts AND a.cause = sqlc.narg('cause')::text))
   AND (coalesce(e.outcome, '') NOT IN ('discarded', 'resolved')
        OR sqlc.narg('id')::bigint IS NOT NULL OR sqlc.narg('ids')::bigint[] IS NOT NULL OR sqlc.narg('outcome')::text IS NOT NULL);

-- name: EventListReplayableIDs :many
-- The ids EventReplay resets (the replayable of EventCountReplay),
-- selected once so that each event is replayed at most once even if the
-- processor finishes an early chunk while later ones are being reset. A
-- replay done in several calls takes them in id order, at most @max at a
-- time (NULL: all), after the last one reset (@after_id) and up to the
-- last one the first call selected (@through_id): an event reset and
-- processed again meanwhile is behind the cursor, never replayed twice.
SELECT e.id FROM webhook_events e
 WHERE e.processed_at IS NOT NULL AND e.dead_at IS NULL AND e.expunged_at IS NULL
   AND (e.body IS NOT NULL OR (e.archived_at IS NOT NULL AND e.body_expired_at IS NULL))
   AND (sqlc.narg('id')::bigint IS NULL OR e.id = sqlc.narg('id')::bigint)
   AND (sqlc.narg('source')::text IS NULL OR e.provider = sqlc.narg('source')::text)
   AND (sqlc.narg('event_type')::text IS NULL OR e.event_type = sqlc.narg('event_type')::text)
   AND (sqlc.narg('outcome')::text IS NULL OR e.outcome = sqlc.narg('outcome')::text)
   AND (sqlc.narg('processed_from')::timestamptz IS NULL OR e.processed_at >= sqlc.narg('processed_from')::timestamptz)
   AND (sqlc.narg('processed_to')::timestamptz IS NULL OR e.processed_at < sqlc.narg('processed_to')::timestamptz)
   AND (sqlc.narg('ids')::bigint[] IS NULL OR e.id = ANY(sqlc.narg('ids')::bigint[]))
   AND (sqlc.narg('received_from')::timestamptz IS NULL OR e.created_at >= sqlc.narg('received_from')::timestamptz)
   AND (sqlc.narg('received_to')::timestamptz IS NULL OR e.created_at < sqlc.narg('received_to')::timestamptz)
   AND (sqlc.narg('error_text')::text IS NULL OR strpos(lower(coalesce(e.last_error, '')), lower(sqlc.narg('error_text')::text)) > 0)
   AND (sqlc.narg('cause')::text IS NULL OR EXISTS (
        SELECT 1 FROM webhook_attempts a WHERE a.event_pk = e.id AND a.attempt = e.attempts AND a.cause = sqlc.narg('cause')::text))
   AND (coalesce(e.outcome, '') NOT IN ('discarded', 'resolved')
        OR sqlc.narg('id')::bigint IS NOT NULL OR sqlc.narg('ids')::bigint[] IS NOT NULL OR sqlc.narg('outcome')::text IS NOT NULL)
   AND (sqlc.narg('after_id')::bigint IS NULL OR e.id > sqlc.narg('after_id')::bigint)
   AND (sqlc.narg('through_id')::bigint IS NULL OR e.id <= sqlc.narg('through_id')::bigint)
 ORDER BY e.id
 LIMIT sqlc.narg('max')::int;

-- name: EventReplay :one
-- Makes a chunk of replayable events unprocessed and due at @now: a new
-- run, with its failures and last error reset. The attempts and their
-- history stay (a replay adds to them; the next attempt has the next
-- number), and so does solo. Each row is re-checked against the
-- replayable predicate. The same statement links the events to the
-- replay's record (@action_id, OperatorActionInsert) and adds them to its
-- count, so no event is replayed without its record. Returns how many.
WITH replayed AS (
    UPDATE webhook_events e
       SET processed_at = NULL, outcome = NULL, failed_attempts = 0, last_error = NULL, next_attempt_at = @now::timestamptz
     WHERE e.id = ANY(@ids::bigint[])
       AND e.processed_at IS NOT NULL AND e.dead_at IS NULL AND e.expunged_at IS NULL
       AND (e.body IS NOT NULL OR (e.archived_at IS NOT NULL AND e.body_expired_at IS NULL))
    RETURNING e.id
), link AS (
    INSERT INTO webhook_operator_action_events (event_pk, action_id)
    SELECT id, @action_id::bigint FROM replayed
), counted AS (
    UPDATE webhook_operator_actions SET events = events + (SELECT count(*) FROM replayed) WHERE id = @action_id::bigint
)
SELECT count(*) FROM replayed;

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

-- name: EventExpunge :one
-- Erases every copy of the body the event's row holds, keeping the row
-- (the dedup memory and audit trail): payload and body, metadata (sender
-- identifiers beside the dedup key, which a kind may take from the body)
-- and last_error, which a handler may have written quoting the body; a
-- last error becomes @redacted, so the row still says one was recorded.
-- An event erased before it was processed leaves the drain: there is
-- nothing left to apply, and it must not reach a handler bodiless.
-- Returns what the row held before (the caller holds the row locked).
WITH old AS (
    SELECT id, payload IS NOT NULL AS had_payload, body IS NOT NULL AS had_body, metadata IS NOT NULL AS had_metadata,
           coalesce(last_error, '') NOT IN ('', @redacted::text) AS had_last_error
      FROM webhook_events WHERE id = @id::bigint
)
UPDATE webhook_events e SET payload = NULL, body = NULL, metadata = NULL,
       last_error = CASE WHEN coalesce(e.last_error, '') = '' THEN e.last_error ELSE @redacted::text END,
       expunged_at = coalesce(e.expunged_at, now()),
       outcome = CASE WHEN e.processed_at IS NULL THEN 'expunged' ELSE e.outcome END,
       processed_at = coalesce(e.processed_at, now())
  FROM old
 WHERE e.id = old.id
RETURNING old.had_payload::boolean AS had_payload, old.had_body::boolean AS had_body,
          old.had_metadata::boolean AS had_metadata, old.had_last_error::boolean AS had_last_error;

-- name: EventExpireArchived :one
-- Marks the events of an archive object the retention pass has just
-- deleted (@key, its events' ids within @first_id..@last_id, which the
-- primary key finds without a scan for the key), in the transaction that
-- holds its manifest row: body_expired_at set, and any payload or body
-- still in the row cleared, with the copies their dead letters hold. The
-- key, the hash, the metadata and the processing record stay: a
-- redelivery is still a duplicate. Rows already marked are left alone.
WITH expired AS (
    UPDATE webhook_events e SET body_expired_at = now(), payload = NULL, body = NULL
     WHERE e.id BETWEEN @first_id::bigint AND @last_id::bigint AND e.archive_key = @key::text AND e.body_expired_at IS NULL
    RETURNING e.id
), copies AS (
    UPDATE webhook_dead_letters d SET payload = NULL, body = NULL
      FROM expired WHERE d.event_pk = expired.id AND (d.payload IS NOT NULL OR d.body IS NOT NULL)
)
SELECT count(*) FROM expired;

-- name: EventExpireBodies :one
-- Clears, for the retention pass, the bodies still in Postgres of at most
-- @max processed events received before @received_before (the archiver
-- did not take them yet, or retention is shorter than its age), oldest
-- processed first through webhook_events_archivable_idx, skipping rows an
-- archive batch holds: body_expired_at set, payload and body cleared, and
-- their dead letters' copies. An event not processed (due, or dead) keeps
-- its body: the drain or a requeue still needs it. The conditions are
-- restated in the update, so that a row replayed meanwhile is left alone.
WITH chosen AS (
    SELECT id FROM webhook_events
     WHERE processed_at IS NOT NULL AND archived_at IS NULL AND body IS NOT NULL
       AND created_at < @received_before::timestamptz
     ORDER BY processed_at, id
     LIMIT @max::int
     FOR NO KEY UPDATE SKIP LOCKED
), expired AS (
    UPDATE webhook_events e SET body_expired_at = now(), payload = NULL, body = NULL
      FROM chosen
     WHERE e.id = chosen.id AND e.processed_at IS NOT NULL AND e.archived_at IS NULL AND e.body IS NOT NULL
    RETURNING e.id
), copies AS (
    UPDATE webhook_dead_letters d SET payload = NULL, body = NULL
      FROM expired WHERE d.event_pk = expired.id AND (d.payload IS NOT NULL OR d.body IS NOT NULL)
)
SELECT count(*) FROM expired;

-- name: EventCountByBucket :many
-- Events stored (accepted) per time bucket of bucket_seconds from since
-- up to until, by created_at: the console's chart. The window bounds the
-- scan to its pages through webhook_events_created_at_brin (00010);
-- buckets without events are absent.
SELECT date_bin(make_interval(secs => @bucket_seconds::float8), created_at, @since::timestamptz)::timestamptz AS bucket,
       count(*) AS count
  FROM webhook_events
 WHERE created_at >= @since::timestamptz AND created_at < @until::timestamptz
 GROUP BY 1 ORDER BY 1;

-- name: EventCountUnhandledByRoute :many
-- Events processed without a handler (outcome 'unhandled'), per source,
-- kind and type: the dev stack's start-up replays those whose route now
-- has a handler. webhook_events_unhandled_idx (00012) holds exactly these
-- rows; expunged events have no body to replay.
SELECT provider, source_kind, event_type, count(*) AS count
  FROM webhook_events
 WHERE outcome = 'unhandled' AND expunged_at IS NULL
 GROUP BY provider, source_kind, event_type
 ORDER BY provider, source_kind, event_type;

-- name: EventHoldSource :execrows
-- Holds the waiting events of a paused source, in the pause's transaction
-- (00017): each keeps when it was due (held_due_at) and gets
-- next_attempt_at 9999-12-31 (the far future; not 'infinity', which a
-- Go time cannot hold), beyond every claim's range scan. The
-- predicate restates webhook_events_due_idx's, so the backlog is what it
-- reads. Events a claim holds (locked, or in webhook_claims) are left to
-- run: the processor holds them when it meets them again (a retry, or
-- the recovery of a dead processor's claim), and one claimed just before
-- the pause commits runs once more.
WITH waiting AS (
    SELECT e.id FROM webhook_events e
     WHERE e.processed_at IS NULL AND e.dead_at IS NULL AND e.next_attempt_at < '9999-12-31 00:00:00+00'::timestamptz
       AND e.provider = @source::text
       AND e.id NOT IN (SELECT unnest(c.event_ids) FROM webhook_claims c)
       FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE webhook_events e
   SET held_by = @held_by::text, held_due_at = e.next_attempt_at, next_attempt_at = '9999-12-31 00:00:00+00'::timestamptz
  FROM waiting w
 WHERE e.id = w.id;

-- name: EventHoldClaimed :execrows
-- Holds claimed events that a pause covers instead of running them, in
-- the claim's transaction, which locks them: no attempt is counted. Per
-- event (parallel arrays) the pause that holds it, 'source:NAME' or
-- 'handler:ROUTE'.
UPDATE webhook_events e
   SET held_by = h.held_by, held_due_at = e.next_attempt_at, next_attempt_at = '9999-12-31 00:00:00+00'::timestamptz
  FROM (SELECT unnest(@ids::bigint[]) AS id, unnest(@held_by::text[]) AS held_by) h
 WHERE e.id = h.id AND e.processed_at IS NULL AND e.dead_at IS NULL;

-- name: EventRelease :execrows
-- Releases the events a pause held (@held_by), in the resume's
-- transaction: each is due again when it was due, or at @now if that has
-- passed, with its attempts as they were. It reads the held part of
-- webhook_events_due_idx only (next_attempt_at 9999-12-31).
UPDATE webhook_events
   SET next_attempt_at = greatest(held_due_at, @now::timestamptz), held_by = NULL, held_due_at = NULL
 WHERE processed_at IS NULL AND dead_at IS NULL AND next_attempt_at = '9999-12-31 00:00:00+00'::timestamptz
   AND held_by = @held_by::text;

-- name: EventCountHeld :one
-- How many events a pause (@held_by) holds, and, for a source's pause
-- (@source, NULL for a handler's), how many more it would hold now: what
-- a pause's or a resume's dry run counts. Both read the backlog's part of
-- webhook_events_due_idx only.
SELECT count(*) FILTER (WHERE held_by = @held_by::text AND next_attempt_at = '9999-12-31 00:00:00+00'::timestamptz) AS held,
       count(*) FILTER (WHERE provider = sqlc.narg('source')::text AND held_by IS NULL
                          AND next_attempt_at < '9999-12-31 00:00:00+00'::timestamptz
                          AND id NOT IN (SELECT unnest(c.event_ids) FROM webhook_claims c)) AS waiting
  FROM webhook_events
 WHERE processed_at IS NULL AND dead_at IS NULL;

-- name: EventCountDiscardable :one
-- What EventDiscard would finish now: the unprocessed live events (the
-- rows of webhook_events_due_idx, due now or later, claimed or not) a
-- filter selects, and the highest of their ids (last_id), which bounds a
-- discard done in several calls. The cause is the last attempt's, the
-- error text a case-insensitive substring of last_error, the receipt
-- window created_at; NULL values match anything.
SELECT count(*) AS discardable, coalesce(max(e.id), 0)::bigint AS last_id
  FROM webhook_events e
 WHERE e.processed_at IS NULL AND e.dead_at IS NULL
   AND (sqlc.narg('id')::bigint IS NULL OR e.id = sqlc.narg('id')::bigint)
   AND (sqlc.narg('source')::text IS NULL OR e.provider = sqlc.narg('source')::text)
   AND (sqlc.narg('event_type')::text IS NULL OR e.event_type = sqlc.narg('event_type')::text)
   AND (sqlc.narg('ids')::bigint[] IS NULL OR e.id = ANY(sqlc.narg('ids')::bigint[]))
   AND (sqlc.narg('received_from')::timestamptz IS NULL OR e.created_at >= sqlc.narg('received_from')::timestamptz)
   AND (sqlc.narg('received_to')::timestamptz IS NULL OR e.created_at < sqlc.narg('received_to')::timestamptz)
   AND (sqlc.narg('error_text')::text IS NULL OR strpos(lower(coalesce(e.last_error, '')), lower(sqlc.narg('error_text')::text)) > 0)
   AND (sqlc.narg('cause')::text IS NULL OR EXISTS (
        SELECT 1 FROM webhook_attempts a WHERE a.event_pk = e.id AND a.attempt = e.attempts AND a.cause = sqlc.narg('cause')::text));

-- name: EventListDiscardableIDs :many
-- The ids EventDiscard finishes (the discardable of EventCountDiscardable),
-- in id order, at most @max (NULL: all), after the last one finished
-- (@after_id) and up to the last one the first call counted
-- (@through_id): an event received after the count is never discarded by
-- the calls that continue it.
SELECT e.id
  FROM webhook_events e
 WHERE e.processed_at IS NULL AND e.dead_at IS NULL
   AND (sqlc.narg('id')::bigint IS NULL OR e.id = sqlc.narg('id')::bigint)
   AND (sqlc.narg('source')::text IS NULL OR e.provider = sqlc.narg('source')::text)
   AND (sqlc.narg('event_type')::text IS NULL OR e.event_type = sqlc.narg('event_type')::text)
   AND (sqlc.narg('ids')::bigint[] IS NULL OR e.id = ANY(sqlc.narg('ids')::bigint[]))
   AND (sqlc.narg('received_from')::timestamptz IS NULL OR e.created_at >= sqlc.narg('received_from')::timestamptz)
   AND (sqlc.narg('received_to')::timestamptz IS NULL OR e.created_at < sqlc.narg('received_to')::timestamptz)
   AND (sqlc.narg('error_text')::text IS NULL OR strpos(lower(coalesce(e.last_error, '')), lower(sqlc.narg('error_text')::text)) > 0)
   AND (sqlc.narg('cause')::text IS NULL OR EXISTS (
        SELECT 1 FROM webhook_attempts a WHERE a.event_pk = e.id AND a.attempt = e.attempts AND a.cause = sqlc.narg('cause')::text))
   AND (sqlc.narg('after_id')::bigint IS NULL OR e.id > sqlc.narg('after_id')::bigint)
   AND (sqlc.narg('through_id')::bigint IS NULL OR e.id <= sqlc.narg('through_id')::bigint)
 ORDER BY e.id
 LIMIT sqlc.narg('max')::int;

-- name: EventDiscard :one
-- Finishes a chunk of unprocessed live events without running them:
-- outcome 'discarded', processed_at @now, so that they leave
-- webhook_events_due_idx (no claim finds them again), the archiver
-- archives their bodies, and a replay naming them can still run them.
-- The UPDATE takes each row's lock, so it waits for a processor's
-- transaction that holds the event (FOR NO KEY UPDATE) and then re-checks
-- it: an event that transaction processed is not discarded (it ran before
-- the discard), and one it left unprocessed is, and then every path of
-- the processor (a claim, its fallback, the recovery of an interrupted
-- claim) skips it, since each re-checks processed_at under its lock. The
-- same statement links the events to the discard's record (@action_id)
-- and adds them to its count. Returns how many it discarded.
WITH discarded AS (
    UPDATE webhook_events e
       SET processed_at = @now::timestamptz, outcome = 'discarded'
     WHERE e.id = ANY(@ids::bigint[]) AND e.processed_at IS NULL AND e.dead_at IS NULL
    RETURNING e.id
), link AS (
    INSERT INTO webhook_operator_action_events (event_pk, action_id)
    SELECT id, @action_id::bigint FROM discarded
), counted AS (
    UPDATE webhook_operator_actions SET events = events + (SELECT count(*) FROM discarded) WHERE id = @action_id::bigint
)
SELECT count(*) FROM discarded;
