package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file holds the operators' queries: what `webhookctl` reads to say
// whether anything is stuck (stats, listings, one event in full) and the
// replay of processed events. Like every query here they are fixed text:
// filters are parameters where NULL means "any", and the few statements
// that differ by an event state are chosen among constants, never built
// from input.

// DatabaseNow returns the database server's clock. Operator commands
// (requeue, replay, the states of events) use it rather than the clock of
// the machine they run on, which may be a laptop's: the receiver stamps
// new events with the server's now(), and the processors' clocks are
// NTP-synchronised as the server's is.
func (s *Store) DatabaseNow(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.pool.QueryRow(ctx, `SELECT statement_timestamp()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return now, nil
}

// Backlog is the processor's to-do list, as cheap to read as the partial
// index webhook_events_due_idx allows.
type Backlog struct {
	// Count is every unprocessed, live event: due, waiting for a retry,
	// or being processed.
	Count int64
	// Due is the part of Count whose next attempt is due at now.
	Due int64
	// OldestDueAt is the earliest next_attempt_at among the due events
	// (how long the oldest due event has waited), nil when none is due.
	OldestDueAt *time.Time
}

// OldestDueAge is how long the oldest due event has waited at now; zero
// when none is due.
func (b Backlog) OldestDueAge(now time.Time) time.Duration {
	if b.OldestDueAt == nil || now.Before(*b.OldestDueAt) {
		return 0
	}
	return now.Sub(*b.OldestDueAt)
}

// EventsBacklog reads the backlog at now (the processor's clock). Both
// predicates restate the partial index's, and every column read is in it
// (next_attempt_at), so this is an index-only scan of the backlog: its cost
// follows the backlog, never the table. The processor runs it at the end
// of each drain for its backlog gauge.
func (s *Store) EventsBacklog(ctx context.Context, now time.Time) (Backlog, error) {
	var b Backlog
	err := s.pool.QueryRow(ctx, `
SELECT count(*), count(*) FILTER (WHERE next_attempt_at <= $1), min(next_attempt_at) FILTER (WHERE next_attempt_at <= $1)
  FROM webhook_events
 WHERE processed_at IS NULL AND dead_at IS NULL`, now).Scan(&b.Count, &b.Due, &b.OldestDueAt)
	if err != nil {
		return b, fmt.Errorf("read backlog: %w", err)
	}
	return b, nil
}

// BacklogStats is the backlog in the detail an operator needs: what is
// due, what is being processed, what waits for a retry.
type BacklogStats struct {
	Backlog
	// InFlight events are claimed by a processor whose lease has not
	// passed.
	InFlight int64
	// Retrying events failed at least one attempt and wait for the next.
	Retrying int64
	// OldestCreatedAt is when the oldest unprocessed event was received.
	OldestCreatedAt *time.Time
}

// EventsBacklogStats reads the backlog in detail at now. It visits every
// backlog row (created_at and attempts are not in the index), which is
// fine for an operator's command, not for every drain.
func (s *Store) EventsBacklogStats(ctx context.Context, now time.Time) (BacklogStats, error) {
	var b BacklogStats
	err := s.pool.QueryRow(ctx, `
SELECT count(*),
       count(*) FILTER (WHERE next_attempt_at <= $1),
       min(next_attempt_at) FILTER (WHERE next_attempt_at <= $1),
       count(*) FILTER (WHERE locked_until > $1),
       count(*) FILTER (WHERE attempts > 0 AND (locked_until IS NULL OR locked_until <= $1)),
       min(created_at)
  FROM webhook_events
 WHERE processed_at IS NULL AND dead_at IS NULL`, now).Scan(
		&b.Count, &b.Due, &b.OldestDueAt, &b.InFlight, &b.Retrying, &b.OldestCreatedAt)
	if err != nil {
		return b, fmt.Errorf("read backlog: %w", err)
	}
	return b, nil
}

// DeadLetterCount is the open dead letters of one source and type.
type DeadLetterCount struct {
	Provider  string
	EventType string
	Count     int64
	// OldestDeadAt is the earliest dead_at among them.
	OldestDeadAt time.Time
}

// DeadLettersCountByType counts the open dead letters (not requeued) per
// source and type, largest first. webhook_dead_letters_open_idx holds
// exactly these rows.
func (s *Store) DeadLettersCountByType(ctx context.Context) ([]DeadLetterCount, error) {
	rows, err := s.pool.Query(ctx, `
SELECT provider, event_type, count(*), min(dead_at)
  FROM webhook_dead_letters WHERE requeued_at IS NULL
 GROUP BY provider, event_type ORDER BY count(*) DESC, provider, event_type`)
	if err != nil {
		return nil, fmt.Errorf("count dead letters: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeadLetterCount, error) {
		var c DeadLetterCount
		err := r.Scan(&c.Provider, &c.EventType, &c.Count, &c.OldestDeadAt)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("count dead letters: %w", err)
	}
	return out, nil
}

// DeadLettersCount returns how many events DeadLettersRequeue would send
// back for f now: the open dead letters matching f whose event is still
// dead, counted once per event. It is the dry run of a requeue, on the
// same WHERE clause.
func (s *Store) DeadLettersCount(ctx context.Context, f DeadLetterFilter) (int, error) {
	if f.empty() {
		return 0, ErrEmptyFilter
	}
	var n int
	err := s.pool.QueryRow(ctx, `
SELECT count(DISTINCT e.id)
  FROM webhook_dead_letters d JOIN webhook_events e ON e.id = d.event_pk AND e.dead_at IS NOT NULL
 WHERE`+deadLetterWhere, f.args()...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count dead letters: %w", err)
	}
	return n, nil
}

// DeadLettersByEvent returns every dead letter of one event (requeued or
// not), oldest first: the history of its deaths.
func (s *Store) DeadLettersByEvent(ctx context.Context, eventPK int64) ([]DeadLetter, error) {
	rows, err := s.pool.Query(ctx, `
SELECT d.id, d.event_pk, d.provider, d.event_id, d.event_type, d.payload::text, d.body, d.attempts,
       d.errors::text, d.last_error, d.dead_at, d.requeued_at
  FROM webhook_dead_letters d
 WHERE d.event_pk = $1
 ORDER BY d.dead_at, d.id`, eventPK)
	if err != nil {
		return nil, fmt.Errorf("dead letters of event %d: %w", eventPK, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeadLetter, error) {
		var d DeadLetter
		err := r.Scan(&d.ID, &d.EventPK, &d.Provider, &d.EventID, &d.EventType, &d.Payload, &d.Body, &d.Attempts,
			&d.Errors, &d.LastError, &d.DeadAt, &d.RequeuedAt)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("dead letters of event %d: %w", eventPK, err)
	}
	return out, nil
}

// PayloadMismatchCount is the mismatching redeliveries of one source.
type PayloadMismatchCount struct {
	Provider string
	Count    int64
	// LastAt is the latest one.
	LastAt time.Time
}

// PayloadMismatchesCountBySource counts the mismatching redeliveries
// received since since, per source, largest first.
func (s *Store) PayloadMismatchesCountBySource(ctx context.Context, since time.Time) ([]PayloadMismatchCount, error) {
	rows, err := s.pool.Query(ctx, `
SELECT provider, count(*), max(received_at)
  FROM webhook_payload_mismatches WHERE received_at >= $1
 GROUP BY provider ORDER BY count(*) DESC, provider`, since)
	if err != nil {
		return nil, fmt.Errorf("count payload mismatches: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PayloadMismatchCount, error) {
		var c PayloadMismatchCount
		err := r.Scan(&c.Provider, &c.Count, &c.LastAt)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("count payload mismatches: %w", err)
	}
	return out, nil
}

// PayloadMismatch is one redelivery whose body differed from the stored one.
type PayloadMismatch struct {
	ReceivedSHA256 []byte
	ReceivedSize   int
	ReceivedAt     time.Time
}

// PayloadMismatchesByEvent returns the mismatching redeliveries of one
// event, oldest first.
func (s *Store) PayloadMismatchesByEvent(ctx context.Context, provider, eventID string) ([]PayloadMismatch, error) {
	rows, err := s.pool.Query(ctx, `
SELECT received_sha256, received_size, received_at FROM webhook_payload_mismatches
 WHERE provider = $1 AND event_id = $2 ORDER BY received_at, id`, provider, eventID)
	if err != nil {
		return nil, fmt.Errorf("payload mismatches of %s/%s: %w", provider, eventID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PayloadMismatch, error) {
		var m PayloadMismatch
		err := r.Scan(&m.ReceivedSHA256, &m.ReceivedSize, &m.ReceivedAt)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("payload mismatches of %s/%s: %w", provider, eventID, err)
	}
	return out, nil
}

// ArchiveStats is the archiver's progress.
type ArchiveStats struct {
	// Objects, ObjectBytes and ArchivedEvents sum the committed objects of
	// the manifest (events counted as archived, expunged ones included).
	Objects        int64
	ObjectBytes    int64
	ArchivedEvents int64
	// PendingObjects are manifest rows not committed: batches being
	// written, or orphans the next run sweeps.
	PendingObjects int64
	// Waiting is every processed event whose body is still in Postgres;
	// Due the part of it processed before the cutoff (what a run would
	// archive now); OldestProcessedAt the earliest of them.
	Waiting           int64
	Due               int64
	OldestProcessedAt *time.Time
}

// ArchiveStatsGet reads the archive's progress; cutoff is now minus the
// archiver's minimum age. The manifest is small (one row per object) and
// the waiting events are read from webhook_events_archivable_idx alone.
func (s *Store) ArchiveStatsGet(ctx context.Context, cutoff time.Time) (ArchiveStats, error) {
	var a ArchiveStats
	err := s.pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE committed_at IS NOT NULL),
       coalesce(sum(size) FILTER (WHERE committed_at IS NOT NULL), 0)::bigint,
       coalesce(sum(event_count) FILTER (WHERE committed_at IS NOT NULL), 0)::bigint,
       count(*) FILTER (WHERE committed_at IS NULL)
  FROM webhook_archive_objects`).Scan(&a.Objects, &a.ObjectBytes, &a.ArchivedEvents, &a.PendingObjects)
	if err != nil {
		return a, fmt.Errorf("read archive progress: %w", err)
	}
	err = s.pool.QueryRow(ctx, `
SELECT count(*), count(*) FILTER (WHERE processed_at < $1), min(processed_at)
  FROM webhook_events
 WHERE processed_at IS NOT NULL AND archived_at IS NULL AND body IS NOT NULL`, cutoff).Scan(&a.Waiting, &a.Due, &a.OldestProcessedAt)
	if err != nil {
		return a, fmt.Errorf("read archive progress: %w", err)
	}
	return a, nil
}

// TableSize is the disk use of one table.
type TableSize struct {
	Name string
	// Rows is the planner's estimate (reltuples; -1 before the first
	// ANALYZE): exact counts of a table that grows for ever are too dear.
	Rows int64
	// Table is the main fork; TOAST the out-of-line storage of large
	// values (bodies, payloads) with its index; Indexes every index.
	Table   int64
	TOAST   int64
	Indexes int64
	Total   int64
}

// TableSizes returns the disk use of the project's tables, largest first.
func (s *Store) TableSizes(ctx context.Context) ([]TableSize, error) {
	rows, err := s.pool.Query(ctx, `
SELECT c.relname, c.reltuples::bigint,
       pg_relation_size(c.oid),
       coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0),
       pg_indexes_size(c.oid),
       pg_total_relation_size(c.oid)
  FROM pg_class c
 WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace
   AND c.relname IN ('webhook_events', 'webhook_dead_letters', 'webhook_rejections',
                     'webhook_payload_mismatches', 'webhook_archive_objects')
 ORDER BY pg_total_relation_size(c.oid) DESC, c.relname`)
	if err != nil {
		return nil, fmt.Errorf("read table sizes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TableSize, error) {
		var t TableSize
		err := r.Scan(&t.Name, &t.Rows, &t.Table, &t.TOAST, &t.Indexes, &t.Total)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("read table sizes: %w", err)
	}
	return out, nil
}

// EventState is where an event is in its life, as operators filter by it.
// Every event is in exactly one state (see eventStateSQL).
type EventState string

// Event states.
const (
	// StatePending: unprocessed, never attempted, not claimed.
	StatePending EventState = "pending"
	// StateRetrying: unprocessed, at least one failed attempt, waiting
	// for the next (not claimed).
	StateRetrying EventState = "retrying"
	// StateInFlight: claimed by a processor whose lease has not passed.
	StateInFlight EventState = "in_flight"
	// StateProcessed: processed (handled or unhandled), body in Postgres.
	StateProcessed EventState = "processed"
	// StateArchived: processed, body moved to S3.
	StateArchived EventState = "archived"
	// StateDead: moved to the dead letters after its last attempt.
	StateDead EventState = "dead"
	// StateExpunged: its body was erased.
	StateExpunged EventState = "expunged"
)

// EventStates lists the states in the order of an event's life.
func EventStates() []EventState {
	return []EventState{StatePending, StateRetrying, StateInFlight, StateProcessed, StateArchived, StateDead, StateExpunged}
}

// eventStateSQL computes EventState for the row e at $1 (now). The
// predicates of eventStateWhere select exactly the rows it names.
const eventStateSQL = `CASE
    WHEN e.expunged_at IS NOT NULL THEN 'expunged'
    WHEN e.dead_at IS NOT NULL THEN 'dead'
    WHEN e.archived_at IS NOT NULL THEN 'archived'
    WHEN e.processed_at IS NOT NULL THEN 'processed'
    WHEN e.locked_until > $1 THEN 'in_flight'
    WHEN e.attempts > 0 THEN 'retrying'
    ELSE 'pending' END`

// eventStateWhere holds one constant predicate per state, for the state
// filter of EventsList: constants rather than "state = $n" so that the
// unprocessed states restate webhook_events_due_idx's predicate and the
// planner can use it. "" matches every state.
var eventStateWhere = map[EventState]string{
	"":             ``,
	StatePending:   ` AND e.processed_at IS NULL AND e.dead_at IS NULL AND e.expunged_at IS NULL AND (e.locked_until IS NULL OR e.locked_until <= $1) AND e.attempts = 0`,
	StateRetrying:  ` AND e.processed_at IS NULL AND e.dead_at IS NULL AND e.expunged_at IS NULL AND (e.locked_until IS NULL OR e.locked_until <= $1) AND e.attempts > 0`,
	StateInFlight:  ` AND e.processed_at IS NULL AND e.dead_at IS NULL AND e.expunged_at IS NULL AND e.locked_until > $1`,
	StateProcessed: ` AND e.processed_at IS NOT NULL AND e.archived_at IS NULL AND e.dead_at IS NULL AND e.expunged_at IS NULL`,
	StateArchived:  ` AND e.archived_at IS NOT NULL AND e.dead_at IS NULL AND e.expunged_at IS NULL`,
	StateDead:      ` AND e.dead_at IS NOT NULL AND e.expunged_at IS NULL`,
	StateExpunged:  ` AND e.expunged_at IS NOT NULL`,
}

// ParseEventState reads a state name; "" is every state.
func ParseEventState(s string) (EventState, error) {
	if _, ok := eventStateWhere[EventState(s)]; !ok {
		return "", fmt.Errorf("unknown state %q (want one of %v)", s, EventStates())
	}
	return EventState(s), nil
}

// EventFilter selects events for EventsList. Zero fields match anything.
type EventFilter struct {
	Provider  string
	EventType string
	State     EventState
	// CreatedFrom and CreatedTo bound created_at (the receipt): From
	// inclusive, To exclusive.
	CreatedFrom time.Time
	CreatedTo   time.Time
	// BeforeID pages backwards: only events with a smaller id.
	BeforeID int64
}

// EventSummary is an event as listed.
type EventSummary struct {
	ID            int64
	Provider      string
	EventID       string
	EventType     string
	State         EventState
	Outcome       *string
	Attempts      int
	CreatedAt     time.Time
	ProcessedAt   *time.Time
	NextAttemptAt time.Time
	DeadAt        *time.Time
	LastError     *string
	BodySize      int
}

func nullIfZero[T comparable](v T) any {
	var zero T
	if v == zero {
		return nil
	}
	return v
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// EventsList returns the events matching f at now, newest first, at most
// limit of them. Page with f.BeforeID set to the last id returned.
func (s *Store) EventsList(ctx context.Context, f EventFilter, now time.Time, limit int) ([]EventSummary, error) {
	stateWhere, ok := eventStateWhere[f.State]
	if !ok {
		return nil, fmt.Errorf("list events: unknown state %q", f.State)
	}
	rows, err := s.pool.Query(ctx, `
SELECT e.id, e.provider, e.event_id, e.event_type, `+eventStateSQL+`, e.outcome, e.attempts,
       e.created_at, e.processed_at, e.next_attempt_at, e.dead_at, e.last_error, e.body_size
  FROM webhook_events e
 WHERE ($2::text IS NULL OR e.provider = $2)
   AND ($3::text IS NULL OR e.event_type = $3)
   AND ($4::timestamptz IS NULL OR e.created_at >= $4)
   AND ($5::timestamptz IS NULL OR e.created_at < $5)
   AND ($6::bigint IS NULL OR e.id < $6)`+stateWhere+`
 ORDER BY e.id DESC
 LIMIT $7`, now, nullIfZero(f.Provider), nullIfZero(f.EventType), nullTime(f.CreatedFrom), nullTime(f.CreatedTo), nullIfZero(f.BeforeID), limit)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (EventSummary, error) {
		var e EventSummary
		err := r.Scan(&e.ID, &e.Provider, &e.EventID, &e.EventType, &e.State, &e.Outcome, &e.Attempts,
			&e.CreatedAt, &e.ProcessedAt, &e.NextAttemptAt, &e.DeadAt, &e.LastError, &e.BodySize)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}

// EventDetail is every column of an event an operator may need.
type EventDetail struct {
	EventSummary
	SourceKind    string
	Payload       []byte // JSONB as text, nil when not stored
	Body          []byte // nil once archived or expunged
	BodySHA256    []byte
	Metadata      map[string]string
	Errors        []byte // JSONB array as text: the error history
	LockedUntil   *time.Time
	LockedBy      *string
	ArchiveKey    *string
	ArchiveOffset *int64
	ArchiveLength *int64
	ArchivedAt    *time.Time
	ExpungedAt    *time.Time
}

const eventDetailSQL = `
SELECT e.id, e.provider, e.event_id, e.event_type, ` + eventStateSQL + `, e.outcome, e.attempts,
       e.created_at, e.processed_at, e.next_attempt_at, e.dead_at, e.last_error, e.body_size,
       e.source_kind, e.payload::text, e.body, e.body_sha256, e.metadata, e.errors::text,
       e.locked_until, e.locked_by, e.archive_key, e.archive_offset, e.archive_length, e.archived_at, e.expunged_at
  FROM webhook_events e`

func scanEventDetail(row pgx.Row) (EventDetail, error) {
	var e EventDetail
	err := row.Scan(&e.ID, &e.Provider, &e.EventID, &e.EventType, &e.State, &e.Outcome, &e.Attempts,
		&e.CreatedAt, &e.ProcessedAt, &e.NextAttemptAt, &e.DeadAt, &e.LastError, &e.BodySize,
		&e.SourceKind, &e.Payload, &e.Body, &e.BodySHA256, &e.Metadata, &e.Errors,
		&e.LockedUntil, &e.LockedBy, &e.ArchiveKey, &e.ArchiveOffset, &e.ArchiveLength, &e.ArchivedAt, &e.ExpungedAt)
	return e, err
}

// EventGet returns the event with primary key id, its state at now.
// ErrEventNotFound (wrapped) when there is none.
func (s *Store) EventGet(ctx context.Context, id int64, now time.Time) (EventDetail, error) {
	e, err := scanEventDetail(s.pool.QueryRow(ctx, eventDetailSQL+` WHERE e.id = $2`, now, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("get event %d: %w", id, ErrEventNotFound)
	}
	if err != nil {
		return e, fmt.Errorf("get event %d: %w", id, err)
	}
	return e, nil
}

// EventFind returns the event stored for (provider, eventID), its state
// at now. ErrEventNotFound (wrapped) when there is none.
func (s *Store) EventFind(ctx context.Context, provider, eventID string, now time.Time) (EventDetail, error) {
	e, err := scanEventDetail(s.pool.QueryRow(ctx, eventDetailSQL+` WHERE e.provider = $2 AND e.event_id = $3`, now, provider, eventID))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("get event %s/%s: %w", provider, eventID, ErrEventNotFound)
	}
	if err != nil {
		return e, fmt.Errorf("get event %s/%s: %w", provider, eventID, err)
	}
	return e, nil
}

// ReplayFilter selects processed events to replay. The zero value matches
// none: set All, or at least one field.
type ReplayFilter struct {
	// ID selects one event (webhook_events.id).
	ID        int64
	Provider  string
	EventType string
	// Outcome selects by how the event ended: OutcomeHandled, or
	// OutcomeUnhandled (events no handler took when they came: replay
	// them once their handler is deployed).
	Outcome string
	// ProcessedFrom and ProcessedTo bound processed_at: From inclusive, To
	// exclusive (the window a faulty handler was live, say).
	ProcessedFrom time.Time
	ProcessedTo   time.Time
	// All matches every replayable event; it must be asked for
	// explicitly.
	All bool
}

// ErrEmptyReplayFilter is returned for a ReplayFilter that selects nothing.
var ErrEmptyReplayFilter = errors.New("replay filter is empty: give an id, a source, a type, an outcome, a time window, or All")

func (f ReplayFilter) empty() bool {
	return !f.All && f.ID == 0 && f.Provider == "" && f.EventType == "" && f.Outcome == "" &&
		f.ProcessedFrom.IsZero() && f.ProcessedTo.IsZero()
}

// args returns the filter as $1..$6 of replayFilterWhere.
func (f ReplayFilter) args() []any {
	return []any{nullIfZero(f.ID), nullIfZero(f.Provider), nullIfZero(f.EventType), nullIfZero(f.Outcome),
		nullTime(f.ProcessedFrom), nullTime(f.ProcessedTo)}
}

// replayFilterWhere is ReplayFilter.args as predicates; NULL matches any.
const replayFilterWhere = `
   AND ($1::bigint IS NULL OR e.id = $1)
   AND ($2::text IS NULL OR e.provider = $2)
   AND ($3::text IS NULL OR e.event_type = $3)
   AND ($4::text IS NULL OR e.outcome = $4)
   AND ($5::timestamptz IS NULL OR e.processed_at >= $5)
   AND ($6::timestamptz IS NULL OR e.processed_at < $6)`

// replayableWhere is what a replay may touch: processed events whose body
// is still in Postgres. It is the predicate of
// webhook_events_archivable_idx (so a processed_at window is an index
// range), plus not dead and not expunged, which a processed event with a
// body is anyway. Archived events are left out: the processor hands a
// handler the body and payload from the row, and an archived row has
// neither.
const replayableWhere = ` e.processed_at IS NOT NULL AND e.archived_at IS NULL AND e.body IS NOT NULL
   AND e.dead_at IS NULL AND e.expunged_at IS NULL` + replayFilterWhere

// archivedMatchWhere is the events the filter matches that a replay skips
// because their bodies are archived.
const archivedMatchWhere = ` e.processed_at IS NOT NULL AND e.archived_at IS NOT NULL AND e.expunged_at IS NULL` + replayFilterWhere

// ReplayOptions tunes EventsReplay.
type ReplayOptions struct {
	// Now is when the events become due again (use DatabaseNow).
	Now time.Time
	// DryRun counts and changes nothing.
	DryRun bool
	// ChunkSize is how many events one UPDATE resets; default 1000.
	ChunkSize int
	// Progress, when set, is called after each chunk with the events
	// replayed so far and the total matched.
	Progress func(done, total int)
}

// ReplayResult is what a replay matched and did.
type ReplayResult struct {
	// Matched is the replayable events the filter selected (what a dry
	// run reports, and what the real run goes through).
	Matched int
	// Replayed is how many were reset (0 for a dry run). It is below
	// Matched only if some changed between the selection and their chunk
	// (archived, expunged, or replayed by someone else meanwhile).
	Replayed int
	// SkippedArchived is the events the filter also matched whose bodies
	// are archived in S3: a replay leaves them alone.
	SkippedArchived int
}

// EventsReplay sends the processed events matching f through the
// processor again: each is made unprocessed and due at opts.Now, with its
// attempts, error history, last error, outcome and processed_at reset, as a
// requeue resets a dead letter. The drain's invariant (attempts equals the
// history's length for an unprocessed event) needs the reset; the price is
// that the previous processing's trace is overwritten (the replay itself is
// logged by its caller). Only events whose body is in Postgres are
// replayed (see replayableWhere); SkippedArchived counts the others.
//
// The dry run counts with the same WHERE clause as the real run, which
// selects the matching ids once and resets them in chunks (each chunk
// re-checks the clause): every event is replayed at most once even if the
// processor picks up and finishes an early chunk while later ones are
// being reset, and processors start on the first chunk at once.
func (s *Store) EventsReplay(ctx context.Context, f ReplayFilter, opts ReplayOptions) (ReplayResult, error) {
	var res ReplayResult
	if f.empty() {
		return res, ErrEmptyReplayFilter
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = 1000
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_events e WHERE`+archivedMatchWhere, f.args()...).Scan(&res.SkippedArchived); err != nil {
		return res, fmt.Errorf("replay: count archived events: %w", err)
	}
	if opts.DryRun {
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_events e WHERE`+replayableWhere, f.args()...).Scan(&res.Matched)
		if err != nil {
			return res, fmt.Errorf("replay: count events: %w", err)
		}
		return res, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT e.id FROM webhook_events e WHERE`+replayableWhere+` ORDER BY e.id`, f.args()...)
	if err != nil {
		return res, fmt.Errorf("replay: select events: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return res, fmt.Errorf("replay: select events: %w", err)
	}
	res.Matched = len(ids)
	for len(ids) > 0 {
		chunk := ids[:min(opts.ChunkSize, len(ids))]
		ids = ids[len(chunk):]
		tag, err := s.pool.Exec(ctx, `
UPDATE webhook_events e
   SET processed_at = NULL, outcome = NULL, attempts = 0, errors = '[]'::jsonb, last_error = NULL,
       next_attempt_at = $7, locked_until = NULL, locked_by = NULL
 WHERE e.id = ANY($8) AND`+replayableWhere, append(f.args(), opts.Now, chunk)...)
		if err != nil {
			return res, fmt.Errorf("replay: %d of %d events reset before: %w", res.Replayed, res.Matched, err)
		}
		res.Replayed += int(tag.RowsAffected())
		if opts.Progress != nil {
			opts.Progress(res.Replayed, res.Matched)
		}
	}
	return res, nil
}

// EventsArchivableCount returns how many events an archive run with this
// cutoff would archive now (processed before it, body still in Postgres).
func (s *Store) EventsArchivableCount(ctx context.Context, processedBefore time.Time) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `
SELECT count(*) FROM webhook_events
 WHERE processed_at IS NOT NULL AND archived_at IS NULL AND body IS NOT NULL AND processed_at < $1`, processedBefore).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count archivable events: %w", err)
	}
	return n, nil
}
