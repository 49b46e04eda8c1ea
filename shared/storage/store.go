package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/internal/dbsqlc"
)

// Executor runs every query of the package. *Store runs each on the pool
// (a statement of its own, committed at once); *Tx runs it in the
// transaction. Callers that must hold locks across statements, or make
// several writes atomic, Begin a transaction and pass it where an Executor
// is wanted.
type Executor interface {
	// webhook_events
	EventInsert(ctx context.Context, p EventInsertParams) (EventInsertResult, error)
	EventInsertFull(ctx context.Context, e *inbox.Event) (*inbox.Event, error)
	EventGetByID(ctx context.Context, id int64) (*inbox.Event, error)
	EventGetByKey(ctx context.Context, source, eventID string) (*inbox.Event, error)
	EventListByEventID(ctx context.Context, eventID string, limit int) ([]*inbox.Event, error)
	EventGetByKeyForUpdate(ctx context.Context, source, eventID string) (*inbox.Event, error)
	EventList(ctx context.Context, f EventFilter, now time.Time, limit int) ([]*inbox.Event, error)
	EventSearchChunk(ctx context.Context, s EventSearch) (EventSearchResult, error)
	EventGetDue(ctx context.Context, now time.Time) (Due, error)
	EventClaimBatch(ctx context.Context, p ClaimParams) (Claimed, error)
	EventClaimSolo(ctx context.Context, now time.Time, bodyBudget int64) (Claimed, error)
	EventListBodies(ctx context.Context, ids []int64) (map[int64][]byte, error)
	EventLockClaimed(ctx context.Context, id int64) (ok bool, err error)
	EventFinish(ctx context.Context, p EventFinishParams) (recorded int, err error)
	EventRecordInterrupted(ctx context.Context, p EventRecordInterruptedParams) ([]RecordedInterruption, error)
	EventDeadLetter(ctx context.Context, ids []int64) (deadLetterIDs map[int64]int64, err error)
	EventGetBacklog(ctx context.Context, now time.Time) (Backlog, error)
	EventGetBacklogStats(ctx context.Context, now time.Time) (BacklogStats, error)
	EventCountUnhandledByRoute(ctx context.Context) ([]UnhandledCount, error)
	EventReplay(ctx context.Context, f ReplayFilter, opts ReplayOptions) (ReplayResult, error)
	EventCountArchivable(ctx context.Context, processedBefore time.Time) (int64, error)
	EventGetArchiveProgress(ctx context.Context, cutoff time.Time) (ArchiveProgress, error)
	EventCountByBucket(ctx context.Context, b Buckets) ([]EventBucket, error)
	EventListArchiveCandidates(ctx context.Context, p EventArchiveParams) (ArchiveCandidates, error)
	EventLockForArchive(ctx context.Context, ids []int64) ([]*inbox.Event, error)
	EventMarkArchived(ctx context.Context, key string, locs []ArchiveLocation) error
	EventExpunge(ctx context.Context, id int64) (EventScrub, error)
	EventExpireArchived(ctx context.Context, o ExpirableObject) (int64, error)
	EventExpireBodies(ctx context.Context, receivedBefore time.Time, max int) (int64, error)
	EventHoldSource(ctx context.Context, source string) (int, error)
	EventHoldClaimed(ctx context.Context, holds []Hold) (int, error)
	EventRelease(ctx context.Context, heldBy string, now time.Time) (int, error)
	EventCountHeld(ctx context.Context, heldBy, source string) (HeldCount, error)
	EventDiscard(ctx context.Context, f DiscardFilter, opts BulkOptions) (BulkResult, error)

	// webhook_attempts
	AttemptListByEvent(ctx context.Context, eventPK int64) ([]inbox.Attempt, error)
	AttemptExpunge(ctx context.Context, eventPK int64) (int, error)
	AttemptCountByBucket(ctx context.Context, b Buckets) ([]AttemptBucket, error)

	// webhook_claims
	ClaimSet(ctx context.Context, c Claim) error
	ClaimRelease(ctx context.Context, processor, token string, now time.Time) (ok bool, err error)
	ClaimLock(ctx context.Context, processor, token string) (ok bool, err error)
	ClaimLockExpired(ctx context.Context, now time.Time, max int, lockTimeout time.Duration) ([]Claim, error)
	ClaimDeleteIdle(ctx context.Context, idleBefore time.Time) (int, error)
	ClaimListLive(ctx context.Context, now time.Time) ([]Claim, error)

	// webhook_dead_letters
	DeadLetterList(ctx context.Context, f DeadLetterFilter, limit int) ([]*inbox.DeadLetter, error)
	DeadLetterListPage(ctx context.Context, f DeadLetterFilter, after int64, limit int) ([]*inbox.DeadLetter, error)
	DeadLetterCountRequeueable(ctx context.Context, f DeadLetterFilter) (int, error)
	DeadLetterRequeue(ctx context.Context, f DeadLetterFilter, opts BulkOptions) (BulkResult, error)
	DeadLetterCountByType(ctx context.Context) ([]DeadLetterCount, error)
	DeadLetterListByEvent(ctx context.Context, eventPK int64) ([]*inbox.DeadLetter, error)
	DeadLetterExpunge(ctx context.Context, eventPK int64) (int, error)
	DeadLetterGetOpenStats(ctx context.Context) (DeadLetterStats, error)
	DeadLetterResolve(ctx context.Context, f DeadLetterFilter, opts BulkOptions) (BulkResult, error)

	// webhook_operator_actions
	OperatorActionRecord(ctx context.Context, action string, by inbox.Actor, selection any, eventIDs []int64) (int64, error)
	OperatorActionList(ctx context.Context, since time.Time, limit int) ([]inbox.OperatorAction, error)
	OperatorActionGetByID(ctx context.Context, id int64) (inbox.OperatorAction, error)
	OperatorActionListPage(ctx context.Context, since time.Time, before int64, limit int) ([]inbox.OperatorAction, error)
	OperatorActionListByEvent(ctx context.Context, eventPK int64) ([]inbox.OperatorAction, error)
	OperatorActionRecordCounted(ctx context.Context, action string, by inbox.Actor, selection any, events int) (int64, error)

	// webhook_pauses
	PauseInsert(ctx context.Context, p inbox.Pause) (ok bool, err error)
	PauseDelete(ctx context.Context, scope inbox.PauseScope, name string) (inbox.Pause, bool, error)
	PauseList(ctx context.Context) ([]inbox.Pause, error)

	// webhook_rejections
	RejectionInsert(ctx context.Context, r inbox.Rejection, capacity int) error
	RejectionList(ctx context.Context, since time.Time, limit int) ([]inbox.Rejection, error)
	RejectionCountByCause(ctx context.Context, since time.Time) ([]RejectionCount, error)
	RejectionCountByBucket(ctx context.Context, b Buckets) ([]RejectionBucket, error)

	// webhook_quarantine
	QuarantineInsert(ctx context.Context, q inbox.Quarantined, capacity int) (bool, error)
	QuarantineListPage(ctx context.Context, f QuarantineFilter, before int64, limit int) ([]inbox.Quarantined, error)
	QuarantineGetByID(ctx context.Context, id int64) (inbox.Quarantined, error)
	QuarantineCount(ctx context.Context, f QuarantineFilter) (int, error)
	QuarantineListForReingest(ctx context.Context, f QuarantineFilter, after int64, limit int) ([]inbox.Quarantined, error)
	QuarantineDelete(ctx context.Context, ids []int64) (int, error)
	QuarantineMarkFailed(ctx context.Context, id int64, at time.Time, cause inbox.Cause, msg string) error
	QuarantinePurge(ctx context.Context, f QuarantineFilter) (int, error)
	QuarantineCountCopies(ctx context.Context, source, eventID string, bodySHA256 []byte) (int, error)
	QuarantineDeleteCopies(ctx context.Context, source, eventID string, bodySHA256 []byte) (int, error)

	// webhook_payload_mismatches
	PayloadMismatchInsert(ctx context.Context, m inbox.PayloadMismatch) (bool, error)
	PayloadMismatchCountByEvent(ctx context.Context, source, eventID string) (int, error)
	PayloadMismatchListByEvent(ctx context.Context, source, eventID string) ([]inbox.PayloadMismatch, error)
	PayloadMismatchCountBySource(ctx context.Context, since time.Time) ([]PayloadMismatchCount, error)

	// webhook_archive_objects
	ArchiveObjectPrepare(ctx context.Context, key, source string) error
	ArchiveObjectLockPending(ctx context.Context, key string) (ok bool, err error)
	ArchiveObjectLockAbandoned(ctx context.Context, key string) (ok bool, err error)
	ArchiveObjectListCommitted(ctx context.Context, keys []string) ([]string, error)
	ArchiveObjectLockUnrecorded(ctx context.Context, key string) (ok bool, err error)
	ArchiveObjectCommit(ctx context.Context, o inbox.ArchiveObject) error
	ArchiveObjectGet(ctx context.Context, key string) (*inbox.ArchiveObject, error)
	ArchiveObjectLockOrphan(ctx context.Context, createdBefore time.Time) (key string, ok bool, err error)
	ArchiveObjectDelete(ctx context.Context, key string) error
	ArchiveObjectLock(ctx context.Context, key string) error
	ArchiveObjectMarkRewritten(ctx context.Context, key string, size int64, sha256 []byte) error
	ArchiveObjectGetStats(ctx context.Context) (ArchiveObjectStats, error)
	ArchiveObjectLockExpirable(ctx context.Context, receivedBefore time.Time) (o ExpirableObject, ok bool, err error)
	ArchiveObjectMarkExpired(ctx context.Context, key string) error
	ArchiveObjectGetNextExpiry(ctx context.Context) (*time.Time, error)

	// webhook_source_activity
	SourceActivityRecord(ctx context.Context, sources []SourceRecord, now time.Time) error
	SourceActivityList(ctx context.Context) ([]inbox.SourceActivity, error)

	// the server
	PGNow(ctx context.Context) (time.Time, error)
	PGCurrentUser(ctx context.Context) (string, error)
	PGSetIdleInTransactionTimeout(ctx context.Context, d time.Duration) error
	PGTableSizes(ctx context.Context) ([]TableSize, error)
	PGBloatEstimate(ctx context.Context, tablePattern string) ([]RelationBloat, error)
}

var (
	_ Executor = (*Store)(nil)
	_ Executor = (*Tx)(nil)
)

// DBTX is what a query runs on: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
// The handler packages' queries take it, so they run in the processor's
// transaction or, in tests, on a pool.
type DBTX = dbsqlc.DBTX

// queries is the generated code; it holds no state, so one serves all.
var queries = dbsqlc.New()

// executor implements Executor on a pool or a transaction; Store and Tx
// embed it, so every query is written once.
type executor struct {
	db dbsqlc.DBTX
	// tx is set when db is a transaction: a statement that may fail and be
	// retried then runs under a savepoint, since a failed statement aborts
	// the whole transaction.
	tx pgx.Tx
}

// Store runs the queries on a pgx pool.
type Store struct {
	executor
	pool *pgxpool.Pool
}

// New returns a Store over pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{executor: executor{db: pool}, pool: pool}
}

// Pool returns the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Begin starts a transaction. The caller owns it: Commit, or Rollback
// (which is safe to defer: after Commit it does nothing).
func (s *Store) Begin(ctx context.Context) (*Tx, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	return &Tx{executor: executor{db: tx, tx: tx}}, nil
}

// BeginReadOnly starts a read-only transaction that sees one snapshot
// (REPEATABLE READ): the statements of a page or a report agree with each
// other, whatever commits in between, and none of them can write. The
// caller owns it, as for Begin; a read-only transaction at this level
// never fails to serialize.
func (s *Store) BeginReadOnly(ctx context.Context) (*Tx, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("begin read-only transaction: %w", err)
	}
	return &Tx{executor: executor{db: tx, tx: tx}}, nil
}

// Tx runs the queries in one transaction.
type Tx struct {
	executor
}

// Pgx returns the transaction itself, for code that runs its own SQL in it
// (the processor's handlers).
func (t *Tx) Pgx() pgx.Tx { return t.tx }

// Commit commits the transaction.
func (t *Tx) Commit(ctx context.Context) error {
	if err := t.tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Rollback ends the transaction changing nothing; after Commit or an
// earlier Rollback it does nothing.
func (t *Tx) Rollback(ctx context.Context) error {
	if err := t.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("roll back: %w", err)
	}
	return nil
}

// ErrEventNotFound is returned (wrapped) when no event has the given id or
// (source, event id).
var ErrEventNotFound = errors.New("event not found")

// IsDataError reports whether err is Postgres refusing values as data
// (classes 22 and 23): retrying the same values cannot succeed, unlike a
// connection failure or timeout.
func IsDataError(err error) bool {
	return pgErrorClass(err, "22", "23")
}

// isJSONBRefusal reports whether err is Postgres refusing a payload as
// JSONB: a data exception (class 22: \u0000, bad escapes, lone surrogates,
// numbers out of range) or a program limit (class 54: nesting too deep).
func isJSONBRefusal(err error) bool {
	return pgErrorClass(err, "22", "54")
}

func pgErrorClass(err error, classes ...string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return false
	}
	for _, c := range classes {
		if pgErr.Code[:2] == c {
			return true
		}
	}
	return false
}

// Conversions between Go values and the generated code's nullable ones.

func ptr[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// anyTime reads an aggregate such as min(timestamptz), which sqlc cannot
// type: a time.Time, or nil.
func anyTime(v any) *time.Time {
	if t, ok := v.(time.Time); ok {
		return &t
	}
	return nil
}
