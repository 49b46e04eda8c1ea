package storage

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/shared/storage/internal/dbsqlc"
)

// planned runs each statement as an unnamed prepared statement
// (pgx.QueryExecModeExec), which PostgreSQL plans with the parameters it
// is given every time.
//
// The pool's default mode caches a named prepared statement per
// connection, and after five executions PostgreSQL may settle on a
// generic plan, chosen without the parameters' values. That suits the
// claim and the insert, whose best plan never changes, but not a
// statement whose best plan depends on its values: a search chunk over
// the last day's few thousand events is best read from the receipt
// time's BRIN index and sorted, one over the year by walking the primary
// key backwards. The generic plan walks the key whatever the window, so
// the last chunk of a small window read every older event below it
// (275 ms over a million, where a custom plan takes 1 ms). The price is
// a planning per execution, a fraction of a millisecond.
type planned struct{ db dbsqlc.DBTX }

func (p planned) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return p.db.Exec(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}

func (p planned) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.db.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}

func (p planned) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return p.db.QueryRow(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}
