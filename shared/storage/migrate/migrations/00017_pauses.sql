-- +goose Up

-- Pauses: an operator holds a source's events, or a handler's (a route, as
-- `webhookctl handlers` prints it), while what they feed is down. One row
-- per pause; resuming deletes it. scope says what name names: a source
-- (the provider column) or a route ("source stripe, type invoice.paid",
-- "kind github, any type", "fallback"). The processor reads the whole
-- table once per claim, so it stays a few rows.
CREATE TABLE webhook_pauses (
    scope     TEXT        NOT NULL CONSTRAINT webhook_pauses_scope_known CHECK (scope IN ('source', 'handler')),
    name      TEXT        NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 600),
    paused_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    actor     TEXT        NOT NULL CHECK (octet_length(actor) BETWEEN 1 AND 200),
    reason    TEXT        NOT NULL DEFAULT '' CHECK (octet_length(reason) <= 2000),
    PRIMARY KEY (scope, name)
);

-- A held event waits out a pause: its next_attempt_at is 9999-12-31 (the
-- far future; 'infinity' would not scan into a Go time), so the claims'
-- range scans of webhook_events_due_idx (next_attempt_at <= now) never
-- reach it and need no change, while held_by says which pause
-- holds it ('source:NAME' or 'handler:ROUTE') and held_due_at when it was
-- due, which a resume gives back. Both are NULL for every other event, so
-- they cost a row nothing but the null bitmap. held_by is kept inline, as
-- every narrow column (00014's toast target keeps only body and payload
-- out of line).
ALTER TABLE webhook_events ADD COLUMN held_by TEXT, ADD COLUMN held_due_at TIMESTAMPTZ;
ALTER TABLE webhook_events ALTER COLUMN held_by SET STORAGE MAIN;

-- +goose Down
ALTER TABLE webhook_events DROP COLUMN held_by, DROP COLUMN held_due_at;
DROP TABLE webhook_pauses;
