-- +goose Up

-- A history that is never overwritten, and the batch processor's claims.
--
-- Until now an event's failed attempts lived in webhook_events.errors, a
-- JSON array that a replay or a requeue reset, and its lease in
-- locked_until/locked_by on the row itself. From here on:
--
--   * webhook_attempts holds one row per attempt, for ever: replays and
--     requeues add to it. It is written outside the work an attempt rolls
--     back (a failure is recorded after the handler's savepoint is rolled
--     back; an attempt whose processor died is recorded by the processor
--     that finds its claim expired).
--   * webhook_claims holds the processors' leases: a processor locks the
--     rows of a batch in the transaction that runs them, and records which
--     rows it holds here, committed before any handler runs. A claim still
--     here after its lease is a batch whose processor died.
--
-- Statements are ordered so that the long part (reading every row's error
-- history) runs before the ALTER TABLEs take their exclusive lock, which is
-- then held only for the short updates that follow, at the very end of the
-- migration's transaction.

CREATE TABLE webhook_attempts (
    event_pk    BIGINT      NOT NULL REFERENCES webhook_events (id),
    -- attempt numbers an event's attempts from 1, over its whole life:
    -- webhook_events.attempts is the last one recorded, and a replay or a
    -- requeue never resets it.
    attempt     INTEGER     NOT NULL CHECK (attempt > 0),
    started_at  TIMESTAMPTZ NOT NULL,
    -- finished_at is NULL for an attempt that never finished: its processor
    -- died or was frozen (outcome interrupted).
    finished_at TIMESTAMPTZ,
    -- outcome: handled (committed with its handler), unhandled (no handler;
    -- marked processed), failed (the handler or the processor refused it:
    -- retried, or dead-lettered, see dead), interrupted (never finished).
    outcome     TEXT        NOT NULL
        CONSTRAINT webhook_attempts_outcome_known CHECK (outcome IN ('handled', 'unhandled', 'failed', 'interrupted')),
    cause       TEXT        NOT NULL DEFAULT '',
    error       TEXT        NOT NULL DEFAULT '',
    -- dead: this attempt moved the event to the dead letters.
    dead        BOOLEAN     NOT NULL DEFAULT false,
    -- processor names the processor that ran it (host:pid/random, its claim
    -- tokens' prefix); batch_size how many events its transaction ran
    -- (1: alone).
    processor   TEXT        NOT NULL DEFAULT '',
    batch_size  INTEGER     NOT NULL DEFAULT 1 CHECK (batch_size > 0),
    PRIMARY KEY (event_pk, attempt)
);

-- The failed attempts of the error histories so far, as they were: an
-- entry whose cause is lease_expired was an attempt that never finished.
-- Successful attempts before this migration have no row: the event's
-- processed_at and outcome still say how it ended.
INSERT INTO webhook_attempts (event_pk, attempt, started_at, finished_at, outcome, cause, error)
SELECT e.id, (x->>'attempt')::int, (x->>'at')::timestamptz,
       CASE WHEN x->>'cause' = 'lease_expired' THEN NULL ELSE (x->>'at')::timestamptz END,
       CASE WHEN x->>'cause' = 'lease_expired' THEN 'interrupted' ELSE 'failed' END,
       coalesce(x->>'cause', ''), coalesce(x->>'error', '')
  FROM webhook_events e, jsonb_array_elements(e.errors) AS x
 WHERE e.errors <> '[]'::jsonb AND (x->>'attempt')::int > 0
ON CONFLICT DO NOTHING;

-- A claim: the events a processor is running in one transaction, under
-- the row locks that transaction holds. One row per processor, updated in
-- place for each of its batches (HOT updates on half-empty pages, so the
-- table stays a few pages however many batches run): event_ids is empty
-- between batches. The processor writes it, committed, after its
-- transaction locked the events and before any handler runs; the
-- transaction that runs them empties it when it commits. Claims exclude
-- their events from every other claim, so an event whose processor died
-- (its row locks gone with its session) is not taken as new: the first
-- processor to find the claim past locked_until records the interrupted
-- attempt of each of its events and empties it.
CREATE TABLE webhook_claims (
    processor    TEXT        PRIMARY KEY,
    -- token identifies one claim of the processor (processor#sequence), so
    -- that a claim emptied by another processor is never mistaken for the
    -- processor's own.
    token        TEXT        NOT NULL DEFAULT '',
    event_ids    BIGINT[]    NOT NULL DEFAULT '{}',
    claimed_at   TIMESTAMPTZ,
    locked_until TIMESTAMPTZ,
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now()
) WITH (fillfactor = 50);

-- The event's side of its history: last_attempt_at is when its newest
-- attempt started; failed_attempts counts the attempts of the current run
-- (since it was received, replayed or requeued) that failed, or were
-- interrupted while the event ran alone, which is what MaxAttempts limits
-- and what a replay or a requeue resets; solo is set once an attempt of the
-- event failed or was
-- interrupted: such an event runs alone in its own transaction, never in a
-- batch, so that a poison event cannot drag its neighbours down.
ALTER TABLE webhook_events
    ADD COLUMN last_attempt_at TIMESTAMPTZ,
    ADD COLUMN failed_attempts INTEGER NOT NULL DEFAULT 0 CHECK (failed_attempts >= 0),
    ADD COLUMN solo BOOLEAN NOT NULL DEFAULT false;

-- Events that are still to be processed carry their history into the new
-- columns; an attempt the old drain started and never recorded (attempts
-- beyond its history: its processor died, or is being replaced by this
-- deployment) is recorded as interrupted now.
INSERT INTO webhook_attempts (event_pk, attempt, started_at, outcome, cause, error)
SELECT e.id, e.attempts, coalesce(e.locked_until, now()), 'interrupted', 'lease_expired',
       'the processor stopped before it recorded the outcome of this attempt'
  FROM webhook_events e
 WHERE e.processed_at IS NULL AND e.dead_at IS NULL AND e.attempts > jsonb_array_length(e.errors)
ON CONFLICT DO NOTHING;
UPDATE webhook_events e
   SET failed_attempts = greatest(e.attempts, jsonb_array_length(e.errors)),
       solo = true,
       last_attempt_at = (SELECT max(a.started_at) FROM webhook_attempts a WHERE a.event_pk = e.id),
       next_attempt_at = CASE WHEN e.locked_until IS NOT NULL THEN least(e.next_attempt_at, e.locked_until) ELSE e.next_attempt_at END
 WHERE e.processed_at IS NULL AND e.dead_at IS NULL AND e.attempts > 0;

ALTER TABLE webhook_events
    DROP COLUMN errors,
    DROP COLUMN locked_until,
    DROP COLUMN locked_by;

-- +goose Down
ALTER TABLE webhook_events
    ADD COLUMN errors JSONB NOT NULL DEFAULT '[]'::jsonb
        CONSTRAINT webhook_events_errors_is_array CHECK (jsonb_typeof(errors) = 'array'),
    ADD COLUMN locked_until TIMESTAMPTZ,
    ADD COLUMN locked_by TEXT;
UPDATE webhook_events e
   SET errors = h.errors
  FROM (SELECT event_pk, jsonb_agg(jsonb_build_object(
               'attempt', attempt, 'at', coalesce(finished_at, started_at),
               'cause', CASE WHEN outcome = 'interrupted' THEN 'lease_expired' ELSE cause END, 'error', error)
               ORDER BY attempt) AS errors
          FROM webhook_attempts WHERE outcome IN ('failed', 'interrupted') GROUP BY event_pk) h
 WHERE e.id = h.event_pk AND e.processed_at IS NULL AND e.dead_at IS NULL;
UPDATE webhook_events SET attempts = jsonb_array_length(errors)
 WHERE processed_at IS NULL AND dead_at IS NULL;
ALTER TABLE webhook_events
    DROP COLUMN solo,
    DROP COLUMN failed_attempts,
    DROP COLUMN last_attempt_at;
DROP TABLE webhook_claims;
DROP TABLE webhook_attempts;
