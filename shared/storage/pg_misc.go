package storage

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// The queries on the server itself (queries/pg_misc.sql).

// PGNow returns the database server's clock. Operator commands (requeue,
// replay, the states of events) use it rather than the clock of the machine
// they run on: the receiver stamps new events with the server's now(), and
// the processors' clocks are NTP-synchronised as the server's is.
func (e executor) PGNow(ctx context.Context) (time.Time, error) {
	now, err := queries.PGNow(ctx, e.db)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return now, nil
}

// PGCurrentUser returns the role the statements run as.
func (e executor) PGCurrentUser(ctx context.Context) (string, error) {
	role, err := queries.PGCurrentUser(ctx, e.db)
	if err != nil {
		return "", fmt.Errorf("read the current role: %w", err)
	}
	return role, nil
}

// PGSetIdleInTransactionTimeout bounds how long the transaction it runs in
// may sit idle; past it Postgres ends the session, releasing its locks.
func (e executor) PGSetIdleInTransactionTimeout(ctx context.Context, d time.Duration) error {
	if err := queries.PGSetIdleInTransactionTimeout(ctx, e.db, strconv.FormatInt(d.Milliseconds(), 10)+"ms"); err != nil {
		return fmt.Errorf("set idle timeout: %w", err)
	}
	return nil
}

// TableSize is the disk use of one table.
type TableSize struct {
	Name string
	// Rows is the planner's estimate (-1 before the first ANALYZE).
	Rows int64
	// Table is the main fork; TOAST the out-of-line storage of large
	// values (bodies, payloads) with its index; Indexes every index.
	Table   int64
	TOAST   int64
	Indexes int64
	Total   int64
}

// PGTableSizes returns the disk use of the project's tables, largest first.
func (e executor) PGTableSizes(ctx context.Context) ([]TableSize, error) {
	rows, err := queries.PGTableSizes(ctx, e.db)
	if err != nil {
		return nil, fmt.Errorf("read table sizes: %w", err)
	}
	out := make([]TableSize, len(rows))
	for i, r := range rows {
		out[i] = TableSize{Name: r.Name, Rows: r.Rows, Table: r.TableBytes, TOAST: r.ToastBytes, Indexes: r.IndexBytes, Total: r.TotalBytes}
	}
	return out, nil
}
