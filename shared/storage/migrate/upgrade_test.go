package migrate_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestAttemptHistoryUpgrade: a database at version 5, with events in every
// processing state the old drain left (failed attempts in the JSON error
// history, an attempt its processor never finished, a processed event, a
// dead one), migrated to the attempt history keeps every failed attempt as
// a row, records the unfinished one as interrupted, charges the run's
// failures and makes retried events run alone; and it migrates back.
func TestAttemptHistoryUpgrade(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, pgtest.Empty(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrate.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	lease := time.Now().Add(time.Minute).UTC().Truncate(time.Microsecond)
	// The old schema has no factory: these are its rows, as its drain wrote them.
	exec(t, db, `INSERT INTO webhook_events (provider, event_id, body_sha256, body_size, attempts, errors, last_error, processed_at, outcome, dead_at, locked_until, locked_by) VALUES
	 ('s', 'retrying', decode(repeat('00', 32), 'hex'), 0, 2, '[{"attempt":1,"at":"2026-01-01T00:00:00Z","cause":"handler_failed","error":"a"},{"attempt":2,"at":"2026-01-01T00:01:00Z","cause":"handler_failed","error":"b"}]', 'b', NULL, NULL, NULL, NULL, NULL),
	 ('s', 'running', decode(repeat('00', 32), 'hex'), 0, 1, '[]', NULL, NULL, NULL, NULL, $1, 'old#1'),
	 ('s', 'processed', decode(repeat('00', 32), 'hex'), 0, 2, '[{"attempt":1,"at":"2026-01-01T00:00:00Z","cause":"lease_expired","error":"x"}]', 'x', now(), 'handled', NULL, NULL, NULL),
	 ('s', 'dead', decode(repeat('00', 32), 'hex'), 0, 1, '[{"attempt":1,"at":"2026-01-01T00:00:00Z","cause":"permanent_error","error":"p"}]', 'p', NULL, NULL, now(), NULL, NULL),
	 ('s', 'new', decode(repeat('00', 32), 'hex'), 0, 0, '[]', NULL, NULL, NULL, NULL, NULL, NULL)`, lease)
	// The old claim moved the due time to the lease's end.
	exec(t, db, `UPDATE webhook_events SET next_attempt_at = locked_until WHERE locked_until IS NOT NULL`)
	if _, err := p.UpTo(ctx, 7); err != nil {
		t.Fatal(err)
	}
	type state struct {
		attempts, failed, history int
		solo                      bool
		outcomes                  string
	}
	read := func(id string) state {
		t.Helper()
		var s state
		err := db.QueryRowContext(ctx, `
SELECT e.attempts, e.failed_attempts, e.solo, count(a.*), coalesce(string_agg(a.outcome, ',' ORDER BY a.attempt), '')
  FROM webhook_events e LEFT JOIN webhook_attempts a ON a.event_pk = e.id
 WHERE e.event_id = $1 GROUP BY e.id`, id).Scan(&s.attempts, &s.failed, &s.solo, &s.history, &s.outcomes)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for id, want := range map[string]state{
		"retrying":  {attempts: 2, failed: 2, history: 2, solo: true, outcomes: "failed,failed"},
		"running":   {attempts: 1, failed: 1, history: 1, solo: true, outcomes: "interrupted"},
		"processed": {attempts: 2, failed: 0, history: 1, solo: false, outcomes: "interrupted"},
		"dead":      {attempts: 1, failed: 0, history: 1, solo: false, outcomes: "failed"},
		"new":       {},
	} {
		if got := read(id); got != want {
			t.Errorf("%s: %+v, want %+v", id, got, want)
		}
	}
	// The unfinished attempt is due when its lease ends, as before.
	var due time.Time
	if err := db.QueryRowContext(ctx, `SELECT next_attempt_at FROM webhook_events WHERE event_id = 'running'`).Scan(&due); err != nil || !due.Equal(lease) {
		t.Fatalf("next attempt of the running event = %v, %v; want %v", due, err, lease)
	}
	var valid bool
	if err := db.QueryRowContext(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = 'webhook_events_solo_due_idx'::regclass`).Scan(&valid); err != nil || !valid {
		t.Fatalf("solo index valid = %v, %v", valid, err)
	}

	// And back: the history of the events still to be processed returns to
	// their JSON.
	if _, err := p.DownTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	var errs string
	var attempts int
	if err := db.QueryRowContext(ctx, `SELECT errors::text, attempts FROM webhook_events WHERE event_id = 'retrying'`).Scan(&errs, &attempts); err != nil ||
		attempts != 2 || len(errs) < 10 {
		t.Fatalf("after down: attempts %d, errors %s, %v", attempts, errs, err)
	}
}

func exec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatal(err)
	}
}
