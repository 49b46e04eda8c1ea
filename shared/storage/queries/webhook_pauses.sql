-- Queries on webhook_pauses: the sources and handlers an operator paused
-- (migration 00017). The operator writes a row with the pause and deletes
-- it with the resume, each in the transaction that holds or releases the
-- events and records the action. The processor reads the whole table once
-- per claim, in the claim's own statement (EventClaimBatch's pauses): a
-- few rows.
;

-- name: PauseInsert :one
-- Pauses a source or a handler; no row: it was already paused (the
-- existing pause keeps its actor and reason).
INSERT INTO webhook_pauses (scope, name, paused_at, actor, reason)
VALUES (@scope::text, @name::text, @now::timestamptz, @actor::text, @reason::text)
ON CONFLICT (scope, name) DO NOTHING
RETURNING paused_at;

-- name: PauseDelete :one
-- Resumes a source or a handler; no row: it was not paused.
DELETE FROM webhook_pauses WHERE scope = @scope::text AND name = @name::text
RETURNING paused_at, actor, reason;

-- name: PauseList :many
-- Every pause, sources first, then by name.
SELECT scope, name, paused_at, actor, reason FROM webhook_pauses ORDER BY scope DESC, name;
