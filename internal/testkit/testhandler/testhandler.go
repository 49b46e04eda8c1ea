// Package testhandler is the handler package the project's own tests
// register instead of the application's (shared/handlers): the processing,
// migration and role tests hold whichever handlers a fork adds, changes or
// removes, and test what the project promises about any handler package.
//
// Its one table has an identity column, as a user's first table usually
// does, and its Schema declares the table only: the sequence's privilege
// comes from the migration function's automatic grants, so every test
// that processes through it also proves those.
package testhandler

import (
	"context"
	"embed"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/processor"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Table is the package's table.
const Table = "testkit_records"

// Schema declares the package's table for the migration function: the
// handler inserts and reads records, nothing more.
var Schema = processor.HandlerSchema{
	Name: "testhandler", Migrations: migrations, Dir: "migrations",
	VersionTable: "testhandler_goose_db_version",
	Grants:       map[string][]string{Table: {"SELECT", "INSERT"}},
}

// Register registers the handler for the events of m with each of types
// (processor.AnyType for every type).
func Register(r *processor.Registry, m processor.Match, types ...string) {
	for _, t := range types {
		r.HandleFunc(m, t, Record)
	}
}

// Record is the handler: it records the event once, whatever the number
// of deliveries (the unique key makes a redelivery a no-op).
func Record(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
	_, err := tx.Exec(ctx, `INSERT INTO testkit_records (source, event_id, event_type) VALUES ($1, $2, $3)
		ON CONFLICT (source, event_id) DO NOTHING`, ev.Source, ev.EventID, ev.Type)
	if err != nil {
		return fmt.Errorf("testhandler: record %s/%s: %w", ev.Source, ev.EventID, err)
	}
	return nil
}

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Recorded is what a record says.
type Recorded struct {
	ID              int64
	Source, EventID string
	Type            string
}

// Records returns the records of a source, in the order they were made.
func Records(ctx context.Context, q Querier, source string) ([]Recorded, error) {
	rows, err := q.Query(ctx, `SELECT id, source, event_id, event_type FROM testkit_records WHERE source = $1 ORDER BY id`, source)
	if err != nil {
		return nil, fmt.Errorf("testhandler: records of %s: %w", source, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Recorded, error) {
		var r Recorded
		err := row.Scan(&r.ID, &r.Source, &r.EventID, &r.Type)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("testhandler: records of %s: %w", source, err)
	}
	return out, nil
}

// With returns the application's schemas followed by this package's: what
// the tests' databases are migrated with.
func With(app []processor.HandlerSchema) []processor.HandlerSchema {
	return append(slices.Clone(app), Schema)
}
