package storage_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// A read-only transaction sees one snapshot for all its statements, and
// refuses every write (SQLSTATE 25006): what the operator API's reads run
// in, so a page's parts agree and a read cannot change anything.
func TestBeginReadOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := storage.New(pgtest.Pool(t))
	first := factory.Event(ctx, t, store, &factory.EventOpts{Source: "ro"})

	tx, err := store.BeginReadOnly(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	before, err := tx.EventList(ctx, storage.EventFilter{Source: "ro"}, first.CreatedAt, 10)
	if err != nil || len(before) != 1 {
		t.Fatalf("in the transaction: %d events, %v", len(before), err)
	}
	// Committed by another connection after the snapshot was taken.
	factory.Event(ctx, t, store, &factory.EventOpts{Source: "ro"})
	after, err := tx.EventList(ctx, storage.EventFilter{Source: "ro"}, first.CreatedAt, 10)
	if err != nil || len(after) != 1 {
		t.Fatalf("the second read sees %d events (%v): not one snapshot", len(after), err)
	}
	_, err = tx.DeadLetterRequeue(ctx, storage.DeadLetterFilter{All: true}, storage.BulkOptions{Now: first.CreatedAt, By: inbox.Actor{Name: "ops@test"}})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Fatalf("a write in the read-only transaction: %v, want read_only_sql_transaction", err)
	}
}
