package processor

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// errHandlerTxControl is what a handler gets for calling Commit or Rollback
// on the processor's transaction.
var errHandlerTxControl = errors.New("processor: a handler must not commit or roll back the transaction; return nil to commit with the event or an error to roll back")

// handlerTx is the claim's transaction as a handler gets it. A claim runs
// several events in one transaction, so each handler's work sits in a
// savepoint of its own, rolled back alone when the handler fails, and
// released when it succeeds. The savepoint is taken lazily, before the
// handler's first statement: a handler that never touches the database
// (one that calls an API, or does nothing for this event) costs no round
// trip. Commit and Rollback are refused: the processor commits the
// handler's work with the event's outcome. Begin opens a savepoint inside
// the handler's, as pgx.Tx.Begin does.
type handlerTx struct {
	outer pgx.Tx
	// sp is the handler's savepoint, once a statement needed it.
	sp pgx.Tx
	// err is the failure to take the savepoint: every later statement
	// fails with it, and the transaction is given up.
	err error
	// last is the handler's latest statement, "" when unknown (a batch, a
	// statement sent on Conn): a handler returns at its first failing
	// statement, so a refused privilege is named after it
	// (privilegeError).
	last string
}

var _ pgx.Tx = (*handlerTx)(nil)

// savepoint takes the handler's savepoint if it has not been taken.
func (t *handlerTx) savepoint(ctx context.Context) (pgx.Tx, error) {
	if t.sp == nil && t.err == nil {
		t.sp, t.err = t.outer.Begin(ctx)
	}
	return t.sp, t.err
}

// release ends the savepoint after a handler that succeeded; a no-op when
// none was taken.
func (t *handlerTx) release(ctx context.Context) error {
	if t.sp == nil {
		return nil
	}
	return t.sp.Commit(ctx)
}

// rollback undoes the handler's work after it failed; a no-op when it made
// none (no savepoint was taken: a failure to take one, such as a context
// already done, sent nothing). An error means the transaction itself is
// lost.
func (t *handlerTx) rollback(ctx context.Context) error {
	if t.sp == nil {
		return nil
	}
	return t.sp.Rollback(ctx)
}

func (t *handlerTx) Begin(ctx context.Context) (pgx.Tx, error) {
	sp, err := t.savepoint(ctx)
	if err != nil {
		return nil, err
	}
	return sp.Begin(ctx)
}

func (*handlerTx) Commit(context.Context) error   { return errHandlerTxControl }
func (*handlerTx) Rollback(context.Context) error { return errHandlerTxControl }

func (t *handlerTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	sp, err := t.savepoint(ctx)
	if err != nil {
		return 0, err
	}
	t.last = "INSERT" // COPY FROM needs what INSERT needs
	return sp.CopyFrom(ctx, table, columns, src)
}

func (t *handlerTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	sp, err := t.savepoint(ctx)
	if err != nil {
		return errBatch{err}
	}
	t.last = "" // which of the batch's statements fails is not known here
	return sp.SendBatch(ctx, b)
}

// LargeObjects takes the savepoint without the handler's context, which
// it does not give.
func (t *handlerTx) LargeObjects() pgx.LargeObjects {
	if sp, err := t.savepoint(context.Background()); err == nil {
		return sp.LargeObjects()
	}
	return t.outer.LargeObjects()
}

func (t *handlerTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	sp, err := t.savepoint(ctx)
	if err != nil {
		return nil, err
	}
	t.last = sql
	return sp.Prepare(ctx, name, sql)
}

func (t *handlerTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	sp, err := t.savepoint(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	t.last = sql
	return sp.Exec(ctx, sql, args...)
}

func (t *handlerTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	sp, err := t.savepoint(ctx)
	if err != nil {
		return nil, err
	}
	t.last = sql
	return sp.Query(ctx, sql, args...)
}

func (t *handlerTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	sp, err := t.savepoint(ctx)
	if err != nil {
		return errRow{err}
	}
	t.last = sql
	return sp.QueryRow(ctx, sql, args...)
}

// Conn returns the connection, with the handler's savepoint taken first:
// statements a handler sends on it directly are then inside it too.
func (t *handlerTx) Conn() *pgx.Conn {
	_, _ = t.savepoint(context.Background())
	return t.outer.Conn()
}

// errRow is a pgx.Row that fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// errBatch is a pgx.BatchResults that fails with err.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }
