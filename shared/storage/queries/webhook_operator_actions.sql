-- Queries on webhook_operator_actions and webhook_operator_action_events:
-- the record of every operator action (migration 00008). Replays and
-- requeues write theirs within their own statements (EventReplay,
-- DeadLetterRequeue); an expunge with OperatorActionRecord, in its
-- transaction. Rows are never changed but a replay's running count.
;

-- name: OperatorActionInsert :one
-- Starts the record of an action whose events come in chunks (a replay):
-- each chunk's statement links its events and adds to the count.
INSERT INTO webhook_operator_actions (action, actor, filter, reason)
VALUES (@kind::text, @actor::text, sqlc.arg('selection')::text::jsonb, @reason::text)
RETURNING id;

-- name: OperatorActionRecord :one
-- Records an action and the events it changed, in one statement (run it in
-- the transaction that changes them).
WITH act AS (
    INSERT INTO webhook_operator_actions (action, actor, filter, reason, events)
    VALUES (@kind::text, @actor::text, sqlc.arg('selection')::text::jsonb, @reason::text, cardinality(@event_ids::bigint[]))
    RETURNING id
), link AS (
    INSERT INTO webhook_operator_action_events (event_pk, action_id)
    SELECT unnest(@event_ids::bigint[]), act.id FROM act
)
SELECT id FROM act;

-- name: OperatorActionList :many
-- The latest actions, newest first.
SELECT * FROM webhook_operator_actions
 WHERE (sqlc.narg('since')::timestamptz IS NULL OR at >= sqlc.narg('since')::timestamptz)
 ORDER BY id DESC
 LIMIT @max::int;

-- name: OperatorActionGetByID :one
-- One action's record: a replay done in several calls is continued only
-- under its own record, by its own actor, with its own selection.
SELECT * FROM webhook_operator_actions WHERE id = @id::bigint;

-- name: OperatorActionListPage :many
-- A page of the actions, newest first, before the cursor @before (the
-- last id of the page before; NULL for the first) and, with @since, at or
-- after that time: keyset paging on the primary key, so new actions never
-- shift a page.
SELECT * FROM webhook_operator_actions
 WHERE (sqlc.narg('before')::bigint IS NULL OR id < sqlc.narg('before')::bigint)
   AND (sqlc.narg('since')::timestamptz IS NULL OR at >= sqlc.narg('since')::timestamptz)
 ORDER BY id DESC
 LIMIT @max::int;

-- name: OperatorActionListByEvent :many
-- The actions that changed an event, oldest first.
SELECT a.* FROM webhook_operator_actions a
  JOIN webhook_operator_action_events l ON l.action_id = a.id
 WHERE l.event_pk = @event_pk::bigint
 ORDER BY a.id;

-- name: OperatorActionRecordCounted :one
-- Records an action with the count of the events it changed but no link
-- to each: a pause or a resume holds or releases a whole source's backlog,
-- which may be large exactly when a pause is needed.
INSERT INTO webhook_operator_actions (action, actor, filter, reason, events)
VALUES (@kind::text, @actor::text, sqlc.arg('selection')::text::jsonb, @reason::text, @events::int)
RETURNING id;
