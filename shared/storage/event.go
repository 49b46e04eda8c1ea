package storage

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
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
		Attempts: int(r.Attempts), FailedAttempts: int(r.FailedAttempts), Solo: r.Solo, LastAttemptAt: r.LastAttemptAt,
		NextAttemptAt: r.NextAttemptAt,
		LastError:     deref(r.LastError), Outcome: inbox.Outcome(deref(r.Outcome)), ProcessedAt: r.ProcessedAt, DeadAt: r.DeadAt,
		ArchiveKey: deref(r.ArchiveKey), ArchiveOffset: deref(r.ArchiveOffset), ArchiveLength: deref(r.ArchiveLength),
		ArchivedAt: r.ArchivedAt, ExpungedAt: r.ExpungedAt, BodyExpiredAt: r.BodyExpiredAt, HeldBy: deref(r.HeldBy), HeldDueAt: r.HeldDueAt,
	}
	if r.Payload != nil {
		e.Payload = json.RawMessage(r.Payload)
	}
	if err := decodeJSON(r.Metadata, &e.Metadata); err != nil {
		return nil, fmt.Errorf("event %d: metadata: %w", r.ID, err)
	}
	return e, nil
}

// claimedEventFromRow is eventFromRow for a row read with the claim that
// holds it, if any.
func claimedEventFromRow(r dbsqlc.WebhookEvent, claimedBy string, claimedUntil *time.Time) (*inbox.Event, error) {
	e, err := eventFromRow(r)
	if err != nil {
		return nil, err
	}
	e.ClaimedBy, e.ClaimedUntil = claimedBy, claimedUntil
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
	// GuardBody stores the body at most once for the source
	// (source.Source.GuardBody): a body already stored under another id
	// is not inserted, and the result is a SuspectedReplay.
	GuardBody bool
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
	// SuspectedReplay is set (with GuardBody) when nothing was inserted
	// because the source has this body stored under another event id: ID,
	// StoredEventID and StoredType are that event's, StoredSHA256 its
	// (equal) hash.
	SuspectedReplay bool
	StoredEventID   string
	StoredType      string
}

// Mismatch reports a duplicate whose body differs from the stored one.
func (r EventInsertResult) Mismatch() bool {
	return !r.Inserted && r.StoredSHA256 != nil && string(r.StoredSHA256) != string(r.BodySHA256[:])
}

// EventInsert stores a delivery unless (source, event id) exists. When it
// returns nil on a *Store the event is committed; any error means it may
// not be, and the sender must be told to retry.
func (e executor) EventInsert(ctx context.Context, p EventInsertParams) (EventInsertResult, error) {
	res := EventInsertResult{BodySHA256: sha256.Sum256(p.Body)}
	arg := dbsqlc.EventInsertParams{
		Source: p.Source, EventID: p.EventID, EventType: p.EventType, Body: p.Body,
		BodySHA256: res.BodySHA256[:], BodySize: int32(len(p.Body)), SourceKind: p.SourceKind, BodyGuard: p.GuardBody,
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
			switch {
			case err == nil:
				res.ID, res.StoredSHA256 = h.ID, h.BodySHA256
				return res, nil
			case errors.Is(err, pgx.ErrNoRows) && p.GuardBody:
				// No event has this id: the conflict was the body, stored
				// under another id (webhook_events_body_guard_key).
				return e.suspectedReplay(ctx, p, res)
			default:
				return res, fmt.Errorf("read stored event %s/%s: %w", p.Source, p.EventID, err)
			}
		case arg.Payload != nil && isJSONBRefusal(err):
			arg.Payload = nil // store the raw body alone
		default:
			return res, fmt.Errorf("insert event %s/%s: %w", p.Source, p.EventID, err)
		}
	}
}

// suspectedReplay completes the result of an insert that met a stored body
// of a guarded source under another id: the stored event, read with a new
// snapshot (the conflict waited for its commit).
func (e executor) suspectedReplay(ctx context.Context, p EventInsertParams, res EventInsertResult) (EventInsertResult, error) {
	row, err := queries.EventGetByBodyHash(ctx, e.db, dbsqlc.EventGetByBodyHashParams{Source: p.Source, BodySHA256: res.BodySHA256[:]})
	if err != nil {
		return res, fmt.Errorf("insert event %s/%s: no event has its id, none its body: %w", p.Source, p.EventID, err)
	}
	res.ID, res.SuspectedReplay, res.StoredEventID, res.StoredType = row.ID, true, row.EventID, row.EventType
	res.StoredSHA256 = res.BodySHA256[:]
	return res, nil
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
		CreatedAt: timePtr(ev.CreatedAt), Attempts: int32(ev.Attempts), FailedAttempts: int32(ev.FailedAttempts), Solo: ev.Solo,
		LastAttemptAt: ev.LastAttemptAt, NextAttemptAt: timePtr(ev.NextAttemptAt),
		LastError: ptr(ev.LastError), Outcome: ptr(string(ev.Outcome)),
		ProcessedAt: ev.ProcessedAt, DeadAt: ev.DeadAt,
		ArchiveKey: ptr(ev.ArchiveKey), ArchiveOffset: ptr(ev.ArchiveOffset), ArchiveLength: ptr(ev.ArchiveLength),
		ArchivedAt: ev.ArchivedAt, ExpungedAt: ev.ExpungedAt,
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
	return claimedEventFromRow(r.WebhookEvent, r.ClaimedBy, r.ClaimedUntil)
}

// EventGetByKey returns the event stored for (source, eventID);
// ErrEventNotFound (wrapped) when there is none.
func (e executor) EventGetByKey(ctx context.Context, source, eventID string) (*inbox.Event, error) {
	r, err := queries.EventGetByKey(ctx, e.db, dbsqlc.EventGetByKeyParams{Source: source, EventID: eventID})
	if err != nil {
		return nil, eventNotFound(err, fmt.Sprintf("get event %s/%s", source, eventID))
	}
	return claimedEventFromRow(r.WebhookEvent, r.ClaimedBy, r.ClaimedUntil)
}

// EventListByEventID returns the events whose sender's id is eventID, of
// any source, oldest first, at most limit: finding an event when its
// source is not known (ids of different senders may collide).
func (e executor) EventListByEventID(ctx context.Context, eventID string, limit int) ([]*inbox.Event, error) {
	rows, err := queries.EventListByEventID(ctx, e.db, dbsqlc.EventListByEventIDParams{EventID: eventID, Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("find events %q: %w", eventID, err)
	}
	return eventsFromRows(rows)
}

// EventSearch is one chunk of a search by content: the window, source and
// type to walk, the containment wanted, where to start and how many rows
// to read.
type EventSearch struct {
	// CreatedFrom (inclusive) and CreatedTo (exclusive) bound the receipt
	// time; both are required.
	CreatedFrom, CreatedTo time.Time
	Source, EventType      string
	// Match is JSON the payload must contain, Metadata JSON the metadata
	// must contain (jsonb @>); "" for either matches anything.
	Match, Metadata string
	// BeforeID: only events with a smaller id.
	BeforeID int64
	// Chunk is how many events to read.
	Chunk int
}

// EventSearchResult is what one chunk found.
type EventSearchResult struct {
	// Scanned is how many events the chunk read: fewer than asked means
	// the window holds no more below BeforeID.
	Scanned int
	// LowestID and LowestCreatedAt are the oldest event read (0 and
	// CreatedFrom when none was).
	LowestID        int64
	LowestCreatedAt time.Time
	// Hits are the ids of the events that matched, newest first.
	Hits []int64
}

// EventSearchChunk reads one chunk of a search by content (s.Chunk events
// newest first, whatever matches), planned with its window (planned).
func (e executor) EventSearchChunk(ctx context.Context, s EventSearch) (EventSearchResult, error) {
	r, err := queries.EventSearchChunk(ctx, planned{e.db}, dbsqlc.EventSearchChunkParams{
		CreatedFrom: s.CreatedFrom, CreatedTo: s.CreatedTo, BeforeID: s.BeforeID,
		Source: ptr(s.Source), EventType: ptr(s.EventType), Chunk: int32(s.Chunk),
		Match: ptr(s.Match), Metadata: ptr(s.Metadata),
	})
	if err != nil {
		return EventSearchResult{}, fmt.Errorf("search events below id %d: %w", s.BeforeID, err)
	}
	return EventSearchResult{Scanned: int(r.Scanned), LowestID: r.LowestID, LowestCreatedAt: r.LowestCreatedAt, Hits: r.Hits}, nil
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
	// Paused is the part of Count a pause holds (never due).
	Paused int64
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
	return Backlog{Count: r.Count, Due: r.Due, OldestDueAt: anyTime(r.OldestDueAt), Paused: r.Paused}, nil
}

// EventGetNextWake returns when the processor next has work: the earliest
// next attempt of an unprocessed live event, or the end of a claim's lease,
// whichever comes first; nil when nothing waits. A processor that stops
// arms a wake-up at that time (shared/wake), so that nothing has to poll
// for retries.
func (e executor) EventGetNextWake(ctx context.Context) (*time.Time, error) {
	v, err := queries.EventGetNextWake(ctx, e.db)
	if err != nil {
		return nil, fmt.Errorf("read the next wake-up: %w", err)
	}
	return anyTime(v), nil
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
		Backlog:  Backlog{Count: r.Count, Due: r.Due, OldestDueAt: anyTime(r.OldestDueAt), Paused: r.Paused},
		InFlight: r.InFlight, Retrying: r.Retrying, OldestCreatedAt: anyTime(r.OldestCreatedAt),
	}, nil
}

// UnhandledCount is the events of one source, kind and type that were
// processed without a handler (outcome unhandled).
type UnhandledCount struct {
	Source, SourceKind, EventType string
	Count                         int64
}

// EventCountUnhandledByRoute counts the unhandled, unexpunged events per
// source, kind and type.
func (e executor) EventCountUnhandledByRoute(ctx context.Context) ([]UnhandledCount, error) {
	rows, err := queries.EventCountUnhandledByRoute(ctx, e.db)
	if err != nil {
		return nil, fmt.Errorf("count unhandled events: %w", err)
	}
	out := make([]UnhandledCount, len(rows))
	for i, r := range rows {
		out[i] = UnhandledCount{Source: r.Source, SourceKind: r.SourceKind, EventType: r.EventType, Count: r.Count}
	}
	return out, nil
}

// ReplayFilter selects processed events to replay. The zero value matches
// none: set All, or at least one field.
type ReplayFilter struct {
	// ID selects one event (webhook_events.id).
	ID        int64  `json:"id,omitzero"`
	Source    string `json:"source,omitzero"`
	EventType string `json:"event_type,omitzero"`
	// Outcome selects by how the event ended: handled, or unhandled
	// (events no handler took when they came: replay them once their
	// handler is deployed).
	Outcome inbox.Outcome `json:"outcome,omitzero"`
	// ProcessedFrom and ProcessedTo bound processed_at: From inclusive, To
	// exclusive (the window a faulty handler was live, say).
	ProcessedFrom time.Time `json:"processed_from,omitzero"`
	ProcessedTo   time.Time `json:"processed_to,omitzero"`
	// IDs selects events by their ids.
	IDs []int64 `json:"ids,omitempty"`
	// Cause is the last attempt's cause (webhook_attempts.cause); ErrorText
	// a case-insensitive substring of last_error.
	Cause     string `json:"cause,omitzero"`
	ErrorText string `json:"error_text,omitzero"`
	// ReceivedFrom and ReceivedTo bound created_at: From inclusive, To
	// exclusive.
	ReceivedFrom time.Time `json:"received_from,omitzero"`
	ReceivedTo   time.Time `json:"received_to,omitzero"`
	// All matches every replayable event; it must be asked for
	// explicitly.
	All bool `json:"all,omitzero"`
}

// ErrEmptyReplayFilter is returned for a ReplayFilter that selects nothing.
var ErrEmptyReplayFilter = errors.New("replay filter is empty: give an id, a source, a type, an outcome, a time window, or All")

func (f ReplayFilter) empty() bool {
	return !f.All && f.ID == 0 && f.Source == "" && f.EventType == "" && f.Outcome == "" &&
		f.ProcessedFrom.IsZero() && f.ProcessedTo.IsZero() &&
		f.IDs == nil && f.Cause == "" && f.ErrorText == "" && f.ReceivedFrom.IsZero() && f.ReceivedTo.IsZero()
}

// params returns the filter as the queries' arguments; zero fields are
// NULL and match anything.
func (f ReplayFilter) params() dbsqlc.EventCountReplayParams {
	return dbsqlc.EventCountReplayParams{
		ID: ptr(f.ID), Source: ptr(f.Source), EventType: ptr(f.EventType), Outcome: ptr(string(f.Outcome)),
		ProcessedFrom: timePtr(f.ProcessedFrom), ProcessedTo: timePtr(f.ProcessedTo),
		IDs: f.IDs, Cause: ptr(f.Cause), ErrorText: ptr(f.ErrorText),
		ReceivedFrom: timePtr(f.ReceivedFrom), ReceivedTo: timePtr(f.ReceivedTo),
	}
}

// ReplayOptions tunes EventReplay as BulkOptions tune the other actions
// done in chunks: By is required unless DryRun, since every replay is
// recorded (webhook_operator_actions), its events with it; Continue
// resumes a replay with the events its first call selected, after the
// last one reset.
type ReplayOptions = BulkOptions

// ReplayCursor is where a replay done in several calls stands: its record,
// the last event reset, and the last one the first call selected.
type ReplayCursor struct {
	ActionID int64 `json:"action_id"`
	After    int64 `json:"after"`
	Through  int64 `json:"through"`
}

// ErrNoActor is returned for an operator action that does not say who
// performs it.
var ErrNoActor = errors.New("an operator action must say who performs it (inbox.Actor.Name)")

// ReplayResult is what a replay matched and did.
type ReplayResult struct {
	// Matched is the replayable events the filter selected (what a dry
	// run reports, and what the real run goes through, in one call or,
	// with Max, in several); 0 for a continuation, whose selection is the
	// first call's.
	Matched int
	// Replayed is how many were reset (0 for a dry run). It is below
	// Matched only if some changed between the selection and their chunk.
	Replayed int
	// Archived is the part of Matched whose bodies are archived in S3:
	// the processor reads each back from its archive object (a ranged
	// read, hash verified) to run its handler.
	Archived int
	// ActionID is the replay's record (webhook_operator_actions); 0 for a
	// dry run.
	ActionID int64
	// Next, when set, is where the next call continues a replay that Max
	// cut short (ReplayOptions.Continue); nil when it is done.
	Next *ReplayCursor
}

// EventReplay sends the processed events matching f through the processor
// again: each is made unprocessed and due at opts.Now, a new run with its
// failures, last error, outcome and processed_at reset, as a requeue
// starts a dead letter's. Its attempts and their history stay: the
// replay's attempts add to them. Archived events are replayed too (their
// bodies come back from S3); expunged and dead ones are not. The ids are
// selected once and reset in chunks, each re-checked, so every event is
// replayed at most once and processors start on the first chunk at once.
// The replay is recorded (who, when, the filter) before the first chunk,
// and each chunk links its events to the record and adds them to its
// count in the statement that resets them.
func (e executor) EventReplay(ctx context.Context, f ReplayFilter, opts ReplayOptions) (ReplayResult, error) {
	var res ReplayResult
	if f.empty() {
		return res, ErrEmptyReplayFilter
	}
	if opts.chunk <= 0 {
		opts.chunk = 1000
	}
	arg := f.params()
	list := dbsqlc.EventListReplayableIDsParams{
		ID: arg.ID, Source: arg.Source, EventType: arg.EventType, Outcome: arg.Outcome,
		ProcessedFrom: arg.ProcessedFrom, ProcessedTo: arg.ProcessedTo,
		IDs: arg.IDs, Cause: arg.Cause, ErrorText: arg.ErrorText, ReceivedFrom: arg.ReceivedFrom, ReceivedTo: arg.ReceivedTo,
	}
	if opts.Max > 0 {
		list.Max = new(int32(opts.Max))
	}
	if c := opts.Continue; c != nil {
		if opts.DryRun || c.ActionID <= 0 || c.Through <= 0 {
			return res, errors.New("replay: a continuation needs the cursor of an earlier call, and is no dry run")
		}
		if opts.By.Name == "" {
			return res, ErrNoActor
		}
		res.ActionID = c.ActionID
		list.AfterID, list.ThroughID = &c.After, &c.Through
	} else {
		counts, err := queries.EventCountReplay(ctx, e.db, arg)
		if err != nil {
			return res, fmt.Errorf("replay: count events: %w", err)
		}
		res.Archived = int(counts.Archived)
		if opts.DryRun {
			res.Matched = int(counts.Replayable)
			return res, nil
		}
		if opts.By.Name == "" {
			return res, ErrNoActor
		}
		if opts.Expect != nil && int(counts.Replayable) != *opts.Expect {
			res.Matched = int(counts.Replayable)
			return res, ErrCountChanged
		}
		if opts.Max > 0 {
			// The whole selection's size and bound: later calls take the
			// rest of it, nothing beyond.
			res.Matched = int(counts.Replayable)
			list.ThroughID = &counts.LastID
		}
	}
	ids, err := queries.EventListReplayableIDs(ctx, e.db, list)
	if err != nil {
		return res, fmt.Errorf("replay: select events: %w", err)
	}
	if opts.Max <= 0 && opts.Continue == nil {
		res.Matched = len(ids)
	}
	if opts.Continue == nil {
		if res.ActionID, err = e.operatorActionStart(ctx, inbox.ActionReplay, opts.By, f); err != nil {
			return res, fmt.Errorf("replay: %w", err)
		}
	}
	if opts.Max > 0 && len(ids) == opts.Max && ids[len(ids)-1] < *list.ThroughID {
		res.Next = &ReplayCursor{ActionID: res.ActionID, After: ids[len(ids)-1], Through: *list.ThroughID}
	}
	for len(ids) > 0 {
		chunk := ids[:min(opts.chunk, len(ids))]
		ids = ids[len(chunk):]
		n, err := queries.EventReplay(ctx, e.db, dbsqlc.EventReplayParams{Now: opts.Now, IDs: chunk, ActionID: res.ActionID})
		if err != nil {
			return res, fmt.Errorf("replay: %d of %d events reset before: %w", res.Replayed, res.Matched, err)
		}
		res.Replayed += int(n)
	}
	return res, nil
}

// DiscardFilter selects unprocessed live events (due now or later,
// claimed or not) to discard. The zero value matches none: set All, or at
// least one field. Every field set must match.
type DiscardFilter struct {
	// ID selects one event; IDs several.
	ID        int64   `json:"id,omitzero"`
	IDs       []int64 `json:"ids,omitempty"`
	Source    string  `json:"source,omitzero"`
	EventType string  `json:"event_type,omitzero"`
	// Cause is the last attempt's cause (a retrying event's);
	// ErrorText a case-insensitive substring of last_error.
	Cause     string `json:"cause,omitzero"`
	ErrorText string `json:"error_text,omitzero"`
	// ReceivedFrom and ReceivedTo bound created_at: From inclusive, To
	// exclusive.
	ReceivedFrom time.Time `json:"received_from,omitzero"`
	ReceivedTo   time.Time `json:"received_to,omitzero"`
	// All matches every unprocessed event; it must be asked for
	// explicitly.
	All bool `json:"all,omitzero"`
}

// ErrEmptyDiscardFilter is returned for a DiscardFilter that selects
// nothing.
var ErrEmptyDiscardFilter = errors.New("discard filter is empty: give an id, a source, a type, a cause, an error text, a time window, or All")

func (f DiscardFilter) empty() bool {
	return !f.All && f.ID == 0 && f.IDs == nil && f.Source == "" && f.EventType == "" && f.Cause == "" &&
		f.ErrorText == "" && f.ReceivedFrom.IsZero() && f.ReceivedTo.IsZero()
}

// EventDiscard finishes the unprocessed live events matching f without
// running them (outcome discarded), in chunks of opts.Max at most per
// call, each committed with its record's count (see bulk). Each chunk's
// statement takes the rows' locks, so it waits for a processor's
// transaction that holds one of them and leaves the event alone if that
// transaction processed it; what it discards, no processor runs after.
func (e executor) EventDiscard(ctx context.Context, f DiscardFilter, opts BulkOptions) (BulkResult, error) {
	if f.empty() {
		return BulkResult{}, ErrEmptyDiscardFilter
	}
	p := dbsqlc.EventCountDiscardableParams{
		ID: ptr(f.ID), Source: ptr(f.Source), EventType: ptr(f.EventType), IDs: f.IDs,
		ReceivedFrom: timePtr(f.ReceivedFrom), ReceivedTo: timePtr(f.ReceivedTo), ErrorText: ptr(f.ErrorText), Cause: ptr(f.Cause),
	}
	return e.bulk(ctx, inbox.ActionDiscard, f, opts, bulkQueries{
		count: func(ctx context.Context) (int64, int64, error) {
			r, err := queries.EventCountDiscardable(ctx, e.db, p)
			return r.Discardable, r.LastID, err
		},
		list: func(ctx context.Context, after, through *int64, max *int32) ([]int64, error) {
			return queries.EventListDiscardableIDs(ctx, e.db, dbsqlc.EventListDiscardableIDsParams{
				ID: p.ID, Source: p.Source, EventType: p.EventType, IDs: p.IDs, ReceivedFrom: p.ReceivedFrom, ReceivedTo: p.ReceivedTo,
				ErrorText: p.ErrorText, Cause: p.Cause, AfterID: after, ThroughID: through, Max: max,
			})
		},
		apply: func(ctx context.Context, ids []int64, actionID int64) (int64, error) {
			return queries.EventDiscard(ctx, e.db, dbsqlc.EventDiscardParams{Now: opts.Now, IDs: ids, ActionID: actionID})
		},
	})
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

// Redacted replaces, in an expunged event's history, each error text that
// may have quoted its body (webhook_events.last_error, webhook_attempts.error,
// the dead letters' errors and last_error): the record of an error stays,
// its text goes.
const Redacted = "[expunged]"

// EventScrub says what an expunge found in the event's row and erased.
type EventScrub struct {
	Payload, Body, Metadata, LastError bool
}

// EventExpunge erases the event's payload, body, metadata and last error
// text (Redacted), keeping the row with expunged_at set; an unprocessed
// event leaves the drain (outcome expunged). It returns what the row held;
// the caller should hold the row locked (EventGetByKeyForUpdate).
func (e executor) EventExpunge(ctx context.Context, id int64) (EventScrub, error) {
	r, err := queries.EventExpunge(ctx, e.db, dbsqlc.EventExpungeParams{ID: id, Redacted: Redacted})
	if errors.Is(err, pgx.ErrNoRows) {
		return EventScrub{}, fmt.Errorf("expunge event %d: %w", id, ErrEventNotFound)
	}
	if err != nil {
		return EventScrub{}, fmt.Errorf("expunge event %d: %w", id, err)
	}
	return EventScrub{Payload: r.HadPayload, Body: r.HadBody, Metadata: r.HadMetadata, LastError: r.HadLastError}, nil
}

// EventExpireArchived marks the events of the archive object o, which the
// retention pass has just deleted, as expired (clearing any body left in
// their rows and in their dead letters), and returns how many it marked;
// rows already marked are left alone. The caller holds o's manifest row.
func (e executor) EventExpireArchived(ctx context.Context, o ExpirableObject) (int64, error) {
	n, err := queries.EventExpireArchived(ctx, e.db, dbsqlc.EventExpireArchivedParams{Key: o.Key, FirstID: o.FirstID, LastID: o.LastID})
	if err != nil {
		return 0, fmt.Errorf("mark the events of %s expired: %w", o.Key, err)
	}
	return n, nil
}

// EventExpireBodies clears the bodies still in Postgres of at most max
// processed events received before receivedBefore (and their dead
// letters' copies), marking them expired, and returns how many.
func (e executor) EventExpireBodies(ctx context.Context, receivedBefore time.Time, max int) (int64, error) {
	n, err := queries.EventExpireBodies(ctx, e.db, dbsqlc.EventExpireBodiesParams{ReceivedBefore: receivedBefore, Max: int32(max)})
	if err != nil {
		return 0, fmt.Errorf("clear bodies past retention: %w", err)
	}
	return n, nil
}

// EventCountByBucket counts the events stored in each bucket of b, by
// created_at; buckets without events are absent.
func (e executor) EventCountByBucket(ctx context.Context, b Buckets) ([]EventBucket, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	rows, err := queries.EventCountByBucket(ctx, e.db, dbsqlc.EventCountByBucketParams{BucketSeconds: b.Width.Seconds(), Since: b.Since, Until: b.Until})
	if err != nil {
		return nil, fmt.Errorf("count events by time: %w", err)
	}
	out := make([]EventBucket, len(rows))
	for i, r := range rows {
		out[i] = EventBucket{At: r.Bucket, Count: r.Count}
	}
	return out, nil
}

// The processor's queries on webhook_events: claims of events, run in the
// transaction that runs them, and the recording of their attempts. The
// processor (shared/processor) says how they fit together with the claims
// table (claim.go).

// ClaimedEvent is an event a claim locked, as the processor gets it: the
// event without its payload, and its body when the claim's budget held it.
type ClaimedEvent struct {
	*inbox.Event
	// BodyLoaded reports that Body holds the body. When false, the body is
	// still in the row, beyond the claim's body budget (EventListBodies
	// reads it), or, for an event replayed from the archive (ArchivedAt
	// set), in S3.
	BodyLoaded bool
	// HasPayload reports that the row holds the body as JSONB: the body is
	// JSON, and a handler is handed it as the payload too.
	HasPayload bool
}

// Claimed is what a claim took: its events, oldest due first, and the
// pauses in force as its statement saw them, named as the events they
// hold record them (inbox.HoldOf): the claim holds the events they cover
// instead of running them. Empty when nothing was due.
type Claimed struct {
	Events []ClaimedEvent
	Pauses []string
}

// ClaimParams is one claim.
type ClaimParams struct {
	// Now is the processor's clock: events due at or before it are taken.
	Now time.Time
	// Max is how many events the claim takes at most.
	Max int
	// BodyBudget bounds the bytes of bodies the claim reads (see
	// ClaimedEvent.BodyLoaded).
	BodyBudget int64
}

// Due says what a claim would find now.
type Due struct {
	// Solo: an event that must run alone; Batch: one that may run in a
	// batch; Expired: a claim past its lease, to recover.
	Solo, Batch, Expired bool
}

// EventGetDue tells whether a claim would find anything at now, locking
// nothing.
func (e executor) EventGetDue(ctx context.Context, now time.Time) (Due, error) {
	r, err := queries.EventGetDue(ctx, e.db, now)
	if err != nil {
		return Due{}, fmt.Errorf("look for due events: %w", err)
	}
	return Due{Solo: r.Solo, Batch: r.Batch, Expired: r.Expired}, nil
}

// EventClaimBatch locks up to p.Max due events that may run together,
// oldest due first, until the transaction ends: run it on the *Tx that
// runs them (see the query). Events of recorded claims are left out.
func (e executor) EventClaimBatch(ctx context.Context, p ClaimParams) (Claimed, error) {
	rows, err := queries.EventClaimBatch(ctx, e.db, dbsqlc.EventClaimBatchParams{Now: p.Now, Max: int32(p.Max), BodyBudget: p.BodyBudget})
	if err != nil {
		return Claimed{}, fmt.Errorf("claim events: %w", err)
	}
	return claimedFromRows(rows)
}

// EventClaimSolo locks the oldest due event that must run alone, if any,
// as EventClaimBatch does.
func (e executor) EventClaimSolo(ctx context.Context, now time.Time, bodyBudget int64) (Claimed, error) {
	rows, err := queries.EventClaimSolo(ctx, e.db, dbsqlc.EventClaimSoloParams{Now: now, BodyBudget: bodyBudget})
	if err != nil {
		return Claimed{}, fmt.Errorf("claim an event to run alone: %w", err)
	}
	batch := make([]dbsqlc.EventClaimBatchRow, len(rows))
	for i, r := range rows {
		batch[i] = dbsqlc.EventClaimBatchRow(r)
	}
	return claimedFromRows(batch)
}

func claimedFromRows(rows []dbsqlc.EventClaimBatchRow) (Claimed, error) {
	if len(rows) == 0 {
		return Claimed{}, nil
	}
	out := Claimed{Events: make([]ClaimedEvent, len(rows)), Pauses: rows[0].Pauses}
	for i, r := range rows {
		ev := &inbox.Event{
			ID: r.ID, Source: r.Source, SourceKind: r.SourceKind, EventID: r.EventID, Type: r.EventType,
			BodySHA256: r.BodySHA256, BodySize: int(r.BodySize), CreatedAt: r.CreatedAt,
			Attempts: int(r.Attempts), FailedAttempts: int(r.FailedAttempts), NextAttemptAt: r.NextAttemptAt,
			ArchiveKey: deref(r.ArchiveKey), ArchiveOffset: deref(r.ArchiveOffset), ArchiveLength: deref(r.ArchiveLength),
			ArchivedAt: r.ArchivedAt,
		}
		if r.BodyLoaded {
			ev.Body = r.Body
		}
		if err := decodeJSON(r.Metadata, &ev.Metadata); err != nil {
			return Claimed{}, fmt.Errorf("claim events: event %d: metadata: %w", r.ID, err)
		}
		out.Events[i] = ClaimedEvent{Event: ev, BodyLoaded: r.BodyLoaded && r.Body != nil, HasPayload: r.HasPayload}
	}
	return out, nil
}

// EventListBodies reads the bodies of claimed events, by id (a missing id
// has no entry; a body erased meanwhile is nil).
func (e executor) EventListBodies(ctx context.Context, ids []int64) (map[int64][]byte, error) {
	rows, err := queries.EventListBodies(ctx, e.db, ids)
	if err != nil {
		return nil, fmt.Errorf("read %d claimed bodies: %w", len(ids), err)
	}
	out := make(map[int64][]byte, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Body
	}
	return out, nil
}

// EventLockClaimed locks again one event of a claim for its fallback;
// false when it is processed or dead already.
func (e executor) EventLockClaimed(ctx context.Context, id int64) (bool, error) {
	_, err := queries.EventLockClaimed(ctx, e.db, id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("lock claimed event %d: %w", id, err)
	}
	return true, nil
}

// AttemptResult is the outcome of one attempt, for EventFinish.
type AttemptResult struct {
	ID      int64
	Outcome inbox.AttemptOutcome
	// Cause and Error describe a failure ("" otherwise).
	Cause inbox.Cause
	Error string
	// StartedAt and FinishedAt bound the attempt (the processor's clock).
	StartedAt  time.Time
	FinishedAt time.Time
	// NextAttemptAt is when a failed event is due again (unless Dead).
	NextAttemptAt time.Time
	// Dead moves a failed event to the dead letters (EventDeadLetter then
	// copies it, in the same transaction).
	Dead bool
}

// EventFinishParams records the attempts of one transaction's events.
type EventFinishParams struct {
	Processor string
	// BatchSize is how many events the transaction ran.
	BatchSize int
	Results   []AttemptResult
}

// EventFinish records each result on its event and in the attempt history
// (see the query), in the transaction that ran them, and returns how many
// it recorded: fewer than given means some event was no longer to be
// processed, which a claim's row locks rule out.
func (e executor) EventFinish(ctx context.Context, p EventFinishParams) (int, error) {
	n := len(p.Results)
	arg := dbsqlc.EventFinishParams{
		Processor: p.Processor, BatchSize: int32(p.BatchSize),
		IDs: make([]int64, n), Outcomes: make([]string, n), Causes: make([]string, n), Errors: make([]string, n),
		StartedAt: make([]time.Time, n), FinishedAt: make([]time.Time, n), NextAttemptAt: make([]time.Time, n), Dead: make([]bool, n),
	}
	for i, r := range p.Results {
		arg.IDs[i], arg.Outcomes[i], arg.Causes[i], arg.Errors[i] = r.ID, string(r.Outcome), string(r.Cause), r.Error
		arg.StartedAt[i], arg.FinishedAt[i], arg.Dead[i] = r.StartedAt, r.FinishedAt, r.Dead
		arg.NextAttemptAt[i] = r.NextAttemptAt
		if r.NextAttemptAt.IsZero() {
			arg.NextAttemptAt[i] = r.FinishedAt // unused unless failed; never NULL in the array
		}
	}
	rows, err := queries.EventFinish(ctx, e.db, arg)
	if err != nil {
		return 0, fmt.Errorf("record the attempts of %d events: %w", n, err)
	}
	return len(rows), nil
}

// EventDeadLetter copies the events just marked dead (by EventFinish or
// EventRecordInterrupted, in this transaction) into the dead letters and
// returns the dead letters' ids by event.
func (e executor) EventDeadLetter(ctx context.Context, ids []int64) (map[int64]int64, error) {
	rows, err := queries.EventDeadLetter(ctx, e.db, ids)
	if err != nil {
		return nil, fmt.Errorf("dead-letter %d events: %w", len(ids), err)
	}
	out := make(map[int64]int64, len(rows))
	for _, r := range rows {
		out[r.EventPK] = r.ID
	}
	return out, nil
}

// InterruptedAttempt is one event of an expired claim.
type InterruptedAttempt struct {
	ID int64
	// StartedAt is when its claim was made; Processor the claim's;
	// BatchSize how many events the claim held.
	StartedAt time.Time
	Processor string
	BatchSize int
}

// EventRecordInterruptedParams records the attempts of expired claims.
type EventRecordInterruptedParams struct {
	Now         time.Time
	MaxAttempts int
	Cause       inbox.Cause
	Error       string
	Attempts    []InterruptedAttempt
}

// RecordedInterruption is an interrupted attempt as recorded.
type RecordedInterruption struct {
	ID      int64
	Source  string
	EventID string
	Attempt int
	// Dead reports the event moved to the dead letters (EventDeadLetter
	// copies it next, in the same transaction).
	Dead bool
}

// EventRecordInterrupted records the interrupted attempt of each event
// still to be processed (see the query); an event processed meanwhile is
// left out of the result.
func (e executor) EventRecordInterrupted(ctx context.Context, p EventRecordInterruptedParams) ([]RecordedInterruption, error) {
	n := len(p.Attempts)
	arg := dbsqlc.EventRecordInterruptedParams{
		Cause: string(p.Cause), Error: p.Error, Now: p.Now, MaxAttempts: int32(p.MaxAttempts),
		IDs: make([]int64, n), StartedAt: make([]time.Time, n), Processors: make([]string, n), BatchSizes: make([]int32, n),
	}
	for i, a := range p.Attempts {
		arg.IDs[i], arg.StartedAt[i], arg.Processors[i], arg.BatchSizes[i] = a.ID, a.StartedAt, a.Processor, int32(a.BatchSize)
	}
	rows, err := queries.EventRecordInterrupted(ctx, e.db, arg)
	if err != nil {
		return nil, fmt.Errorf("record %d interrupted attempts: %w", n, err)
	}
	out := make([]RecordedInterruption, len(rows))
	for i, r := range rows {
		out[i] = RecordedInterruption{ID: r.ID, Source: r.Source, EventID: r.EventID, Attempt: int(r.Attempts), Dead: r.Dead}
	}
	return out, nil
}

// Hold is one claimed event a pause covers, and the pause that holds it
// (inbox.Pause.Hold).
type Hold struct {
	ID     int64
	HeldBy string
}

// EventHoldSource holds the waiting events of a source in the pause's
// transaction (held by inbox.HoldOf(inbox.PauseSource, source)), skipping
// those a processor's claim holds, and returns how many it held.
func (e executor) EventHoldSource(ctx context.Context, source string) (int, error) {
	n, err := queries.EventHoldSource(ctx, e.db, dbsqlc.EventHoldSourceParams{Source: source, HeldBy: inbox.HoldOf(inbox.PauseSource, source)})
	if err != nil {
		return 0, fmt.Errorf("hold the events of source %s: %w", source, err)
	}
	return int(n), nil
}

// EventHoldClaimed holds claimed events a pause covers, in the claim's
// transaction, without counting an attempt; it returns how many it held.
func (e executor) EventHoldClaimed(ctx context.Context, holds []Hold) (int, error) {
	ids, by := make([]int64, len(holds)), make([]string, len(holds))
	for i, h := range holds {
		ids[i], by[i] = h.ID, h.HeldBy
	}
	n, err := queries.EventHoldClaimed(ctx, e.db, dbsqlc.EventHoldClaimedParams{IDs: ids, HeldBy: by})
	if err != nil {
		return 0, fmt.Errorf("hold %d paused events: %w", len(holds), err)
	}
	return int(n), nil
}

// EventRelease makes the events held by heldBy due again when they were
// due, or at now if that has passed, and returns how many.
func (e executor) EventRelease(ctx context.Context, heldBy string, now time.Time) (int, error) {
	n, err := queries.EventRelease(ctx, e.db, dbsqlc.EventReleaseParams{HeldBy: heldBy, Now: now})
	if err != nil {
		return 0, fmt.Errorf("release the events held by %s: %w", heldBy, err)
	}
	return int(n), nil
}

// HeldCount is what EventCountHeld counts: the events a pause holds, and
// those of its source it would hold now.
type HeldCount struct {
	Held, Waiting int
}

// EventCountHeld counts the events held by heldBy and, when source is
// not "", the waiting events of that source a pause would hold now.
func (e executor) EventCountHeld(ctx context.Context, heldBy, source string) (HeldCount, error) {
	r, err := queries.EventCountHeld(ctx, e.db, dbsqlc.EventCountHeldParams{HeldBy: heldBy, Source: ptr(source)})
	if err != nil {
		return HeldCount{}, fmt.Errorf("count the events held by %s: %w", heldBy, err)
	}
	return HeldCount{Held: int(r.Held), Waiting: int(r.Waiting)}, nil
}
