-- +goose Up

-- Per-source receipts and silence. A sender that stops sending (an
-- endpoint it disabled after failures, a webhook deleted on its side)
-- leaves nothing behind to notice, so the receiver, which holds the
-- sources document, keeps one row per configured source here: when the
-- source last delivered (to within a minute: each receiver container
-- writes at most once a minute, however many requests it serves) and
-- its "silent_after" setting. The processor's runs read it whole (a row
-- per source) to report the sources silent for longer than their
-- setting, and to know which source names are configured: the metrics'
-- source dimension takes only those.
--
-- A table rather than a read of webhook_events: the newest receipt of a
-- source has no index to come from (an index on (provider, created_at)
-- would cost every insert a second b-tree), and the scan back through the
-- primary key to a source's newest event is longest exactly when the
-- source is silent.
--
-- provider: the source's name. silent_after: null when the source has no
-- setting, or is no longer configured (configured false). seen_at: when a
-- receiver first recorded the source, the start of its silence when it
-- never delivered. last_received_at: null until its first delivery.
-- Every column is fixed width but the name, which is bounded as on
-- webhook_events; nothing in it is secret.
CREATE TABLE webhook_source_activity (
    provider         TEXT PRIMARY KEY CHECK (octet_length(provider) BETWEEN 1 AND 64),
    configured       BOOLEAN NOT NULL DEFAULT true,
    silent_after     INTERVAL,
    seen_at          TIMESTAMPTZ NOT NULL,
    last_received_at TIMESTAMPTZ,
    updated_at       TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE webhook_source_activity;
