package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/internal/dbsqlc"
)

// The queries on webhook_dead_letters (queries/webhook_dead_letters.sql).

func deadLetterFromRow(r dbsqlc.WebhookDeadLetter) (*inbox.DeadLetter, error) {
	d := &inbox.DeadLetter{
		ID: r.ID, EventPK: r.EventPK, Source: r.Source, EventID: r.EventID, Type: r.EventType,
		Body: r.Body, Attempts: int(r.Attempts), LastError: deref(r.LastError), DeadAt: r.DeadAt, RequeuedAt: r.RequeuedAt, ResolvedAt: r.ResolvedAt,
	}
	if r.Payload != nil {
		d.Payload = r.Payload
	}
	if err := decodeJSON(r.Errors, &d.Errors); err != nil {
		return nil, fmt.Errorf("dead letter %d: error history: %w", r.ID, err)
	}
	return d, nil
}

func deadLettersFromRows(rows []dbsqlc.WebhookDeadLetter) ([]*inbox.DeadLetter, error) {
	out := make([]*inbox.DeadLetter, len(rows))
	for i, r := range rows {
		d, err := deadLetterFromRow(r)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// DeadLetterFilter selects open dead letters (those neither requeued nor
// resolved yet). The zero value matches none: set All, or at least one
// field. Every field set must match.
type DeadLetterFilter struct {
	// ID selects one dead letter (webhook_dead_letters.id).
	ID int64 `json:"id,omitzero"`
	// Source is the source name; EventType the event type.
	Source    string `json:"source,omitzero"`
	EventType string `json:"event_type,omitzero"`
	// DeadFrom and DeadTo bound dead_at: From inclusive, To exclusive.
	DeadFrom time.Time `json:"dead_from,omitzero"`
	DeadTo   time.Time `json:"dead_to,omitzero"`
	// IDs selects dead letters by their ids (webhook_dead_letters.id).
	IDs []int64 `json:"ids,omitempty"`
	// Cause is the cause of the attempt that killed the event
	// (webhook_attempts.cause of its last attempt).
	Cause string `json:"cause,omitzero"`
	// ErrorText is a case-insensitive substring of the last error.
	ErrorText string `json:"error_text,omitzero"`
	// ReceivedFrom and ReceivedTo bound when the event was received
	// (created_at): From inclusive, To exclusive.
	ReceivedFrom time.Time `json:"received_from,omitzero"`
	ReceivedTo   time.Time `json:"received_to,omitzero"`
	// All matches every open dead letter; it must be asked for explicitly,
	// so a forgotten flag cannot requeue everything.
	All bool `json:"all,omitzero"`
}

// ErrEmptyFilter is returned for a DeadLetterFilter that selects nothing.
var ErrEmptyFilter = errors.New("dead letter filter is empty: give an id, a source, a type, a time window, or All")

func (f DeadLetterFilter) empty() bool {
	return !f.All && f.ID == 0 && f.Source == "" && f.EventType == "" && f.DeadFrom.IsZero() && f.DeadTo.IsZero() &&
		f.IDs == nil && f.Cause == "" && f.ErrorText == "" && f.ReceivedFrom.IsZero() && f.ReceivedTo.IsZero()
}

// params returns the filter as the queries' arguments; zero fields are
// NULL and match anything.
func (f DeadLetterFilter) params() dbsqlc.DeadLetterCountSelectionParams {
	return dbsqlc.DeadLetterCountSelectionParams{
		ID: ptr(f.ID), Source: ptr(f.Source), EventType: ptr(f.EventType),
		DeadFrom: timePtr(f.DeadFrom), DeadTo: timePtr(f.DeadTo),
		IDs: f.IDs, Cause: ptr(f.Cause), ErrorText: ptr(f.ErrorText),
		ReceivedFrom: timePtr(f.ReceivedFrom), ReceivedTo: timePtr(f.ReceivedTo),
	}
}

// DeadLetterList returns the open dead letters matching f, oldest first,
// at most limit of them.
func (e executor) DeadLetterList(ctx context.Context, f DeadLetterFilter, limit int) ([]*inbox.DeadLetter, error) {
	if f.empty() {
		return nil, ErrEmptyFilter
	}
	p := f.params()
	rows, err := queries.DeadLetterList(ctx, e.db, dbsqlc.DeadLetterListParams{
		ID: p.ID, Source: p.Source, EventType: p.EventType, DeadFrom: p.DeadFrom, DeadTo: p.DeadTo,
		IDs: p.IDs, Cause: p.Cause, ErrorText: p.ErrorText, ReceivedFrom: p.ReceivedFrom, ReceivedTo: p.ReceivedTo, Max: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return deadLettersFromRows(rows)
}

// DeadLetterListPage returns a page of the open dead letters matching f
// (an empty filter is every one: All is not needed to list), in the order
// they died, after the cursor after (the last id of the previous page; 0
// for the first), at most limit. Keyset paging: pages never repeat or skip
// a dead letter, whatever dies or is requeued in between.
func (e executor) DeadLetterListPage(ctx context.Context, f DeadLetterFilter, after int64, limit int) ([]*inbox.DeadLetter, error) {
	p := f.params()
	rows, err := queries.DeadLetterListPage(ctx, e.db, dbsqlc.DeadLetterListPageParams{
		After: after, ID: p.ID, Source: p.Source, EventType: p.EventType, DeadFrom: p.DeadFrom, DeadTo: p.DeadTo,
		IDs: p.IDs, Cause: p.Cause, ErrorText: p.ErrorText, ReceivedFrom: p.ReceivedFrom, ReceivedTo: p.ReceivedTo, Max: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return deadLettersFromRows(rows)
}

// DeadLetterCountRequeueable returns how many events DeadLetterRequeue
// would send back for f now: the dry run of a requeue.
func (e executor) DeadLetterCountRequeueable(ctx context.Context, f DeadLetterFilter) (int, error) {
	if f.empty() {
		return 0, ErrEmptyFilter
	}
	r, err := queries.DeadLetterCountSelection(ctx, e.db, f.params())
	if err != nil {
		return 0, fmt.Errorf("count dead letters: %w", err)
	}
	return int(r.Events), nil
}

// DeadLetterRequeue sends the open dead letters matching f back to the
// drain, due at opts.Now with their failures reset (the dead letter keeps
// them), in chunks of opts.Max at most per call, each chunk committed with
// its record's count (see bulk). Matched and Done count events.
func (e executor) DeadLetterRequeue(ctx context.Context, f DeadLetterFilter, opts BulkOptions) (BulkResult, error) {
	if f.empty() {
		return BulkResult{}, ErrEmptyFilter
	}
	p := f.params()
	return e.bulk(ctx, inbox.ActionRequeue, f, opts, bulkQueries{
		count: func(ctx context.Context) (int64, int64, error) {
			r, err := queries.DeadLetterCountSelection(ctx, e.db, p)
			return r.Events, r.LastID, err
		},
		list: e.deadLetterOpenIDs(p),
		apply: func(ctx context.Context, ids []int64, actionID int64) (int64, error) {
			return queries.DeadLetterRequeue(ctx, e.db, dbsqlc.DeadLetterRequeueParams{Now: opts.Now, IDs: ids, ActionID: actionID})
		},
	})
}

// deadLetterOpenIDs lists the dead letters a resolve or a requeue takes
// (bulkQueries.list).
func (e executor) deadLetterOpenIDs(p dbsqlc.DeadLetterCountSelectionParams) func(ctx context.Context, after, through *int64, max *int32) ([]int64, error) {
	return func(ctx context.Context, after, through *int64, max *int32) ([]int64, error) {
		return queries.DeadLetterListOpenIDs(ctx, e.db, dbsqlc.DeadLetterListOpenIDsParams{
			ID: p.ID, Source: p.Source, EventType: p.EventType, DeadFrom: p.DeadFrom, DeadTo: p.DeadTo,
			IDs: p.IDs, ErrorText: p.ErrorText, Cause: p.Cause, ReceivedFrom: p.ReceivedFrom, ReceivedTo: p.ReceivedTo,
			AfterID: after, ThroughID: through, Max: max,
		})
	}
}

// DeadLetterCount is the open dead letters of one source and type.
type DeadLetterCount struct {
	Source    string
	EventType string
	Count     int64
	// OldestDeadAt is the earliest dead_at among them.
	OldestDeadAt time.Time
}

// DeadLetterCountByType counts the open dead letters per source and type,
// largest first.
func (e executor) DeadLetterCountByType(ctx context.Context) ([]DeadLetterCount, error) {
	rows, err := queries.DeadLetterCountByType(ctx, e.db)
	if err != nil {
		return nil, fmt.Errorf("count dead letters: %w", err)
	}
	out := make([]DeadLetterCount, len(rows))
	for i, r := range rows {
		out[i] = DeadLetterCount{Source: r.Source, EventType: r.EventType, Count: r.Count, OldestDeadAt: deref(anyTime(r.OldestDeadAt))}
	}
	return out, nil
}

// DeadLetterListByEvent returns every dead letter of one event (requeued
// or not), oldest first: the history of its deaths.
func (e executor) DeadLetterListByEvent(ctx context.Context, eventPK int64) ([]*inbox.DeadLetter, error) {
	rows, err := queries.DeadLetterListByEvent(ctx, e.db, eventPK)
	if err != nil {
		return nil, fmt.Errorf("dead letters of event %d: %w", eventPK, err)
	}
	return deadLettersFromRows(rows)
}

// DeadLetterExpunge erases what one event's dead letters copied of it:
// payload, body, and the error texts of their history (Redacted). It
// returns how many dead letters held anything to erase.
func (e executor) DeadLetterExpunge(ctx context.Context, eventPK int64) (int, error) {
	n, err := queries.DeadLetterExpunge(ctx, e.db, dbsqlc.DeadLetterExpungeParams{EventPK: eventPK, Redacted: Redacted})
	if err != nil {
		return 0, fmt.Errorf("expunge dead letters of event %d: %w", eventPK, err)
	}
	return int(n), nil
}

// DeadLetterStats is the open dead letters (neither requeued nor
// resolved) as a gauge.
type DeadLetterStats struct {
	// Open is how many dead letters wait for an operator.
	Open int64
	// OldestDeadAt is when the oldest of them died; nil when none is open.
	OldestDeadAt *time.Time
}

// OldestAge is how long the oldest open dead letter has waited at now;
// zero when none is open.
func (s DeadLetterStats) OldestAge(now time.Time) time.Duration {
	if s.OldestDeadAt == nil || now.Before(*s.OldestDeadAt) {
		return 0
	}
	return now.Sub(*s.OldestDeadAt)
}

// DeadLetterGetOpenStats counts the open dead letters and finds the oldest,
// with an index-only scan of the open ones (the processor's gauge).
func (e executor) DeadLetterGetOpenStats(ctx context.Context) (DeadLetterStats, error) {
	r, err := queries.DeadLetterGetOpenStats(ctx, e.db)
	if err != nil {
		return DeadLetterStats{}, fmt.Errorf("read open dead letters: %w", err)
	}
	return DeadLetterStats{Open: r.Count, OldestDeadAt: anyTime(r.OldestDeadAt)}, nil
}

// DeadLetterResolve closes the open dead letters matching f without
// running their events again: each dead letter is marked resolved, and its
// event is finished as it stands (outcome resolved), in chunks of
// opts.Max at most per call, each chunk committed with its record's count
// (see bulk). Matched counts events, as a requeue does.
func (e executor) DeadLetterResolve(ctx context.Context, f DeadLetterFilter, opts BulkOptions) (BulkResult, error) {
	if f.empty() {
		return BulkResult{}, ErrEmptyFilter
	}
	p := f.params()
	return e.bulk(ctx, inbox.ActionResolve, f, opts, bulkQueries{
		count: func(ctx context.Context) (int64, int64, error) {
			r, err := queries.DeadLetterCountSelection(ctx, e.db, p)
			return r.Events, r.LastID, err
		},
		list: e.deadLetterOpenIDs(p),
		apply: func(ctx context.Context, ids []int64, actionID int64) (int64, error) {
			return queries.DeadLetterResolve(ctx, e.db, dbsqlc.DeadLetterResolveParams{Now: opts.Now, IDs: ids, ActionID: actionID})
		},
	})
}
