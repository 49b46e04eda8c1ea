-- +goose Up

-- An event's row is its processing record; its body and payload are
-- written once and only read. The processor's update of a row is no HOT
-- update (it changes processed_at, in the partial indexes' predicates), so
-- PostgreSQL writes a whole new version of the row, in the heap and in the
-- WAL, and with full_page_writes on the first change of each page after a
-- checkpoint logs the whole page: the wider the row, the more of both.
--
-- Out of line (TOAST), a body or a payload is a pointer in the row, which
-- an update copies without copying the bytes it points to. PostgreSQL
-- moves values out of line only from rows wider than about 2 KB, and then
-- until the row fits toast_tuple_target, 2 KB by default: a row holding a
-- 1 KiB body and its payload was kept inline, compressed, about 2 KB wide.
-- With a target of 128 bytes every body and payload of such a row goes out
-- of line (compressed first when that pays), and the row is a few hundred
-- bytes wide. make bench measured the effect on the drain (docs/processor.md).
--
-- The other variable-width columns are small and read by every claim or
-- list, so they are kept in the row (MAIN: compressed in place if need be,
-- moved out only from a row over a page); without it the target would push
-- them out too, one by one, until the row fit 128 bytes. A test
-- (TestStorageLayout) holds every later column to the same rule.
--
-- It applies to rows written from now on; the rows already stored keep
-- their layout (no rewrite, no long lock: the statements change the
-- catalogue only).
ALTER TABLE webhook_events SET (toast_tuple_target = 128);
ALTER TABLE webhook_events
    ALTER COLUMN provider SET STORAGE MAIN,
    ALTER COLUMN event_id SET STORAGE MAIN,
    ALTER COLUMN event_type SET STORAGE MAIN,
    ALTER COLUMN body_sha256 SET STORAGE MAIN,
    ALTER COLUMN last_error SET STORAGE MAIN,
    ALTER COLUMN outcome SET STORAGE MAIN,
    ALTER COLUMN archive_key SET STORAGE MAIN,
    ALTER COLUMN metadata SET STORAGE MAIN,
    ALTER COLUMN source_kind SET STORAGE MAIN;

-- +goose Down
ALTER TABLE webhook_events RESET (toast_tuple_target);
ALTER TABLE webhook_events
    ALTER COLUMN provider SET STORAGE EXTENDED,
    ALTER COLUMN event_id SET STORAGE EXTENDED,
    ALTER COLUMN event_type SET STORAGE EXTENDED,
    ALTER COLUMN body_sha256 SET STORAGE EXTENDED,
    ALTER COLUMN last_error SET STORAGE EXTENDED,
    ALTER COLUMN outcome SET STORAGE EXTENDED,
    ALTER COLUMN archive_key SET STORAGE EXTENDED,
    ALTER COLUMN metadata SET STORAGE EXTENDED,
    ALTER COLUMN source_kind SET STORAGE EXTENDED;
