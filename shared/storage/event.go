package storage

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/internal/dbsqlc"
)

// The queries on webhook_events (queries/webhook_events.sql), but the
// operator's list, which is in event_list.go.

// eventFromRow turns a generated row into the domain's event.
func eventFromRow(r dbsqlc.WebhookEvent) (*inbox.Event, error) {
	e := &inbox.Event{
		ID: r.ID, Source: r.Source, SourceKind: r.SourceKind, EventID: r.EventID, Type: r.EventType,
		Body: r.Body, BodySHA256: r.BodySHA256, BodySize: int(r.BodySize), CreatedAt: r.CreatedAt,
		Attempts: int(r.Attempts), NextAttemptAt: r.NextAttemptAt, LockedUntil: r.LockedUntil, LockedBy: deref(r.LockedBy),
		LastError: deref(r.LastError), Outcome: inbox.Outcome(deref(r.Outcome)), ProcessedAt: r.ProcessedAt, DeadAt: r.DeadAt,
		ArchiveKey: deref(r.ArchiveKey), ArchiveOffset: deref(r.ArchiveOffset), ArchiveLength: deref(r.ArchiveLength),
		ArchivedAt: r.ArchivedAt, ExpungedAt: r.ExpungedAt,
	}
	if r.Payload != nil {
		e.Payload = json.RawMessage(r.Payload)
	}
	if err := decodeJSON(r.Metadata, &e.Metadata); err != nil {
		return nil, fmt.Errorf("event %d: metadata: %w", r.ID, err)
	}
	if err := decodeJSON(r.Errors, &e.Errors); err != nil {
		return nil, fmt.Errorf("event %d: error history: %w", r.ID, err)
	}
	return e, nil
}

func eventsFromRows(rows []dbsqlc.WebhookEvent) ([]*inbox.Event, error) {
	out := make([]*inbox.Event, len(rows))
	for i, r := range rows {
		e, err := eventFromRow(r)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// decodeJSON reads a JSONB column; NULL leaves v as it is.
func decodeJSON(b []byte, v any) error {
	if b == nil {
		return nil
	}
	return json.Unmarshal(b, v)
}

// eventNotFound wraps ErrEventNotFound for pgx's ErrNoRows.
func eventNotFound(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrEventNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// EventInsertParams is a new delivery to store.
type EventInsertParams struct {
	Source string
	// SourceKind is the kind of the source that verified the delivery.
	SourceKind string
	EventID    string
	EventType  string
	Body       []byte
	// Metadata is stored as a JSON object; nil stores NULL.
	Metadata map[string]string
}

// EventInsertResult says whether the delivery made a new row.
type EventInsertResult struct {
	// ID is the new row's id, or the stored row's id for a duplicate.
	ID int64
	// Inserted is true for a new event, false for a duplicate.
	Inserted bool
	// BodySHA256 is the hash of the body received now.
	BodySHA256 [32]byte
	// StoredSHA256 is the stored row's body hash, for duplicates.
	StoredSHA256 []byte
	// PayloadStored is false when the body could not be held as JSONB
	// (not JSON, or JSON Postgres refuses, such as \u0000): the raw body is
	// then the only copy, which is always stored anyway.
	PayloadStored bool
}

// Mismatch reports a duplicate whose body differs from the stored one.
func (r EventInsertResult) Mismatch() bool {
	return !r.Inserted && r.StoredSHA256 != nil && string(r.StoredSHA256) != string(r.BodySHA256[:])
}

// EventInsertSQL is the text of EventInsert's statement (queries/
// webhook_events.sql as sqlc rewrites it), exported so that the benchmark
// can run the very same text under pgbench. $4 is the payload as text or
// NULL, $8 the metadata likewise.
const EventInsertSQL = dbsqlc.EventInsertSQL

// EventInsert stores a delivery unless (source, event id) exists. When it
// returns nil on a *Store the event is committed; any error means it may
// not be, and the sender must be told to retry.
func (e executor) EventInsert(ctx context.Context, p EventInsertParams) (EventInsertResult, error) {
	res := EventInsertResult{BodySHA256: sha256.Sum256(p.Body)}
	arg := dbsqlc.EventInsertParams{
		Source: p.Source, EventID: p.EventID, EventType: p.EventType, Body: p.Body,
		BodySHA256: res.BodySHA256[:], BodySize: int32(len(p.Body)), SourceKind: p.SourceKind,
	}
	// Try the body as JSONB when it looks like a JSON document, and let
	// Postgres, which parses it anyway, be the judge: a refusal (not JSON
	// after all, or JSON JSONB cannot hold) falls back to raw-only. A full
	// parse here would be the request's second in Go (the verifier already
	// read its fields) for the benefit of rare invalid bodies.
	if looksLikeJSON(p.Body) {
		arg.Payload = new(string(p.Body))
	}
	if len(p.Metadata) > 0 {
		// Metadata comes from headers: JSONB cannot hold NUL, and dropping
		// it here keeps a stray byte from refusing the whole event.
		clean := make(map[string]string, len(p.Metadata))
		for k, v := range p.Metadata {
			clean[strings.ReplaceAll(k, "\x00", "")] = strings.ReplaceAll(v, "\x00", "")
		}
		b, err := json.Marshal(clean)
		if err != nil {
			return res, fmt.Errorf("encode metadata of %s/%s: %w", p.Source, p.EventID, err)
		}
		arg.Metadata = new(string(b))
	}
	for {
		row, err := e.eventInsertOnce(ctx, arg)
		switch {
		case err == nil:
			res.ID, res.Inserted, res.StoredSHA256 = row.ID, row.Inserted, row.StoredSHA256
			res.PayloadStored = res.Inserted && arg.Payload != nil
			return res, nil
		case errors.Is(err, pgx.ErrNoRows):
			// A concurrent receiver committed the same event after our
			// snapshot: it is a duplicate; read its hash with a new one.
			h, err := queries.EventGetHashByKey(ctx, e.db, dbsqlc.EventGetHashByKeyParams{Source: p.Source, EventID: p.EventID})
			if err != nil {
				return res, fmt.Errorf("read stored event %s/%s: %w", p.Source, p.EventID, err)
			}
			res.ID, res.StoredSHA256 = h.ID, h.BodySHA256
			return res, nil
		case arg.Payload != nil && isJSONBRefusal(err):
			arg.Payload = nil // store the raw body alone
		default:
			return res, fmt.Errorf("insert event %s/%s: %w", p.Source, p.EventID, err)
		}
	}
}

// eventInsertOnce runs the insert; in a transaction under a savepoint, so
// that a JSONB refusal can be retried without the payload.
func (e executor) eventInsertOnce(ctx context.Context, arg dbsqlc.EventInsertParams) (dbsqlc.EventInsertRow, error) {
	if e.tx == nil || arg.Payload == nil {
		return queries.EventInsert(ctx, e.db, arg)
	}
	sp, err := e.tx.Begin(ctx)
	if err != nil {
		return dbsqlc.EventInsertRow{}, err
	}
	row, err := queries.EventInsert(ctx, sp, arg)
	if err != nil {
		_ = sp.Rollback(ctx)
		return row, err
	}
	return row, sp.Commit(ctx)
}

// looksLikeJSON reports whether b starts, after whitespace, like a JSON
// object or array: the bodies webhooks carry.
func looksLikeJSON(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', '[':
			return true
		default:
			return false
		}
	}
	return false
}

// EventInsertFull stores ev in whatever state its fields say, every
// column given (zero CreatedAt and NextAttemptAt mean the server's now),
// and returns the stored row. It is how tests put events into states
// (internal/testkit/factory); the receiver uses EventInsert.
func (e executor) EventInsertFull(ctx context.Context, ev *inbox.Event) (*inbox.Event, error) {
	arg := dbsqlc.EventInsertFullParams{
		Source: ev.Source, SourceKind: ev.SourceKind, EventID: ev.EventID, EventType: ev.Type,
		Body: ev.Body, BodySHA256: ev.BodySHA256, BodySize: int32(ev.BodySize),
		CreatedAt: timePtr(ev.CreatedAt), Attempts: int32(ev.Attempts), NextAttemptAt: timePtr(ev.NextAttemptAt),
		LockedUntil: ev.LockedUntil, LockedBy: ptr(ev.LockedBy), LastError: ptr(ev.LastError), Outcome: ptr(string(ev.Outcome)),
		ProcessedAt: ev.ProcessedAt, DeadAt: ev.DeadAt,
		ArchiveKey: ptr(ev.ArchiveKey), ArchiveOffset: ptr(ev.ArchiveOffset), ArchiveLength: ptr(ev.ArchiveLength),
		ArchivedAt: ev.ArchivedAt, ExpungedAt: ev.ExpungedAt,
		Errors: "[]",
	}
	if ev.Payload != nil {
		arg.Payload = new(string(ev.Payload))
	}
	if ev.Metadata != nil {
		b, err := json.Marshal(ev.Metadata)
		if err != nil {
			return nil, fmt.Errorf("insert event %s/%s: metadata: %w", ev.Source, ev.EventID, err)
		}
		arg.Metadata = new(string(b))
	}
	if len(ev.Errors) > 0 {
		b, err := json.Marshal(ev.Errors)
		if err != nil {
			return nil, fmt.Errorf("insert event %s/%s: errors: %w", ev.Source, ev.EventID, err)
		}
		arg.Errors = string(b)
	}
	r, err := queries.EventInsertFull(ctx, e.db, arg)
	if err != nil {
		return nil, fmt.Errorf("insert event %s/%s: %w", ev.Source, ev.EventID, err)
	}
	return eventFromRow(r)
}

// EventGetByID returns the event with primary key id; ErrEventNotFound
// (wrapped) when there is none.
func (e executor) EventGetByID(ctx context.Context, id int64) (*inbox.Event, error) {
	r, err := queries.EventGetByID(ctx, e.db, id)
	if err != nil {
		return nil, eventNotFound(err, fmt.Sprintf("get event %d", id))
	}
	return eventFromRow(r)
}

// EventGetByKey returns the event stored for (source, eventID);
// ErrEventNotFound (wrapped) when there is none.
func (e executor) EventGetByKey(ctx context.Context, source, eventID string) (*inbox.Event, error) {
	r, err := queries.EventGetByKey(ctx, e.db, dbsqlc.EventGetByKeyParams{Source: source, EventID: eventID})
	if err != nil {
		return nil, eventNotFound(err, fmt.Sprintf("get event %s/%s", source, eventID))
	}
	return eventFromRow(r)
}

// EventGetByKeyForUpdate is EventGetByKey with the row locked until the
// transaction ends (use it on a *Tx).
func (e executor) EventGetByKeyForUpdate(ctx context.Context, source, eventID string) (*inbox.Event, error) {
	r, err := queries.EventGetByKeyForUpdate(ctx, e.db, dbsqlc.EventGetByKeyForUpdateParams{Source: source, EventID: eventID})
	if err != nil {
		return nil, eventNotFound(err, fmt.Sprintf("lock event %s/%s", source, eventID))
	}
	return eventFromRow(r)
}

// EventClaimParams is one claim of a batch.
type EventClaimParams struct {
	// Now is the processor's clock: rows due at or before it are claimable.
	Now time.Time
	// Limit is the batch size.
	Limit int
	// LockedUntil is the end of the lease.
	LockedUntil time.Time
	// Token identifies this claim; later writes must present it.
	Token string
}

// ClaimedEvent is an event claimed for processing, with what the claim
// learnt about it.
type ClaimedEvent struct {
	*inbox.Event
	// Interrupted reports that the event's last attempt never finished
	// (its processor was killed or timed out): the claim recorded it in
	// the history as lease_expired. Attempts counts it.
	Interrupted bool
	// DueAt is when the event became due (next_attempt_at before the
	// claim), the order the batch is handled in.
	DueAt time.Time
}

// LeaseExpiredError is what a claim records for an attempt that started
// and never finished, with cause lease_expired.
const LeaseExpiredError = "the attempt did not finish before its lease ended: its processor stopped (killed, timed out, or lost the database)"

// EventClaim claims a batch of due events for p.LockedUntil. On a *Store
// the claim commits at once, which is what it must do: it must outlive a
// processor that dies, to make the rows claimable again when the lease
// passes. Events come back oldest due first.
func (e executor) EventClaim(ctx context.Context, p EventClaimParams) ([]ClaimedEvent, error) {
	rows, err := queries.EventClaim(ctx, e.db, dbsqlc.EventClaimParams{
		Now: p.Now, Max: int32(p.Limit), LockedUntil: p.LockedUntil, Token: p.Token,
		InterruptedCause: string(inbox.CauseLeaseExpired), InterruptedError: LeaseExpiredError,
	})
	if err != nil {
		return nil, fmt.Errorf("claim events: %w", err)
	}
	out := make([]ClaimedEvent, len(rows))
	for i, r := range rows {
		ev, err := eventFromRow(r.WebhookEvent)
		if err != nil {
			return nil, fmt.Errorf("claim events: %w", err)
		}
		out[i] = ClaimedEvent{Event: ev, Interrupted: r.Interrupted, DueAt: r.DueAt}
	}
	// UPDATE ... RETURNING has no order; the batch runs oldest due first.
	slices.SortFunc(out, func(a, b ClaimedEvent) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// EventStartAttempt counts the attempt about to run (see the query) and
// returns its number, or ok=false when the claim is no longer this
// token's or its lease has ended.
func (e executor) EventStartAttempt(ctx context.Context, id int64, token string, now time.Time) (int, bool, error) {
	n, err := queries.EventStartAttempt(ctx, e.db, dbsqlc.EventStartAttemptParams{ID: id, Token: token, Now: now})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("start attempt of event %d: %w", id, err)
	}
	return int(n), true, nil
}

// EventMarkProcessedParams marks a claimed event processed.
type EventMarkProcessedParams struct {
	ID      int64
	Token   string
	Now     time.Time
	Outcome inbox.Outcome
}

// EventMarkProcessed sets processed_at and the outcome and ends the claim;
// run it in the handler's transaction, before the handler (see the
// query). ok=false means the event is no longer this claimer's to process.
func (e executor) EventMarkProcessed(ctx context.Context, p EventMarkProcessedParams) (bool, error) {
	n, err := queries.EventMarkProcessed(ctx, e.db, dbsqlc.EventMarkProcessedParams{ID: p.ID, Token: p.Token, Now: p.Now, Outcome: string(p.Outcome)})
	if err != nil {
		return false, fmt.Errorf("mark event %d processed: %w", p.ID, err)
	}
	return n == 1, nil
}

// EventRecordFailureParams is a failed attempt to record.
type EventRecordFailureParams struct {
	ID    int64
	Token string
	Now   time.Time
	// Cause is a stable code (handler_failed, handler_panic, ...).
	Cause inbox.Cause
	// Error is the error's text, stored in the history and last_error.
	Error string
	// NextAttemptAt is when the event is due again (the backoff).
	NextAttemptAt time.Time
}

// EventRecordFailure appends the failed attempt to the event's history and
// schedules the next; run it after the handler's transaction rolled back.
// ok=false means the claim is no longer this token's (nothing written).
func (e executor) EventRecordFailure(ctx context.Context, p EventRecordFailureParams) (bool, error) {
	n, err := queries.EventRecordFailure(ctx, e.db, dbsqlc.EventRecordFailureParams{
		ID: p.ID, Token: p.Token, Now: p.Now, Cause: string(p.Cause), Error: p.Error, NextAttemptAt: p.NextAttemptAt,
	})
	if err != nil {
		return false, fmt.Errorf("record failure of event %d: %w", p.ID, err)
	}
	return n == 1, nil
}

// EventDeadLetterParams moves a claimed event to the dead letters.
type EventDeadLetterParams struct {
	ID    int64
	Token string
	Now   time.Time
	// Cause and Error, when Cause is not empty, are appended to the history
	// as the last attempt's entry (empty when the claim already recorded
	// it, for an attempt that never finished).
	Cause inbox.Cause
	Error string
}

// EventDeadLetter moves the event to webhook_dead_letters and returns the
// dead letter's id, or ok=false when the claim is no longer this token's.
func (e executor) EventDeadLetter(ctx context.Context, p EventDeadLetterParams) (int64, bool, error) {
	id, err := queries.EventDeadLetter(ctx, e.db, dbsqlc.EventDeadLetterParams{ID: p.ID, Token: p.Token, Now: p.Now, Cause: string(p.Cause), Error: p.Error})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("dead-letter event %d: %w", p.ID, err)
	}
	return id, true, nil
}

// EventRelease gives back claimed events that were not started: due at
// now, attempts unchanged. It returns how many were released.
func (e executor) EventRelease(ctx context.Context, ids []int64, token string, now time.Time) (int, error) {
	n, err := queries.EventRelease(ctx, e.db, dbsqlc.EventReleaseParams{IDs: ids, Token: token, Now: now})
	if err != nil {
		return 0, fmt.Errorf("release %d claimed events: %w", len(ids), err)
	}
	return int(n), nil
}

// Backlog is the processor's to-do list.
type Backlog struct {
	// Count is every unprocessed, live event: due, waiting for a retry,
	// or being processed.
	Count int64
	// Due is the part of Count whose next attempt is due at now.
	Due int64
	// OldestDueAt is the earliest next_attempt_at among the due events,
	// nil when none is due.
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

// EventGetBacklog reads the backlog at now (the processor's clock) with an
// index-only scan of the backlog.
func (e executor) EventGetBacklog(ctx context.Context, now time.Time) (Backlog, error) {
	r, err := queries.EventGetBacklog(ctx, e.db, now)
	if err != nil {
		return Backlog{}, fmt.Errorf("read backlog: %w", err)
	}
	return Backlog{Count: r.Count, Due: r.Due, OldestDueAt: anyTime(r.OldestDueAt)}, nil
}

// BacklogStats is the backlog in the detail an operator needs.
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

// EventGetBacklogStats reads the backlog in detail at now.
func (e executor) EventGetBacklogStats(ctx context.Context, now time.Time) (BacklogStats, error) {
	r, err := queries.EventGetBacklogStats(ctx, e.db, now)
	if err != nil {
		return BacklogStats{}, fmt.Errorf("read backlog: %w", err)
	}
	return BacklogStats{
		Backlog:  Backlog{Count: r.Count, Due: r.Due, OldestDueAt: anyTime(r.OldestDueAt)},
		InFlight: r.InFlight, Retrying: r.Retrying, OldestCreatedAt: anyTime(r.OldestCreatedAt),
	}, nil
}

// ReplayFilter selects processed events to replay. The zero value matches
// none: set All, or at least one field.
type ReplayFilter struct {
	// ID selects one event (webhook_events.id).
	ID        int64
	Source    string
	EventType string
	// Outcome selects by how the event ended: handled, or unhandled
	// (events no handler took when they came: replay them once their
	// handler is deployed).
	Outcome inbox.Outcome
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
	return !f.All && f.ID == 0 && f.Source == "" && f.EventType == "" && f.Outcome == "" &&
		f.ProcessedFrom.IsZero() && f.ProcessedTo.IsZero()
}

// params returns the filter as the queries' arguments; zero fields are
// NULL and match anything.
func (f ReplayFilter) params() dbsqlc.EventCountReplayParams {
	return dbsqlc.EventCountReplayParams{
		ID: ptr(f.ID), Source: ptr(f.Source), EventType: ptr(f.EventType), Outcome: ptr(string(f.Outcome)),
		ProcessedFrom: timePtr(f.ProcessedFrom), ProcessedTo: timePtr(f.ProcessedTo),
	}
}

// ReplayOptions tunes EventReplay.
type ReplayOptions struct {
	// Now is when the events become due again (use PGNow).
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
	// Matched only if some changed between the selection and their chunk.
	Replayed int
	// SkippedArchived is the events the filter also matched whose bodies
	// are archived in S3: a replay leaves them alone.
	SkippedArchived int
}

// EventReplay sends the processed events matching f through the processor
// again: each is made unprocessed and due at opts.Now, with its attempts,
// error history, last error, outcome and processed_at reset, as a requeue
// resets a dead letter. Only events whose body is in Postgres are replayed;
// SkippedArchived counts the others. The ids are selected once and reset in
// chunks, each re-checked, so every event is replayed at most once and
// processors start on the first chunk at once.
func (e executor) EventReplay(ctx context.Context, f ReplayFilter, opts ReplayOptions) (ReplayResult, error) {
	var res ReplayResult
	if f.empty() {
		return res, ErrEmptyReplayFilter
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = 1000
	}
	arg := f.params()
	counts, err := queries.EventCountReplay(ctx, e.db, arg)
	if err != nil {
		return res, fmt.Errorf("replay: count events: %w", err)
	}
	res.SkippedArchived = int(counts.Archived)
	if opts.DryRun {
		res.Matched = int(counts.Replayable)
		return res, nil
	}
	ids, err := queries.EventListReplayableIDs(ctx, e.db, dbsqlc.EventListReplayableIDsParams(arg))
	if err != nil {
		return res, fmt.Errorf("replay: select events: %w", err)
	}
	res.Matched = len(ids)
	for len(ids) > 0 {
		chunk := ids[:min(opts.ChunkSize, len(ids))]
		ids = ids[len(chunk):]
		n, err := queries.EventReplay(ctx, e.db, dbsqlc.EventReplayParams{Now: opts.Now, IDs: chunk})
		if err != nil {
			return res, fmt.Errorf("replay: %d of %d events reset before: %w", res.Replayed, res.Matched, err)
		}
		res.Replayed += int(n)
		if opts.Progress != nil {
			opts.Progress(res.Replayed, res.Matched)
		}
	}
	return res, nil
}

// EventCountArchivable returns how many events an archive run with this
// cutoff would archive now.
func (e executor) EventCountArchivable(ctx context.Context, processedBefore time.Time) (int64, error) {
	n, err := queries.EventCountArchivable(ctx, e.db, processedBefore)
	if err != nil {
		return 0, fmt.Errorf("count archivable events: %w", err)
	}
	return n, nil
}

// ArchiveProgress is the processed events whose body is still in Postgres.
type ArchiveProgress struct {
	// Waiting is all of them; Due the part processed before the cutoff
	// (what a run would archive now); OldestProcessedAt the earliest.
	Waiting           int64
	Due               int64
	OldestProcessedAt *time.Time
}

// EventGetArchiveProgress reads what waits for the archiver; cutoff is now
// minus its minimum age.
func (e executor) EventGetArchiveProgress(ctx context.Context, cutoff time.Time) (ArchiveProgress, error) {
	r, err := queries.EventGetArchiveProgress(ctx, e.db, cutoff)
	if err != nil {
		return ArchiveProgress{}, fmt.Errorf("read archive progress: %w", err)
	}
	return ArchiveProgress{Waiting: r.Waiting, Due: r.Due, OldestProcessedAt: anyTime(r.OldestProcessedAt)}, nil
}

// EventArchiveParams selects an archive batch.
type EventArchiveParams struct {
	// ProcessedBefore: only events processed before this instant.
	ProcessedBefore time.Time
	// Limit is the most events in the batch.
	Limit int
	// MaxBytes bounds the batch's total body size (so that a batch of
	// large bodies fits in memory); the first event is always taken, so a
	// body larger than MaxBytes makes a batch of its own. 0: no bound.
	MaxBytes int64
}

// ArchiveCandidates is the next archive batch: enough to name its object
// before reading any body.
type ArchiveCandidates struct {
	Source string
	// IDs are the events, oldest processed first.
	IDs []int64
	// FirstCreatedAt is the earliest created_at of the events.
	FirstCreatedAt time.Time
}

// EventListArchiveCandidates chooses the next batch of processed, not yet
// archived events, without keeping them: EventLockForArchive locks them.
// No event left gives no IDs. Choosing first and locking later lets the
// caller record the batch's object between the two with no transaction
// open, so a batch never needs two connections at once.
func (e executor) EventListArchiveCandidates(ctx context.Context, p EventArchiveParams) (ArchiveCandidates, error) {
	var c ArchiveCandidates
	if p.Limit <= 0 {
		return c, fmt.Errorf("choose archive batch: limit %d", p.Limit)
	}
	rows, err := queries.EventListArchiveCandidates(ctx, e.db, dbsqlc.EventListArchiveCandidatesParams{ProcessedBefore: p.ProcessedBefore, Max: int32(p.Limit)})
	if err != nil {
		return c, fmt.Errorf("choose archive batch: %w", err)
	}
	var total int64
	for _, r := range rows {
		// The batch ends at the first event past the byte budget, so it
		// stays the oldest events in order, and the cut is deterministic:
		// a re-run after a crash chooses the same batch.
		if p.MaxBytes > 0 && len(c.IDs) > 0 && total+int64(r.BodySize) > p.MaxBytes {
			break
		}
		if len(c.IDs) == 0 || r.CreatedAt.Before(c.FirstCreatedAt) {
			c.FirstCreatedAt = r.CreatedAt
		}
		c.Source = r.Source
		c.IDs = append(c.IDs, r.ID)
		total += int64(r.BodySize)
	}
	return c, nil
}

// EventLockForArchive locks the events ids that are still archivable and
// free, for the transaction it runs in, and reads them, oldest processed
// first. Fewer events than ids means the batch changed since it was
// chosen.
func (e executor) EventLockForArchive(ctx context.Context, ids []int64) ([]*inbox.Event, error) {
	rows, err := queries.EventLockForArchive(ctx, e.db, ids)
	if err != nil {
		return nil, fmt.Errorf("lock archive batch: %w", err)
	}
	return eventsFromRows(rows)
}

// ArchiveLocation is where one event's bytes are in an object.
type ArchiveLocation struct {
	EventPK int64 // webhook_events.id
	Offset  int64
	Length  int64
}

// EventMarkArchived points the events at the object key and clears their
// payload and body. It fails, changing nothing once rolled back, unless
// every location is an event still unarchived.
func (e executor) EventMarkArchived(ctx context.Context, key string, locs []ArchiveLocation) error {
	arg := dbsqlc.EventMarkArchivedParams{Key: key, IDs: make([]int64, len(locs)), Offsets: make([]int64, len(locs)), Lengths: make([]int64, len(locs))}
	for i, l := range locs {
		arg.IDs[i], arg.Offsets[i], arg.Lengths[i] = l.EventPK, l.Offset, l.Length
	}
	n, err := queries.EventMarkArchived(ctx, e.db, arg)
	if err != nil {
		return fmt.Errorf("mark events archived in %s: %w", key, err)
	}
	if n != int64(len(locs)) {
		return fmt.Errorf("mark events archived in %s: %d of %d events updated", key, n, len(locs))
	}
	return nil
}

// EventExpunge erases the event's payload and body, keeping the row with
// expunged_at set; an unprocessed event leaves the drain (outcome
// expunged).
func (e executor) EventExpunge(ctx context.Context, id int64) error {
	if err := queries.EventExpunge(ctx, e.db, id); err != nil {
		return fmt.Errorf("expunge event %d: %w", id, err)
	}
	return nil
}
