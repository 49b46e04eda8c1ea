-- +goose Up

-- Operator actions: who did what, to which events, and when. Every replay,
-- requeue and expunge, from webhookctl or any other interface, records one
-- row here in the very statements (or transaction) that change the events,
-- so there is no change without its record, and the events' histories
-- (webhook_attempts) show who started each new run.
CREATE TABLE webhook_operator_actions (
    id       BIGSERIAL   PRIMARY KEY,
    -- action: replay, requeue, expunge.
    action   TEXT        NOT NULL CONSTRAINT webhook_operator_actions_action_known CHECK (action IN ('replay', 'requeue', 'expunge')),
    -- actor is who the operator said they are (webhookctl --actor, else
    -- user@host); db_user is the database role that ran it, which nobody
    -- chooses.
    actor    TEXT        NOT NULL CHECK (octet_length(actor) BETWEEN 1 AND 200),
    db_user  TEXT        NOT NULL DEFAULT session_user,
    at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- filter is the selection as given (ids, source, type, window...).
    filter   JSONB       NOT NULL DEFAULT '{}'::jsonb,
    -- events counts the events the action changed so far: a replay adds
    -- each chunk's as it commits, so an interrupted one says how far it got.
    events   INTEGER     NOT NULL DEFAULT 0 CHECK (events >= 0),
    reason   TEXT        NOT NULL DEFAULT '' CHECK (octet_length(reason) <= 2000)
);

CREATE INDEX webhook_operator_actions_at_idx ON webhook_operator_actions (at);

-- Which events each action changed.
CREATE TABLE webhook_operator_action_events (
    event_pk  BIGINT NOT NULL REFERENCES webhook_events (id),
    action_id BIGINT NOT NULL REFERENCES webhook_operator_actions (id),
    PRIMARY KEY (event_pk, action_id)
);

-- +goose Down
DROP TABLE webhook_operator_action_events;
DROP TABLE webhook_operator_actions;
