-- +goose Up

-- webhook_events is the inbox: one row per (provider, event_id), for ever.
-- The UNIQUE constraint is the deduplication: the receiver inserts with
-- ON CONFLICT (provider, event_id) DO NOTHING, so a redelivery can never make
-- a second row, whatever the number of receivers running at once. Rows are
-- never deleted: they are the audit trail and the dedup memory.
CREATE TABLE webhook_events (
    id           BIGSERIAL PRIMARY KEY,
    -- provider is the configured source name (the {source} of the URL), so two
    -- sources of the same kind are two providers and never collide.
    provider     TEXT        NOT NULL,
    event_id     TEXT        NOT NULL,
    event_type   TEXT        NOT NULL DEFAULT '',
    -- payload is the body parsed as JSONB, for handlers and ad-hoc queries.
    -- JSONB is not lossless (it reorders keys, drops whitespace and duplicate
    -- keys) and cannot hold some valid JSON at all (\u0000, lone surrogates,
    -- huge numbers, deep nesting), so payload is NULL when the body is not
    -- JSON Postgres can hold, and body below is the source of truth.
    payload      JSONB,
    -- body is the raw request body, byte for byte as signed by the sender:
    -- what replay, inspection and the archive need. NULL once archived (the
    -- bytes then live in S3 at archive_key/offset/length) or expunged.
    body         BYTEA,
    -- body_sha256 is kept for ever: it detects a redelivery whose body
    -- differs from the stored one, and verifies archived bytes on read back.
    body_sha256  BYTEA       NOT NULL CHECK (octet_length(body_sha256) = 32),
    body_size    INTEGER     NOT NULL CHECK (body_size >= 0),
    processed_at TIMESTAMPTZ,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),

    -- Processing bookkeeping (the processor). attempts and last_error are
    -- written outside the handler's transaction so a rollback keeps them;
    -- next_attempt_at carries the retry backoff; locked_until is the claim
    -- lease: a processor that dies leaves rows claimable again once it passes.
    attempts        INTEGER     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    locked_until    TIMESTAMPTZ,
    last_error      TEXT,
    -- outcome says how a processed event ended (handled, unhandled, ...).
    outcome         TEXT,
    -- dead_at is set when the event moved to webhook_dead_letters: it leaves
    -- the drain but its row stays, so redeliveries remain duplicates.
    dead_at         TIMESTAMPTZ,

    -- Archive location (the archiver): the S3 object holding the body, and
    -- the byte range of this event's gzip member inside it.
    archive_key    TEXT,
    archive_offset BIGINT CHECK (archive_offset >= 0),
    archive_length BIGINT CHECK (archive_length > 0),
    archived_at    TIMESTAMPTZ,
    -- expunged_at records a privacy erasure: the body is gone everywhere,
    -- the dedup row and its hash stay.
    expunged_at    TIMESTAMPTZ,

    CONSTRAINT webhook_events_provider_event_id_key UNIQUE (provider, event_id),
    -- Defence in depth: the receiver refuses these first, with a cause code.
    CONSTRAINT webhook_events_event_id_bounds CHECK (octet_length(event_id) BETWEEN 1 AND 255),
    CONSTRAINT webhook_events_provider_bounds CHECK (octet_length(provider) BETWEEN 1 AND 64),
    CONSTRAINT webhook_events_event_type_bounds CHECK (octet_length(event_type) <= 255)
);

-- The drain reads only due, unprocessed, live rows, oldest first. A partial
-- index keeps that scan proportional to the backlog, not to the table, which
-- grows for ever.
CREATE INDEX webhook_events_due_idx
    ON webhook_events (next_attempt_at, id)
    WHERE processed_at IS NULL AND dead_at IS NULL;

-- The archiver reads processed rows whose body is still in Postgres, oldest
-- processed first; archived rows drop out of the index.
CREATE INDEX webhook_events_archivable_idx
    ON webhook_events (processed_at, id)
    WHERE processed_at IS NOT NULL AND archived_at IS NULL AND body IS NOT NULL;

-- webhook_dead_letters keeps poison events after the last attempt: a copy of
-- what an operator needs at 3 a.m. (payload, error history, attempts) so the
-- requeue and inspection tools do not depend on the event row's later life.
CREATE TABLE webhook_dead_letters (
    id            BIGSERIAL PRIMARY KEY,
    event_pk      BIGINT      NOT NULL REFERENCES webhook_events (id),
    provider      TEXT        NOT NULL,
    event_id      TEXT        NOT NULL,
    event_type    TEXT        NOT NULL,
    payload       JSONB,
    body          BYTEA,
    attempts      INTEGER     NOT NULL,
    -- errors is the history, one JSON object per attempt: {"at", "error"}.
    errors        JSONB       NOT NULL DEFAULT '[]'::jsonb,
    last_error    TEXT,
    dead_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    requeued_at   TIMESTAMPTZ
);
CREATE INDEX webhook_dead_letters_open_idx
    ON webhook_dead_letters (provider, event_type, dead_at)
    WHERE requeued_at IS NULL;

-- webhook_payload_mismatches records redeliveries whose body hash differs
-- from the stored one: the event stays a duplicate (the first body wins) but
-- an operator can see that a sender changed an event under the same id.
CREATE TABLE webhook_payload_mismatches (
    id              BIGSERIAL PRIMARY KEY,
    provider        TEXT        NOT NULL,
    event_id        TEXT        NOT NULL,
    stored_sha256   BYTEA       NOT NULL,
    received_sha256 BYTEA       NOT NULL,
    received_size   INTEGER     NOT NULL,
    received_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX webhook_payload_mismatches_event_idx
    ON webhook_payload_mismatches (provider, event_id);

-- +goose Down
DROP TABLE webhook_payload_mismatches;
DROP TABLE webhook_dead_letters;
DROP TABLE webhook_events;
