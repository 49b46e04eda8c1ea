-- +goose Up

-- square_orders mirrors the state of each Square order from order.created
-- and order.updated events: the example business table of
-- shared/handlers/squareorders. It lives outside the core schema, with its
-- own goose version table (squareorders_goose_db_version).
--
-- Square gives every order a version that grows with each change, and
-- delivers webhooks out of order, so the row keeps the highest version seen:
-- the upsert only overwrites a row with a strictly newer version.
CREATE TABLE square_orders (
    -- source is the webhook source name (one Square account per source).
    source           TEXT        NOT NULL,
    order_id         TEXT        NOT NULL,
    merchant_id      TEXT,
    location_id      TEXT        NOT NULL,
    -- state is Square's order state: OPEN, COMPLETED, CANCELED, DRAFT.
    state            TEXT        NOT NULL,
    version          INTEGER     NOT NULL CHECK (version >= 1),
    order_created_at TIMESTAMPTZ,
    order_updated_at TIMESTAMPTZ,
    -- last_event_id is the event whose data the row shows: for tracing.
    last_event_id    TEXT        NOT NULL,
    synced_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (source, order_id)
);

-- +goose Down
DROP TABLE square_orders;
