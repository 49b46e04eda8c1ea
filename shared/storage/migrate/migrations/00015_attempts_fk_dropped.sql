-- +goose Up

-- webhook_attempts.event_pk referenced webhook_events (id) with a foreign
-- key, which PostgreSQL checks with a trigger per inserted row: a query
-- that finds the event and takes a KEY SHARE lock on it, once for every
-- attempt. The processor writes a batch's history rows in the statement
-- that updates the same events under its row locks (EventFinish: the
-- INSERT reads the UPDATE's RETURNING), and the recovery of interrupted
-- attempts likewise, so the event exists by construction; and events are
-- never deleted, so the key had nothing to protect on that side either.
-- make bench measured the check at about a quarter of that statement's
-- time in the drain (docs/processor.md). The constraint goes; the index of
-- the history's primary key (event_pk, attempt) still serves every read
-- by event, and the processor's SIGKILL test checks that no attempt is
-- left without its event.
ALTER TABLE webhook_attempts DROP CONSTRAINT IF EXISTS webhook_attempts_event_pk_fkey;

-- +goose Down
ALTER TABLE webhook_attempts
    ADD CONSTRAINT webhook_attempts_event_pk_fkey FOREIGN KEY (event_pk) REFERENCES webhook_events (id);
