-- Queries on webhook_dead_letters: poison events after their last attempt,
-- with the copy of what an operator needs at 3 a.m. (payload, error
-- history, attempts). Rows are written by EventDeadLetter, whose errors
-- copy the event's failed and interrupted attempts (webhook_attempts). A
-- dead letter is open until it is requeued (requeued_at) or resolved
-- (resolved_at). A filter's NULL values match anything; the predicates are
-- fixed text, so no SQL is built from input, and
-- webhook_dead_letters_unresolved_idx serves provider/type/time. The
-- cause is the last attempt's (the one that killed the event: attempts
-- is its number), the error text a case-insensitive substring of the
-- copy's last_error, the receipt window the event's created_at.
;

-- name: DeadLetterList :many
-- The open dead letters (neither requeued nor resolved) a filter selects, oldest first.
SELECT * FROM webhook_dead_letters d
 WHERE d.requeued_at IS NULL AND d.resolved_at IS NULL
   AND (sqlc.narg('id')::bigint IS NULL OR d.id = sqlc.narg('id')::bigint)
   AND (sqlc.narg('source')::text IS NULL OR d.provider = sqlc.narg('source')::text)
   AND (sqlc.narg('event_type')::text IS NULL OR d.event_type = sqlc.narg('event_type')::text)
   AND (sqlc.narg('dead_from')::timestamptz IS NULL OR d.dead_at >= sqlc.narg('dead_from')::timestamptz)
   AND (sqlc.narg('dead_to')::timestamptz IS NULL OR d.dead_at < sqlc.narg('dead_to')::timestamptz)
   AND (sqlc.narg('ids')::bigint[] IS NULL OR d.id = ANY(sqlc.narg('ids')::bigint[]))
   AND (sqlc.narg('error_text')::text IS NULL OR strpos(lower(coalesce(d.last_error, '')), lower(sqlc.narg('error_text')::text)) > 0)
   AND (sqlc.narg('cause')::text IS NULL OR EXISTS (
        SELECT 1 FROM webhook_attempts a WHERE a.event_pk = d.event_pk AND a.attempt = d.attempts AND a.cause = sqlc.narg('cause')::text))
   AND ((sqlc.narg('received_from')::timestamptz IS NULL AND sqlc.narg('received_to')::timestamptz IS NULL) OR EXISTS (
        SELECT 1 FROM webhook_events r WHERE r.id = d.event_pk
           AND (sqlc.narg('received_from')::timestamptz IS NULL OR r.created_at >= sqlc.narg('received_from')::timestamptz)
           AND (sqlc.narg('received_to')::timestamptz IS NULL OR r.created_at < sqlc.narg('received_to')::timestamptz)))
 ORDER BY d.dead_at, d.id
 LIMIT @max::int;

-- name: DeadLetterListPage :many
-- A page of the open dead letters a filter selects (NULL values match
-- anything), in the order they died (id), after the cursor @after (the
-- last id of the page before; 0 for the first). Keyset paging on
-- webhook_dead_letters_unresolved_id_idx: a page never repeats or skips a row,
-- whatever dies or is requeued between pages (new dead letters come last).
SELECT * FROM webhook_dead_letters d
 WHERE d.requeued_at IS NULL AND d.resolved_at IS NULL
   AND d.id > @after::bigint
   AND (sqlc.narg('id')::bigint IS NULL OR d.id = sqlc.narg('id')::bigint)
   AND (sqlc.narg('source')::text IS NULL OR d.provider = sqlc.narg('source')::text)
   AND (sqlc.narg('event_type')::text IS NULL OR d.event_type = sqlc.narg('event_type')::text)
   AND (sqlc.narg('dead_from')::timestamptz IS NULL OR d.dead_at >= sqlc.narg('dead_from')::timestamptz)
   AND (sqlc.narg('dead_to')::timestamptz IS NULL OR d.dead_at < sqlc.narg('dead_to')::timestamptz)
   AND (sqlc.narg('ids')::bigint[] IS NULL OR d.id = ANY(sqlc.narg('ids')::bigint[]))
   AND (sqlc.narg('error_text')::text IS NULL OR strpos(lower(coalesce(d.last_error, '')), lower(sqlc.narg('error_text')::text)) > 0)
   AND (sqlc.narg('cause')::text IS NULL OR EXISTS (
        SELECT 1 FROM webhook_attempts a WHERE a.event_pk = d.event_pk AND a.attempt = d.attempts AND a.cause = sqlc.narg('cause')::text))
   AND ((sqlc.narg('received_from')::timestamptz IS NULL AND sqlc.narg('received_to')::timestamptz IS NULL) OR EXISTS (
        SELECT 1 FROM webhook_events r WHERE r.id = d.event_pk
           AND (sqlc.narg('received_from')::timestamptz IS NULL OR r.created_at >= sqlc.narg('received_from')::timestamptz)
           AND (sqlc.narg('received_to')::timestamptz IS NULL OR r.created_at < sqlc.narg('received_to')::timestamptz)))
 ORDER BY d.id
 LIMIT @max::int;

-- name: DeadLetterCountSelection :one
-- How many events DeadLetterRequeue would send back, or DeadLetterResolve
-- close, now: the open dead letters a filter selects whose event is still
-- dead, once per event (the dry run of either, on the predicates of
-- DeadLetterListOpenIDs), and the highest of their ids (last_id), which
-- bounds an action done in several calls.
SELECT count(DISTINCT e.id) AS events, coalesce(max(d.id), 0)::bigint AS last_id
  FROM webhook_dead_letters d JOIN webhook_events e ON e.id = d.event_pk AND e.dead_at IS NOT NULL
 WHERE d.requeued_at IS NULL AND d.resolved_at IS NULL
   AND (sqlc.narg('id')::bigint IS NULL OR d.id = sqlc.narg('id')::bigint)
   AND (sqlc.narg('source')::text IS NULL OR d.provider = sqlc.narg('source')::text)
   AND (sqlc.narg('event_type')::text IS NULL OR d.event_type = sqlc.narg('event_type')::text)
   AND (sqlc.narg('dead_from')::timestamptz IS NULL OR d.dead_at >= sqlc.narg('dead_from')::timestamptz)
   AND (sqlc.narg('dead_to')::timestamptz IS NULL OR d.dead_at < sqlc.narg('dead_to')::timestamptz)
   AND (sqlc.narg('ids')::bigint[] IS NULL OR d.id = ANY(sqlc.narg('ids')::bigint[]))
   AND (sqlc.narg('error_text')::text IS NULL OR strpos(lower(coalesce(d.last_error, '')), lower(sqlc.narg('error_text')::text)) > 0)
   AND (sqlc.narg('cause')::text IS NULL OR EXISTS (
        SELECT 1 FROM webhook_attempts a WHERE a.event_pk = d.event_pk AND a.attempt = d.attempts AND a.cause = sqlc.narg('cause')::text))
   AND ((sqlc.narg('received_from')::timestamptz IS NULL AND sqlc.narg('received_to')::timestamptz IS NULL) OR EXISTS (
        SELECT 1 FROM webhook_events r WHERE r.id = d.event_pk
           AND (sqlc.narg('received_from')::timestamptz IS NULL OR r.created_at >= sqlc.narg('received_from')::timestamptz)
           AND (sqlc.narg('received_to')::timestamptz IS NULL OR r.created_at < sqlc.narg('received_to')::timestamptz)));

-- name: DeadLetterRequeue :one
-- Sends a chunk of open dead letters (@ids) back to the drain: each is
-- marked requeued at @now, and its event, still dead, becomes live and due
-- at @now, a new run with its failures and last_error reset. Its attempts
-- and their history stay (a requeue adds to them), and so does solo: an
-- event that died runs alone. Each row is re-checked: a dead letter
-- requeued or resolved meanwhile is left alone. The same statement links
-- the events to the requeue's record (@action_id) and adds them to its
-- count, so there is no requeue without its record. Returns how many
-- events it requeued.
WITH dl AS (
    UPDATE webhook_dead_letters d SET requeued_at = @now::timestamptz
     WHERE d.id = ANY(@ids::bigint[]) AND d.requeued_at IS NULL AND d.resolved_at IS NULL
    RETURNING d.event_pk
), requeued AS (
    UPDATE webhook_events e
       SET dead_at = NULL, failed_attempts = 0, last_error = NULL, next_attempt_at = @now::timestamptz
      FROM dl
     WHERE e.id = dl.event_pk AND e.dead_at IS NOT NULL
    RETURNING e.id
), link AS (
    INSERT INTO webhook_operator_action_events (event_pk, action_id)
    SELECT id, @action_id::bigint FROM requeued
), counted AS (
    UPDATE webhook_operator_actions SET events = events + (SELECT count(*) FROM requeued) WHERE id = @action_id::bigint
)
SELECT count(*) FROM requeued;

-- name: DeadLetterCountByType :many
-- Open dead letters per source and type, largest first;
-- webhook_dead_letters_unresolved_idx holds exactly these rows.
SELECT provider, event_type, count(*) AS count, min(dead_at) AS oldest_dead_at
  FROM webhook_dead_letters WHERE requeued_at IS NULL AND resolved_at IS NULL
 GROUP BY provider, event_type ORDER BY count(*) DESC, provider, event_type;

-- name: DeadLetterListByEvent :many
-- Every dead letter of one event (requeued or not), oldest first: the
-- history of its deaths.
SELECT * FROM webhook_dead_letters WHERE event_pk = @event_pk::bigint ORDER BY dead_at, id;

-- name: DeadLetterExpunge :execrows
-- Erases what an expunged event's dead letters copied of it: payload and
-- body, and the error texts of their history (errors, last_error), which
-- a handler may have written quoting the body; each text becomes
-- @redacted, and the history's attempts, times and causes stay. Returns
-- how many dead letters held anything to erase.
UPDATE webhook_dead_letters d
   SET payload = NULL, body = NULL,
       last_error = CASE WHEN coalesce(d.last_error, '') = '' THEN d.last_error ELSE @redacted::text END,
       errors = (SELECT coalesce(jsonb_agg(CASE WHEN coalesce(x->>'error', '') = '' THEN x
                                               ELSE jsonb_set(x, '{error}', to_jsonb(@redacted::text)) END ORDER BY n), '[]'::jsonb)
                   FROM jsonb_array_elements(d.errors) WITH ORDINALITY AS h(x, n))
 WHERE d.event_pk = @event_pk::bigint
   AND (d.payload IS NOT NULL OR d.body IS NOT NULL OR coalesce(d.last_error, '') NOT IN ('', @redacted::text)
        OR EXISTS (SELECT 1 FROM jsonb_array_elements(d.errors) AS x WHERE coalesce(x->>'error', '') NOT IN ('', @redacted::text)));

-- name: DeadLetterGetOpenStats :one
-- The open dead letters (neither requeued nor resolved) as a gauge: how many, and when the
-- oldest died. webhook_dead_letters_unresolved_idx holds exactly these rows and
-- dead_at, so this is an index-only scan whose cost follows the open dead
-- letters, never the table. The processor reads it for each metrics line.
SELECT count(*) AS count, min(dead_at) AS oldest_dead_at
  FROM webhook_dead_letters WHERE requeued_at IS NULL AND resolved_at IS NULL;

-- name: DeadLetterListOpenIDs :many
-- The ids of the dead letters DeadLetterResolve closes and DeadLetterRequeue
-- sends back: the open ones a filter selects whose event is still dead (the
-- rows DeadLetterCountSelection counts), in id order, at most @max (NULL:
-- all), after the last one done (@after_id) and up to the last one the
-- first call counted (@through_id): a dead letter that dies after the
-- count is not taken by the calls that continue it.
SELECT d.id
  FROM webhook_dead_letters d JOIN webhook_events e ON e.id = d.event_pk AND e.dead_at IS NOT NULL
 WHERE d.requeued_at IS NULL AND d.resolved_at IS NULL
   AND (sqlc.narg('id')::bigint IS NULL OR d.id = sqlc.narg('id')::bigint)
   AND (sqlc.narg('source')::text IS NULL OR d.provider = sqlc.narg('source')::text)
   AND (sqlc.narg('event_type')::text IS NULL OR d.event_type = sqlc.narg('event_type')::text)
   AND (sqlc.narg('dead_from')::timestamptz IS NULL OR d.dead_at >= sqlc.narg('dead_from')::timestamptz)
   AND (sqlc.narg('dead_to')::timestamptz IS NULL OR d.dead_at < sqlc.narg('dead_to')::timestamptz)
   AND (sqlc.narg('ids')::bigint[] IS NULL OR d.id = ANY(sqlc.narg('ids')::bigint[]))
   AND (sqlc.narg('error_text')::text IS NULL OR strpos(lower(coalesce(d.last_error, '')), lower(sqlc.narg('error_text')::text)) > 0)
   AND (sqlc.narg('cause')::text IS NULL OR EXISTS (
        SELECT 1 FROM webhook_attempts a WHERE a.event_pk = d.event_pk AND a.attempt = d.attempts AND a.cause = sqlc.narg('cause')::text))
   AND ((sqlc.narg('received_from')::timestamptz IS NULL AND sqlc.narg('received_to')::timestamptz IS NULL) OR EXISTS (
        SELECT 1 FROM webhook_events r WHERE r.id = d.event_pk
           AND (sqlc.narg('received_from')::timestamptz IS NULL OR r.created_at >= sqlc.narg('received_from')::timestamptz)
           AND (sqlc.narg('received_to')::timestamptz IS NULL OR r.created_at < sqlc.narg('received_to')::timestamptz)))
   AND (sqlc.narg('after_id')::bigint IS NULL OR d.id > sqlc.narg('after_id')::bigint)
   AND (sqlc.narg('through_id')::bigint IS NULL OR d.id <= sqlc.narg('through_id')::bigint)
 ORDER BY d.id
 LIMIT sqlc.narg('max')::int;

-- name: DeadLetterResolve :one
-- Closes a chunk of open dead letters without running their events again:
-- each is marked resolved at @now, and its event, still dead, is finished
-- as it stands (outcome 'resolved', processed_at @now, dead_at cleared),
-- so that it is no dead event any more, the archiver archives its body,
-- and a replay naming it can still run it. Its attempts and history stay.
-- Each row is re-checked: a dead letter requeued or resolved meanwhile is
-- left alone. The same statement links the events to the resolve's record
-- (@action_id) and adds them to its count, so none is resolved without
-- its record. Returns how many events it resolved.
WITH dl AS (
    UPDATE webhook_dead_letters d SET resolved_at = @now::timestamptz
     WHERE d.id = ANY(@ids::bigint[]) AND d.requeued_at IS NULL AND d.resolved_at IS NULL
    RETURNING d.event_pk
), resolved AS (
    UPDATE webhook_events e
       SET dead_at = NULL, processed_at = @now::timestamptz, outcome = 'resolved'
      FROM dl
     WHERE e.id = dl.event_pk AND e.dead_at IS NOT NULL
    RETURNING e.id
), link AS (
    INSERT INTO webhook_operator_action_events (event_pk, action_id)
    SELECT id, @action_id::bigint FROM resolved
), counted AS (
    UPDATE webhook_operator_actions SET events = events + (SELECT count(*) FROM resolved) WHERE id = @action_id::bigint
)
SELECT count(*) FROM resolved;
