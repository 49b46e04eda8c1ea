package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// This file holds the processor's queries. Every time they write or compare
// (lease ends, due times, processed_at) comes from the processor's clock as
// a parameter, never from the server's now(): tests move that clock instead
// of sleeping, and all processors judge leases by the same rule. Writes of a
// claimer are conditional on its claim token (locked_by), so a processor
// that lost its lease cannot change a row another one has claimed since.

// DBTX is what the queries that must run inside a caller's transaction need:
// a pgx.Tx, a *pgxpool.Pool or a *pgx.Conn.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Outcomes of a processed event (webhook_events.outcome).
const (
	// OutcomeHandled: a handler ran and committed with the event.
	OutcomeHandled = "handled"
	// OutcomeUnhandled: no handler was registered; the event was marked
	// processed without running anything (the default unhandled policy).
	OutcomeUnhandled = "unhandled"
)

// EventsClaimParams is one claim of a batch.
type EventsClaimParams struct {
	// Now is the processor's clock: rows due at or before it are claimable.
	Now time.Time
	// Limit is the batch size.
	Limit int
	// LockedUntil is the end of the lease.
	LockedUntil time.Time
	// Token identifies this claim; later writes must present it.
	Token string
}

// ClaimedEvent is an event claimed for processing.
type ClaimedEvent struct {
	ID       int64
	Provider string
	// SourceKind is the kind of source that verified the event ('' for
	// rows stored before the receiver recorded it).
	SourceKind string
	EventID    string
	EventType  string
	Payload    []byte // JSONB as text, nil when the body is not JSONB-able
	Body       []byte // raw body, nil once archived or expunged
	// Attempts is the number of attempts started before this claim.
	Attempts int
	// Interrupted reports that the last of them never finished (its
	// processor was killed or timed out): the claim recorded it in the
	// history as lease_expired.
	Interrupted bool
	CreatedAt   time.Time
	// DueAt is when the event became due (next_attempt_at before the
	// claim), the order the batch is handled in.
	DueAt time.Time
}

// LeaseExpiredCause and LeaseExpiredError are what a claim records for an
// attempt that started and never finished.
const (
	LeaseExpiredCause = string(inbox.CauseLeaseExpired)
	LeaseExpiredError = "the attempt did not finish before its lease ended: its processor stopped (killed, timed out, or lost the database)"
)

// eventsClaimSQL claims up to $2 due rows, oldest due first.
//
// The inner SELECT walks webhook_events_due_idx (next_attempt_at, id) WHERE
// processed_at IS NULL AND dead_at IS NULL, so its cost follows the backlog,
// not the table. FOR UPDATE SKIP LOCKED makes concurrent claimers take
// disjoint rows without waiting on each other; a row that another claimer
// just claimed or processed is re-checked against the WHERE on its newest
// version and dropped.
//
// The claim moves next_attempt_at to the lease end as well as locked_until:
// a claimed row is simply not due until its lease passes, so the due scan
// skips running rows without a second condition, and a row whose processor
// died becomes claimable again by the same rule that runs retries. The
// locked_until condition is redundant with it, kept as a guard against a
// hand-edited next_attempt_at.
//
// A row with more attempts than error entries was started by a processor
// that never recorded the outcome: the claim writes that attempt's entry
// (at = the lease end it outlived) so the history is complete and a poison
// event that kills its processor still runs out of attempts.
const eventsClaimSQL = `
WITH due AS (
    SELECT id, next_attempt_at, attempts > jsonb_array_length(errors) AS interrupted
      FROM webhook_events
     WHERE processed_at IS NULL AND dead_at IS NULL
       AND next_attempt_at <= $1
       AND (locked_until IS NULL OR locked_until <= $1)
     ORDER BY next_attempt_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
)
UPDATE webhook_events e
   SET locked_until = $3, locked_by = $4, next_attempt_at = $3,
       errors = CASE WHEN due.interrupted
                     THEN e.errors || jsonb_build_array(jsonb_build_object(
                              'attempt', e.attempts, 'at', COALESCE(e.locked_until, $1),
                              'cause', $5::text, 'error', $6::text))
                     ELSE e.errors END,
       last_error = CASE WHEN due.interrupted THEN $6::text ELSE e.last_error END
  FROM due
 WHERE e.id = due.id
RETURNING e.id, e.provider, e.source_kind, e.event_id, e.event_type, e.payload::text, e.body, e.attempts, due.interrupted,
          e.created_at, due.next_attempt_at`

// EventsClaim claims a batch of due events for p.LockedUntil and commits
// the claim at once (a statement of its own): the claim must outlive a
// processor that dies, which is what makes the rows claimable again when
// the lease passes. Events come back oldest due first.
func (s *Store) EventsClaim(ctx context.Context, p EventsClaimParams) ([]ClaimedEvent, error) {
	rows, err := s.pool.Query(ctx, eventsClaimSQL, p.Now, p.Limit, p.LockedUntil, p.Token, LeaseExpiredCause, LeaseExpiredError)
	if err != nil {
		return nil, fmt.Errorf("claim events: %w", err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ClaimedEvent, error) {
		var e ClaimedEvent
		err := r.Scan(&e.ID, &e.Provider, &e.SourceKind, &e.EventID, &e.EventType, &e.Payload, &e.Body, &e.Attempts, &e.Interrupted, &e.CreatedAt, &e.DueAt)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim events: %w", err)
	}
	// UPDATE ... RETURNING has no order; the batch runs oldest due first.
	slices.SortFunc(evs, func(a, b ClaimedEvent) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return evs, nil
}

// EventStartAttempt counts the attempt about to run, in a transaction that
// commits before the handler starts: a handler that kills its processor
// (a crash, an endless loop until the Lambda timeout) still spends an
// attempt, so a poison event cannot loop for ever, while the other events of
// the batch, which never started, are not charged. It returns the attempt's
// number, or ok=false when the claim is no longer this token's (the lease
// passed and another processor claimed the event) or the lease has ended.
//
// The commit is asynchronous: set_config(..., true) turns synchronous_commit
// off for this statement's own transaction alone, so counting costs one
// round trip and no WAL flush (BenchmarkApply: a flushed count nearly
// doubled the cost of an event on a disk that syncs). That is safe: a
// processor crash cannot lose an asynchronous commit, only a server crash
// can, and the handler's commit, which is synchronous, flushes the WAL past
// this record first, so an effect is never durable without the attempt that
// made it. The set_config sits in a FROM subquery joined to the row, so
// it runs whenever a row is updated, whatever the plan; a statement that
// updates nothing has nothing to flush. The setting ends with the
// transaction: the session keeps synchronous_commit on (a test checks it).
func (s *Store) EventStartAttempt(ctx context.Context, id int64, token string, now time.Time) (attempt int, ok bool, err error) {
	var n *int
	err = s.pool.QueryRow(ctx, `
WITH started AS (
    UPDATE webhook_events e SET attempts = e.attempts + 1
      FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
     WHERE e.id = $1 AND e.locked_by = $2 AND e.locked_until > $3 AND e.processed_at IS NULL AND e.dead_at IS NULL
    RETURNING e.attempts
)
SELECT (SELECT attempts FROM started)`, id, token, now).Scan(&n)
	if err != nil {
		return 0, false, fmt.Errorf("start attempt of event %d: %w", id, err)
	}
	if n == nil {
		return 0, false, nil
	}
	return *n, true, nil
}

// EventMarkProcessedParams marks a claimed event processed.
type EventMarkProcessedParams struct {
	ID      int64
	Token   string
	Now     time.Time
	Outcome string
}

// EventMarkProcessed sets processed_at and the outcome and ends the claim.
// Run it in the handler's transaction, before the handler: the UPDATE locks
// the row until that transaction ends and checks, on the row's newest
// version, that it is still unprocessed and still claimed with this token.
// Two processors can therefore never both commit an event: the second waits
// for the first's lock and then matches no row. ok=false means the event is
// no longer this claimer's to process.
func EventMarkProcessed(ctx context.Context, db DBTX, p EventMarkProcessedParams) (ok bool, err error) {
	tag, err := db.Exec(ctx, `
UPDATE webhook_events
   SET processed_at = $3, outcome = $4, locked_until = NULL, locked_by = NULL
 WHERE id = $1 AND locked_by = $2 AND processed_at IS NULL AND dead_at IS NULL`,
		p.ID, p.Token, p.Now, p.Outcome)
	if err != nil {
		return false, fmt.Errorf("mark event %d processed: %w", p.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// EventRecordFailureParams is a failed attempt to record.
type EventRecordFailureParams struct {
	ID    int64
	Token string
	Now   time.Time
	// Cause is a stable code (handler_failed, handler_panic, ...).
	Cause string
	// Error is the error's text, stored in the history and last_error.
	Error string
	// NextAttemptAt is when the event is due again (the backoff).
	NextAttemptAt time.Time
}

// EventRecordFailure appends the failed attempt to the event's error
// history, sets last_error and the next attempt's time, and ends the claim.
// It runs after the handler's transaction was rolled back, in a statement of
// its own, so the record survives the rollback of the failed work. ok=false
// means the claim is no longer this token's (nothing was written).
func (s *Store) EventRecordFailure(ctx context.Context, p EventRecordFailureParams) (ok bool, err error) {
	tag, err := s.pool.Exec(ctx, `
UPDATE webhook_events
   SET errors = errors || jsonb_build_array(jsonb_build_object(
                    'attempt', attempts, 'at', $3::timestamptz, 'cause', $4::text, 'error', $5::text)),
       last_error = $5, next_attempt_at = $6, locked_until = NULL, locked_by = NULL
 WHERE id = $1 AND locked_by = $2 AND processed_at IS NULL AND dead_at IS NULL`,
		p.ID, p.Token, p.Now, p.Cause, p.Error, p.NextAttemptAt)
	if err != nil {
		return false, fmt.Errorf("record failure of event %d: %w", p.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// EventDeadLetterParams moves a claimed event to the dead letters.
type EventDeadLetterParams struct {
	ID    int64
	Token string
	Now   time.Time
	// Cause and Error, when Cause is not empty, are appended to the history
	// as the last attempt's entry (empty when the claim already recorded
	// it, for an attempt that never finished).
	Cause string
	Error string
}

// eventDeadLetterSQL marks the event dead and copies it, with its whole
// error history, into webhook_dead_letters in one statement, so there is
// never a dead event without its dead letter or the reverse.
const eventDeadLetterSQL = `
WITH ev AS (
    UPDATE webhook_events
       SET dead_at = $3, locked_until = NULL, locked_by = NULL,
           errors = CASE WHEN $4::text = '' THEN errors
                         ELSE errors || jsonb_build_array(jsonb_build_object(
                              'attempt', attempts, 'at', $3::timestamptz, 'cause', $4::text, 'error', $5::text)) END,
           last_error = CASE WHEN $4::text = '' THEN last_error ELSE $5::text END
     WHERE id = $1 AND locked_by = $2 AND processed_at IS NULL AND dead_at IS NULL
    RETURNING id, provider, event_id, event_type, payload, body, attempts, errors, last_error
)
INSERT INTO webhook_dead_letters (event_pk, provider, event_id, event_type, payload, body, attempts, errors, last_error, dead_at)
SELECT id, provider, event_id, event_type, payload, body, attempts, errors, last_error, $3 FROM ev
RETURNING id`

// EventDeadLetter moves the event to webhook_dead_letters: it leaves the
// drain (dead_at), and the dead letter keeps its payload, body, attempts and
// error history. It returns the dead letter's id, or ok=false when the
// claim is no longer this token's.
func (s *Store) EventDeadLetter(ctx context.Context, p EventDeadLetterParams) (deadLetterID int64, ok bool, err error) {
	err = s.pool.QueryRow(ctx, eventDeadLetterSQL, p.ID, p.Token, p.Now, p.Cause, p.Error).Scan(&deadLetterID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("dead-letter event %d: %w", p.ID, err)
	}
	return deadLetterID, true, nil
}

// EventsRelease gives back claimed events that were not started (the
// processor ran out of time or lease): they are due again at now, with their
// attempts unchanged, instead of waiting for the lease to pass.
func (s *Store) EventsRelease(ctx context.Context, ids []int64, token string, now time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `
UPDATE webhook_events SET locked_until = NULL, locked_by = NULL, next_attempt_at = $3
 WHERE id = ANY($1) AND locked_by = $2 AND processed_at IS NULL AND dead_at IS NULL`, ids, token, now)
	if err != nil {
		return 0, fmt.Errorf("release %d claimed events: %w", len(ids), err)
	}
	return int(tag.RowsAffected()), nil
}

// DeadLetterFilter selects open dead letters (those not requeued yet). The
// zero value matches none: set All, or at least one field.
type DeadLetterFilter struct {
	// ID selects one dead letter (webhook_dead_letters.id).
	ID int64
	// Provider is the source name; EventType the event type.
	Provider  string
	EventType string
	// DeadFrom and DeadTo bound dead_at: From inclusive, To exclusive.
	DeadFrom time.Time
	DeadTo   time.Time
	// All matches every open dead letter; it must be asked for explicitly,
	// so a forgotten flag cannot requeue everything.
	All bool
}

// ErrEmptyFilter is returned for a DeadLetterFilter that selects nothing.
var ErrEmptyFilter = errors.New("dead letter filter is empty: give an id, a source, a type, a time window, or All")

func (f DeadLetterFilter) empty() bool {
	return !f.All && f.ID == 0 && f.Provider == "" && f.EventType == "" && f.DeadFrom.IsZero() && f.DeadTo.IsZero()
}

// args returns the filter as the $1..$5 of deadLetterWhere; zero fields are
// NULL and match anything.
func (f DeadLetterFilter) args() []any {
	var id, provider, eventType, from, to any
	if f.ID != 0 {
		id = f.ID
	}
	if f.Provider != "" {
		provider = f.Provider
	}
	if f.EventType != "" {
		eventType = f.EventType
	}
	if !f.DeadFrom.IsZero() {
		from = f.DeadFrom
	}
	if !f.DeadTo.IsZero() {
		to = f.DeadTo
	}
	return []any{id, provider, eventType, from, to}
}

// deadLetterWhere selects open dead letters by DeadLetterFilter.args. The
// predicates are fixed text with NULL meaning "any": no SQL is built from
// input, and webhook_dead_letters_open_idx serves provider/type/time.
const deadLetterWhere = `
 d.requeued_at IS NULL
   AND ($1::bigint IS NULL OR d.id = $1)
   AND ($2::text IS NULL OR d.provider = $2)
   AND ($3::text IS NULL OR d.event_type = $3)
   AND ($4::timestamptz IS NULL OR d.dead_at >= $4)
   AND ($5::timestamptz IS NULL OR d.dead_at < $5)`

// DeadLetter is a dead letter row.
type DeadLetter struct {
	ID         int64
	EventPK    int64
	Provider   string
	EventID    string
	EventType  string
	Payload    []byte // JSONB as text
	Body       []byte
	Attempts   int
	Errors     []byte // JSONB array as text: the error history
	LastError  *string
	DeadAt     time.Time
	RequeuedAt *time.Time
}

// DeadLettersList returns the open dead letters matching f, oldest first,
// at most limit of them.
func (s *Store) DeadLettersList(ctx context.Context, f DeadLetterFilter, limit int) ([]DeadLetter, error) {
	if f.empty() {
		return nil, ErrEmptyFilter
	}
	rows, err := s.pool.Query(ctx, `
SELECT d.id, d.event_pk, d.provider, d.event_id, d.event_type, d.payload::text, d.body, d.attempts,
       d.errors::text, d.last_error, d.dead_at, d.requeued_at
  FROM webhook_dead_letters d
 WHERE`+deadLetterWhere+`
 ORDER BY d.dead_at, d.id
 LIMIT $6`, append(f.args(), limit)...)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeadLetter, error) {
		var d DeadLetter
		err := r.Scan(&d.ID, &d.EventPK, &d.Provider, &d.EventID, &d.EventType, &d.Payload, &d.Body, &d.Attempts,
			&d.Errors, &d.LastError, &d.DeadAt, &d.RequeuedAt)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return out, nil
}

// DeadLettersRequeue sends the open dead letters matching f back to the
// drain, in one statement: each is marked requeued_at = now, and its event
// becomes live and due at now with attempts, error history and last_error
// reset (the dead letter keeps them). It returns how many events were
// requeued.
func (s *Store) DeadLettersRequeue(ctx context.Context, f DeadLetterFilter, now time.Time) (int, error) {
	if f.empty() {
		return 0, ErrEmptyFilter
	}
	tag, err := s.pool.Exec(ctx, `
WITH dl AS (
    UPDATE webhook_dead_letters d SET requeued_at = $6
     WHERE`+deadLetterWhere+`
    RETURNING d.event_pk
)
UPDATE webhook_events e
   SET dead_at = NULL, attempts = 0, errors = '[]'::jsonb, last_error = NULL,
       next_attempt_at = $6, locked_until = NULL, locked_by = NULL
  FROM dl
 WHERE e.id = dl.event_pk AND e.dead_at IS NOT NULL`, append(f.args(), now)...)
	if err != nil {
		return 0, fmt.Errorf("requeue dead letters: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
