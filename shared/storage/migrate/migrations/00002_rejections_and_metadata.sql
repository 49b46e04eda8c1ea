-- +goose Up

-- metadata holds sender-specific identifiers beside the dedup key, such as
-- Shopify's X-Shopify-Event-Id (one event fanned out to several webhooks
-- shares it) or GitHub's hook id: useful for support and audit, never part
-- of the deduplication. NULL when the kind has none.
ALTER TABLE webhook_events ADD COLUMN metadata JSONB;

-- webhook_rejections is a short memory of refused requests, so an operator
-- can see why a sender's deliveries fail (a rolled secret, a clock off, a
-- wrong URL) without searching logs. It is a ring buffer: the receiver
-- writes slot = nextval(seq) % capacity with an upsert, so the table never
-- holds more than `capacity` rows and needs no pruning job. Every field is
-- bounded by the receiver; none holds a secret, a signature or a body.
CREATE SEQUENCE webhook_rejections_seq AS BIGINT;
CREATE TABLE webhook_rejections (
    slot        INTEGER     PRIMARY KEY CHECK (slot >= 0),
    -- provider is the source name as requested: it may name no configured
    -- source (cause unknown_source), so it is not a foreign key.
    provider    TEXT        NOT NULL,
    cause       TEXT        NOT NULL,
    message     TEXT        NOT NULL,
    request_id  TEXT        NOT NULL DEFAULT '',
    remote_addr TEXT        NOT NULL DEFAULT '',
    body_size   BIGINT      NOT NULL DEFAULT 0,
    -- suppressed counts the rejections of the same source and cause that
    -- the receiver did not write since this one, to keep a flood of bad
    -- requests from turning into a flood of writes.
    suppressed  BIGINT      NOT NULL DEFAULT 0,
    received_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX webhook_rejections_received_idx ON webhook_rejections (received_at);

-- +goose Down
DROP TABLE webhook_rejections;
DROP SEQUENCE webhook_rejections_seq;
ALTER TABLE webhook_events DROP COLUMN metadata;
