-- +goose Up
-- The project's own tests' handler table: an identity column, as a
-- user's first table usually has, so that every processing test runs
-- with a sequence the processor's role must be able to use.
CREATE TABLE testkit_records (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source      text   NOT NULL,
    event_id    text   NOT NULL,
    event_type  text   NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (source, event_id)
);

-- +goose Down
DROP TABLE testkit_records;
