package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// EventList is the one query written by hand, beside the generated ones:
// its state filter is a predicate chosen among constants, which sqlc cannot
// express (a parameter compared in SQL would hide from the planner that the
// unprocessed states fall inside webhook_events_due_idx's predicate). No
// SQL is built from input: every fragment is a constant of this file. Its
// name comment lets the conformance suite see it run like the others.

// EventFilter selects events for EventList. Zero fields match anything.
type EventFilter struct {
	Source    string
	EventType string
	State     inbox.EventState
	// Outcome, when set, keeps the processed events (archived included)
	// that ended so: OutcomeUnhandled lists those no handler took
	// (webhook_events_unhandled_idx, 00012).
	Outcome inbox.Outcome
	// CreatedFrom and CreatedTo bound created_at (the receipt): From
	// inclusive, To exclusive.
	CreatedFrom time.Time
	CreatedTo   time.Time
	// BeforeID pages backwards: only events with a smaller id.
	BeforeID int64
	// IDs, when not nil, keeps only these events: the hits of a search
	// by content (EventSearchChunk), judged here by state.
	IDs []int64
}

// eventStateWhere holds one constant predicate per state; it selects
// exactly the events inbox.Event.State names at now (a test holds the two
// together). The unprocessed states restate webhook_events_due_idx's
// predicate so the planner can use it, and judge the claim that holds an
// event (webhook_claims) at now; they alone compare with now ($7),
// which is passed only to them: every mode refuses an unused parameter.
// "" matches every state.
// eventOutcomeWhere holds one constant predicate per outcome filter; ""
// matches every event.
var eventOutcomeWhere = map[inbox.Outcome]string{
	"":                     "",
	inbox.OutcomeHandled:   ` AND e.outcome = 'handled'`,
	inbox.OutcomeUnhandled: ` AND e.outcome = 'unhandled'`,
}

var eventStateWhere = map[inbox.EventState]string{
	"":                   ``,
	inbox.StatePending:   ` AND e.processed_at IS NULL AND e.dead_at IS NULL AND e.expunged_at IS NULL AND e.held_by IS NULL AND e.failed_attempts = 0` + notRunning,
	inbox.StateRetrying:  ` AND e.processed_at IS NULL AND e.dead_at IS NULL AND e.expunged_at IS NULL AND e.held_by IS NULL AND e.failed_attempts > 0` + notRunning,
	inbox.StatePaused:    ` AND e.processed_at IS NULL AND e.dead_at IS NULL AND e.expunged_at IS NULL AND e.held_by IS NOT NULL` + notRunning,
	inbox.StateInFlight:  ` AND e.processed_at IS NULL AND e.dead_at IS NULL AND e.expunged_at IS NULL AND c.locked_until > $7`,
	inbox.StateProcessed: ` AND e.processed_at IS NOT NULL AND e.archived_at IS NULL AND e.dead_at IS NULL AND e.expunged_at IS NULL`,
	inbox.StateArchived:  ` AND e.archived_at IS NOT NULL AND e.dead_at IS NULL AND e.expunged_at IS NULL`,
	inbox.StateDead:      ` AND e.dead_at IS NOT NULL AND e.expunged_at IS NULL`,
	inbox.StateExpunged:  ` AND e.expunged_at IS NOT NULL`,
}

// idsWhere keeps the events of EventFilter.IDs, by the parameter's
// position (after 6 or 7 others).
var idsWhere = map[int]string{
	6: ` AND e.id = ANY($7::bigint[])`,
	7: ` AND e.id = ANY($8::bigint[])`,
}

// notRunning: no live claim holds the event (c is its claim, if any).
const notRunning = ` AND (c.locked_until IS NULL OR c.locked_until <= $7)`

// eventListSQL reads every column but payload and body (a listing never
// shows them, and they are the row's largest part), and the claim that
// holds the event, if any.
const eventListSQL = `-- name: EventList :many
SELECT e.id, e.provider, e.source_kind, e.event_id, e.event_type, e.body_sha256, e.body_size, e.metadata, e.created_at,
       e.attempts, e.failed_attempts, e.solo, e.last_attempt_at, e.next_attempt_at, c.locked_until, c.processor,
       e.last_error, e.outcome, e.processed_at,
       e.dead_at, e.archive_key, e.archive_offset, e.archive_length, e.archived_at, e.expunged_at, e.held_by, e.held_due_at
  FROM webhook_events e
  LEFT JOIN LATERAL (SELECT processor, locked_until FROM webhook_claims WHERE e.id = ANY(event_ids) LIMIT 1) c ON true
 WHERE ($1::text IS NULL OR e.provider = $1)
   AND ($2::text IS NULL OR e.event_type = $2)
   AND ($3::timestamptz IS NULL OR e.created_at >= $3)
   AND ($4::timestamptz IS NULL OR e.created_at < $4)
   AND ($5::bigint IS NULL OR e.id < $5)`

// eventListOrder chooses how EventList finds a page, newest first. The
// planner walks the primary key down from the newest id, filtering, since
// it assumes the matching rows are spread evenly; for a window bounded on
// both ends it is wrong when the window lies far in the past: the walk
// reads every row received after it (half the table for a day in the
// middle). Ids grow with the receipt time, so the rows after the window
// and in it are about proportional to those spans of time: when more
// were received after the window than in it, the window's rows are read
// from webhook_events_created_at_brin (00010: a bitmap scan of the
// window's block ranges) and sorted instead (ordering by id + 0
// keeps the planner off the primary key). Both give the same rows.
func (e executor) eventListOrder(ctx context.Context, f EventFilter) (string, error) {
	const walk, sort = `
 ORDER BY e.id DESC`, `
 ORDER BY e.id + 0 DESC`
	if f.CreatedFrom.IsZero() || f.CreatedTo.IsZero() {
		return walk, nil
	}
	newest, err := queries.EventGetNewestCreatedAt(ctx, e.db)
	if errors.Is(err, pgx.ErrNoRows) {
		return walk, nil
	}
	if err != nil {
		return "", fmt.Errorf("list events: the newest event: %w", err)
	}
	if newest.Sub(f.CreatedTo) > f.CreatedTo.Sub(f.CreatedFrom) {
		return sort, nil
	}
	return walk, nil
}

// EventList returns the events matching f, their states judged at now,
// newest first, at most limit of them, without their payload and body.
// Page with f.BeforeID set to the last id returned.
func (e executor) EventList(ctx context.Context, f EventFilter, now time.Time, limit int) ([]*inbox.Event, error) {
	stateWhere, ok := eventStateWhere[f.State]
	if !ok {
		return nil, fmt.Errorf("list events: unknown state %q", f.State)
	}
	outcomeWhere, ok := eventOutcomeWhere[f.Outcome]
	if !ok {
		return nil, fmt.Errorf("list events: unknown outcome %q", f.Outcome)
	}
	stateWhere += outcomeWhere
	args := []any{ptr(f.Source), ptr(f.EventType), timePtr(f.CreatedFrom), timePtr(f.CreatedTo), ptr(f.BeforeID), limit}
	if strings.Contains(stateWhere, "$7") {
		args = append(args, now)
	}
	// The ids take the next parameter, $7 or $8: every mode refuses an
	// unused one.
	if f.IDs != nil {
		stateWhere += idsWhere[len(args)]
		args = append(args, f.IDs)
	}
	// A time window is restated without its "IS NULL OR", so that even a
	// generic plan can read it through webhook_events_created_at_brin (00010)
	// instead of walking the ids down to the window.
	var window string
	if !f.CreatedFrom.IsZero() {
		window += ` AND e.created_at >= $3`
	}
	if !f.CreatedTo.IsZero() {
		window += ` AND e.created_at < $4`
	}
	order, err := e.eventListOrder(ctx, f)
	if err != nil {
		return nil, err
	}
	rows, err := e.db.Query(ctx, eventListSQL+stateWhere+window+order+`
 LIMIT $6`, args...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*inbox.Event, error) {
		var ev inbox.Event
		var claimedBy, lastError, outcome, archiveKey, heldBy *string
		var archiveOffset, archiveLength *int64
		var metadata []byte
		err := r.Scan(&ev.ID, &ev.Source, &ev.SourceKind, &ev.EventID, &ev.Type, &ev.BodySHA256, &ev.BodySize, &metadata, &ev.CreatedAt,
			&ev.Attempts, &ev.FailedAttempts, &ev.Solo, &ev.LastAttemptAt, &ev.NextAttemptAt, &ev.ClaimedUntil, &claimedBy,
			&lastError, &outcome, &ev.ProcessedAt,
			&ev.DeadAt, &archiveKey, &archiveOffset, &archiveLength, &ev.ArchivedAt, &ev.ExpungedAt, &heldBy, &ev.HeldDueAt)
		if err != nil {
			return nil, err
		}
		ev.ClaimedBy, ev.LastError, ev.Outcome, ev.ArchiveKey = deref(claimedBy), deref(lastError), inbox.Outcome(deref(outcome)), deref(archiveKey)
		ev.ArchiveOffset, ev.ArchiveLength, ev.HeldBy = deref(archiveOffset), deref(archiveLength), deref(heldBy)
		if err := decodeJSON(metadata, &ev.Metadata); err != nil {
			return nil, fmt.Errorf("event %d: metadata: %w", ev.ID, err)
		}
		return &ev, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}
