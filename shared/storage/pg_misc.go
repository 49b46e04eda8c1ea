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

// InboxTables is the LIKE pattern (PGBloatEstimate) of webhook-inbox's own
// tables: every core table is named webhook_*, so a table a later
// migration adds is estimated with no change here. The handlers' tables
// (stripe_dunning, ...) are theirs to watch.
const InboxTables = `webhook\_%`

// BloatKind is what a relation of a bloat estimate is.
type BloatKind string

// The kinds of relation PGBloatEstimate reports.
const (
	BloatTable BloatKind = "table"
	// BloatTOAST is a table's out-of-line storage (large bodies and
	// payloads).
	BloatTOAST BloatKind = "toast"
	BloatIndex BloatKind = "index"
)

// BloatUnknown says why a relation has no estimate.
type BloatUnknown string

// Why an estimate may be unknown. A caller shows "unknown" with the
// reason, never a ratio of 0.
const (
	// BloatNotAnalyzed: the table has not been analyzed (or vacuumed) since
	// it was created, or since a column was added. Autovacuum analyzes it
	// once enough rows changed; ANALYZE <table> does it now.
	BloatNotAnalyzed BloatUnknown = "not_analyzed"
	// BloatNoPrivilege: the role may not read the statistics of some of its
	// columns (pg_stats shows a column only to a role that may SELECT it).
	BloatNoPrivilege BloatUnknown = "no_privilege"
	// BloatInvalidIndex: the index is invalid, the leftover of a failed
	// CREATE or REINDEX ... CONCURRENTLY (its name ends in _ccnew when
	// REINDEX left it): it slows every write and serves no read; drop it
	// with DROP INDEX CONCURRENTLY.
	BloatInvalidIndex BloatUnknown = "invalid"
	// BloatNotBtree: only btree indexes are estimated.
	BloatNotBtree BloatUnknown = "not_btree"
)

// RelationBloat is the estimated bloat of one table, TOAST table or index:
// the pages it has beyond those its rows would need packed at its fill
// factor. See queries/pg_misc.sql for the method and what it leaves out.
type RelationBloat struct {
	// Table is the table the relation belongs to (itself for a table).
	Table string
	Name  string
	Kind  BloatKind
	// Size is the relation's size on disk now, in bytes.
	Size int64
	// Pages and ExpectedPages are what the relation had and would need, as
	// of its last VACUUM, ANALYZE or rebuild (0 and 0 when unknown).
	Pages         int64
	ExpectedPages int64
	// Unknown is why there is no estimate; "" when there is one.
	Unknown BloatUnknown
}

// Known reports whether the relation has an estimate.
func (r RelationBloat) Known() bool { return r.Unknown == "" }

// Ratio is the estimated share of the relation that is bloat, from 0 to
// 1; 0 when unknown (check Known first).
func (r RelationBloat) Ratio() float64 {
	if !r.Known() || r.Pages <= 0 || r.ExpectedPages >= r.Pages {
		return 0
	}
	return float64(r.Pages-r.ExpectedPages) / float64(r.Pages)
}

// Bytes is the estimated bloat in bytes: Ratio of the size on disk now,
// which is what a rebuild would give back if the relation's rows are
// still as dense as at its last VACUUM or ANALYZE.
func (r RelationBloat) Bytes() int64 { return int64(r.Ratio() * float64(r.Size)) }

// BloatThreshold is what counts as bloat worth acting on.
type BloatThreshold struct {
	// Ratio: the share of the relation that is bloat, at or above which
	// it is flagged.
	Ratio float64
	// MinBytes: relations smaller than this are reported, never flagged.
	MinBytes int64
}

// DefaultBloatThreshold is the threshold docs/operations.md documents:
// half of a relation of 16 MiB or more. Half, because a healthy relation
// reads well under it: the estimate leaves out the padding between
// columns (a freshly packed table reads up to 10-15%), and a btree filled
// by random keys settles 60-75% full (20-35%); at half, a rebuild at
// least halves the relation. 16 MiB, because below it a relation costs
// nothing worth a rebuild, and an estimate over a few pages swings by
// tens of percent with a row more or less.
var DefaultBloatThreshold = BloatThreshold{Ratio: 0.5, MinBytes: 16 << 20}

// Over reports whether the relation's estimate is at or above th.
func (r RelationBloat) Over(th BloatThreshold) bool {
	return r.Known() && r.Size >= th.MinBytes && r.Ratio() >= th.Ratio
}

// PGBloatEstimate estimates the bloat of the tables of the current schema
// whose names match tablePattern (LIKE; InboxTables for the project's), of
// their TOAST tables and of every index on them, from the catalogue alone:
// cheap on any size of table. Rows come table by table, largest first (as
// PGTableSizes), the table first, then its TOAST, then its indexes by
// name.
func (e executor) PGBloatEstimate(ctx context.Context, tablePattern string) ([]RelationBloat, error) {
	rows, err := queries.PGBloatEstimate(ctx, e.db, tablePattern)
	if err != nil {
		return nil, fmt.Errorf("estimate bloat of tables %s: %w", tablePattern, err)
	}
	out := make([]RelationBloat, len(rows))
	for i, r := range rows {
		out[i] = RelationBloat{
			Table: r.TableName, Name: r.Name, Kind: BloatKind(r.Kind), Size: r.SizeBytes,
			Pages: r.Pages, ExpectedPages: r.ExpectedPages, Unknown: BloatUnknown(r.Unknown),
		}
	}
	return out, nil
}
