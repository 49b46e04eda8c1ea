-- +goose Up

-- The quarantine: deliveries to a configured source, at its right
-- endpoint and within the body limit, refused only because their
-- signature did not match (signature_mismatch) or their signed time was
-- too far from the receipt (timestamp_out_of_tolerance). A secret rolled
-- in the wrong order refuses every delivery of a sender that never
-- redelivers by itself (GitHub), so the receiver keeps them here, and an
-- operator re-ingests them once the secret is fixed (webhookctl
-- quarantine): each is verified again against the source's secrets of
-- that moment, at the time it was received, and what verifies is stored
-- as if it had just arrived. Nothing here is ever processed: the
-- processor never reads this table.
--
-- It is a table, not objects in the archive bucket: it is bounded (a cap
-- per source, the receiver's body limit), the receiver already writes to
-- Postgres and to no bucket, and listing, purging and an expunge's reach
-- are then statements rather than listings of a bucket.
CREATE TABLE webhook_quarantine (
    id          BIGSERIAL   PRIMARY KEY,
    -- provider is the configured source the delivery was sent to (the
    -- path's name, never text the receiver did not match to a source).
    provider    TEXT        NOT NULL CHECK (octet_length(provider) BETWEEN 1 AND 64),
    -- source_kind is the kind of that source when it was refused.
    source_kind TEXT        NOT NULL CHECK (octet_length(source_kind) BETWEEN 1 AND 64),
    cause       TEXT        NOT NULL CHECK (cause IN ('signature_mismatch', 'timestamp_out_of_tolerance')),
    request_id  TEXT        NOT NULL DEFAULT '' CHECK (octet_length(request_id) <= 128),
    received_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- headers are only those the source's kind reads to verify and
    -- identify a delivery (its signature, timestamp, id and type
    -- headers), as {"Name": ["value", ...]}, bounded by the receiver.
    headers     JSONB       NOT NULL DEFAULT '{}'::jsonb CHECK (octet_length(headers::text) <= 65536),
    -- body is the raw body, as received (the receiver's limit bounds it);
    -- body_sha256 lets an expunge find a copy of a stored event's body.
    body        BYTEA       NOT NULL,
    body_sha256 BYTEA       NOT NULL CHECK (octet_length(body_sha256) = 32),
    body_size   INTEGER     NOT NULL CHECK (body_size >= 0),
    -- The last re-ingest that failed: when, with which cause and text;
    -- null until one was tried.
    tried_at    TIMESTAMPTZ,
    last_cause  TEXT        CHECK (octet_length(last_cause) <= 64),
    last_error  TEXT        CHECK (octet_length(last_error) <= 512)
);

-- The receiver counts a source's rows against its cap, and the operator
-- pages by source; an expunge looks for a stored event's body by hash.
CREATE INDEX webhook_quarantine_provider_idx ON webhook_quarantine (provider, id);
CREATE INDEX webhook_quarantine_body_idx ON webhook_quarantine (provider, body_sha256);

-- A re-ingest and a purge are recorded as operator actions.
ALTER TABLE webhook_operator_actions DROP CONSTRAINT webhook_operator_actions_action_known;
ALTER TABLE webhook_operator_actions ADD CONSTRAINT webhook_operator_actions_action_known
    CHECK (action IN ('replay', 'requeue', 'expunge', 'pause', 'resume', 'resolve', 'discard', 'reingest', 'purge'));

-- +goose Down
ALTER TABLE webhook_operator_actions DROP CONSTRAINT webhook_operator_actions_action_known;
ALTER TABLE webhook_operator_actions ADD CONSTRAINT webhook_operator_actions_action_known
    CHECK (action IN ('replay', 'requeue', 'expunge', 'pause', 'resume', 'resolve', 'discard'));
DROP TABLE webhook_quarantine;
