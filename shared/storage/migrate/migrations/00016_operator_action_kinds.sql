-- +goose Up

-- The operator's daily tools record their actions too: pausing and
-- resuming a source or a handler, resolving a dead letter (closing it
-- without running the event again) and discarding an event that is still
-- due (it will never run). The check names every kind the code writes
-- (inbox.Action*), so a row written by a newer binary than the schema is
-- refused rather than recorded as something no reader knows.
ALTER TABLE webhook_operator_actions DROP CONSTRAINT webhook_operator_actions_action_known;
ALTER TABLE webhook_operator_actions ADD CONSTRAINT webhook_operator_actions_action_known
    CHECK (action IN ('replay', 'requeue', 'expunge', 'pause', 'resume', 'resolve', 'discard'));

-- +goose Down
ALTER TABLE webhook_operator_actions DROP CONSTRAINT webhook_operator_actions_action_known;
ALTER TABLE webhook_operator_actions ADD CONSTRAINT webhook_operator_actions_action_known
    CHECK (action IN ('replay', 'requeue', 'expunge'));
