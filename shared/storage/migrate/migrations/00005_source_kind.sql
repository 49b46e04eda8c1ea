-- +goose Up

-- source_kind is the kind of the source that verified the event (stripe,
-- github, ...), written by the receiver. The processor routes handlers by
-- kind from the row itself, so it needs no copy of the sources document,
-- which holds the signing secrets: least privilege, the processor cannot
-- read them. It is also the truth of how the event was verified, even if
-- the source is reconfigured later. '' for rows stored before this column.
ALTER TABLE webhook_events ADD COLUMN source_kind TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE webhook_events DROP COLUMN source_kind;
