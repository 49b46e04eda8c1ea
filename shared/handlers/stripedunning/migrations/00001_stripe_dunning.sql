-- +goose Up

-- stripe_dunning is the dunning state of each Stripe invoice whose payment
-- failed: the example business table of shared/handlers/stripedunning. It
-- lives outside the core schema, with its own goose version table
-- (stripedunning_goose_db_version), because it belongs to the application's
-- business logic, not to the inbox.
--
-- Deliveries come out of order, so every column is merged in a way that
-- does not depend on the order events are applied in:
--   - status: a paid invoice is final in Stripe, so 'cleared' wins over
--     'past_due' for ever, and a late payment_failed never reopens it;
--   - failed_attempts: Stripe's own invoice.attempt_count, the highest seen;
--   - the other failure fields: those of the failure with the highest count.
CREATE TABLE stripe_dunning (
    -- source is the webhook source name (one Stripe account per source).
    source               TEXT        NOT NULL,
    invoice_id           TEXT        NOT NULL,
    customer_id          TEXT        NOT NULL,
    status               TEXT        NOT NULL CHECK (status IN ('past_due', 'cleared')),
    failed_attempts      INTEGER     NOT NULL DEFAULT 0 CHECK (failed_attempts >= 0),
    amount_due           BIGINT,
    currency             TEXT,
    -- next_payment_attempt is when Stripe retries the charge; NULL when it
    -- has given up (the dunning emails then matter most).
    next_payment_attempt TIMESTAMPTZ,
    hosted_invoice_url   TEXT,
    -- Times are the Stripe events' created times, not processing times.
    first_failed_at      TIMESTAMPTZ,
    last_failed_at       TIMESTAMPTZ,
    cleared_at           TIMESTAMPTZ,
    -- last_event_id is the event whose data the row shows: for tracing.
    last_event_id        TEXT        NOT NULL,
    updated_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (source, invoice_id)
);

-- "Is this customer in dunning?" reads open rows by customer.
CREATE INDEX stripe_dunning_open_by_customer_idx
    ON stripe_dunning (source, customer_id) WHERE status = 'past_due';

-- +goose Down
DROP TABLE stripe_dunning;
