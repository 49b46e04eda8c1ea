// Package factory puts rows into any state for tests, through the
// storage package's own queries (River's testfactory): a test says what it
// wants (a processed Stripe event, a dead letter, a rejection an hour old)
// instead of writing SQL that the schema's next change silently breaks.
// Only tests import it.
package factory

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// EventOpts describes the event to store. Zero fields take defaults: a
// source "stripe" of kind "stripe", a unique event id, type "test.event", a
// small JSON body naming the id and type, and the fields State implies.
// Set a field to override what State implies.
type EventOpts struct {
	Source     string
	SourceKind string
	EventID    string
	Type       string
	// Body is the raw body; its hash and size are computed. When it is
	// valid JSON it is also the payload, unless NoPayload.
	Body      []byte
	NoPayload bool
	// BodySHA256 overrides the computed hash (a body tampered with behind
	// the hash's back).
	BodySHA256 []byte
	Metadata   map[string]string

	// State puts the event in that state at Now (default pending).
	State inbox.EventState
	// Now is the clock the state is set against; default time.Now.
	Now time.Time

	CreatedAt     time.Time
	NextAttemptAt time.Time
	// Attempts is how many failed attempts a retrying (default 1) or dead
	// (default 3) event has had, each recorded in its history as the
	// processor records one; a processed event has one handled attempt.
	Attempts  int
	LastError string
	// Cause is the cause of each failed attempt (default handler_failed);
	// DeadError the error of a dead event's last one (default "factory:
	// dead"), which its dead letter keeps as its last error.
	Cause     inbox.Cause
	DeadError string
	Outcome   inbox.Outcome
	// ProcessedAt is when a processed, archived or expunged event's
	// attempt finished (default Now).
	ProcessedAt *time.Time
	// ClaimedUntil and ClaimedBy give an in_flight event its claim (a
	// processor's lease; default Now plus a minute, and a processor of
	// the factory's). A claim past its lease is a processor that died.
	ClaimedUntil  *time.Time
	ClaimedBy     string
	DeadAt        *time.Time
	ArchivedAt    *time.Time
	ArchiveKey    string
	ArchiveOffset int64
	ArchiveLength int64
	ExpungedAt    *time.Time
	// HeldBy is the pause that holds a paused event (default the pause of
	// its source, inbox.HoldOf(inbox.PauseSource, Source)). Only the hold
	// is written, as the processor writes it (EventHoldClaimed): no
	// pause's row.
	HeldBy string
}

var seq atomic.Int64

// Event stores one event as opts describe it and returns the stored row.
// Its processing history is written by the processor's own statements
// (EventFinish, EventDeadLetter, ClaimSet), so a retrying, processed or
// dead event, and a dead event's dead letter, are as the processor leaves
// them.
func Event(ctx context.Context, t testing.TB, exec storage.Executor, opts *EventOpts) *inbox.Event {
	t.Helper()
	if opts == nil {
		opts = &EventOpts{}
	}
	at := now(opts)
	ev := build(opts)
	stored, err := exec.EventInsertFull(ctx, ev)
	if err != nil {
		t.Fatalf("factory: %v", err)
	}
	result := func(outcome inbox.AttemptOutcome) storage.AttemptResult {
		return storage.AttemptResult{ID: stored.ID, Outcome: outcome, StartedAt: at, FinishedAt: at}
	}
	var results []storage.AttemptResult
	switch opts.State {
	case inbox.StateRetrying, inbox.StateDead:
		n := opts.Attempts
		if n == 0 {
			n = map[inbox.EventState]int{inbox.StateRetrying: 1, inbox.StateDead: 3}[opts.State]
		}
		for i := range n {
			r := result(inbox.AttemptFailed)
			r.Cause, r.Error = inbox.CauseHandlerFailed, "factory: failed"
			if opts.Cause != "" {
				r.Cause = opts.Cause
			}
			if opts.LastError != "" {
				r.Error = opts.LastError
			}
			r.NextAttemptAt = ev.NextAttemptAt
			if opts.State == inbox.StateRetrying && opts.NextAttemptAt.IsZero() {
				r.NextAttemptAt = at.Add(time.Minute)
			}
			if opts.State == inbox.StateDead && i == n-1 {
				r.Dead, r.Error = true, "factory: dead"
				if opts.DeadError != "" {
					r.Error = opts.DeadError
				}
				if opts.DeadAt != nil {
					r.FinishedAt = *opts.DeadAt
				}
			}
			results = append(results, r)
		}
	case inbox.StateProcessed, inbox.StateArchived, inbox.StateExpunged:
		r := result(inbox.AttemptHandled)
		if opts.Outcome == inbox.OutcomeUnhandled {
			r.Outcome = inbox.AttemptUnhandled
		}
		if opts.ProcessedAt != nil {
			r.StartedAt, r.FinishedAt = *opts.ProcessedAt, *opts.ProcessedAt
		}
		results = append(results, r)
	case inbox.StateInFlight:
		c := storage.Claim{Processor: opts.ClaimedBy, Token: fmt.Sprintf("factory#%d", seq.Add(1)), EventIDs: []int64{stored.ID},
			ClaimedAt: at, LockedUntil: at.Add(time.Minute)}
		if c.Processor == "" {
			c.Processor = fmt.Sprintf("factory-%d", seq.Add(1))
		}
		if opts.ClaimedUntil != nil {
			c.LockedUntil = *opts.ClaimedUntil
		}
		if err := exec.ClaimSet(ctx, c); err != nil {
			t.Fatalf("factory: %v", err)
		}
	case inbox.StatePaused:
		by := opts.HeldBy
		if by == "" {
			by = inbox.HoldOf(inbox.PauseSource, stored.Source)
		}
		if n, err := exec.EventHoldClaimed(ctx, []storage.Hold{{ID: stored.ID, HeldBy: by}}); err != nil || n != 1 {
			t.Fatalf("factory: hold event %d: %d held, %v", stored.ID, n, err)
		}
	}
	for _, r := range results {
		n, err := exec.EventFinish(ctx, storage.EventFinishParams{Processor: "factory", BatchSize: 1, Results: []storage.AttemptResult{r}})
		if err != nil || n != 1 {
			t.Fatalf("factory: record an attempt of event %d: %d recorded, %v", stored.ID, n, err)
		}
		if r.Dead {
			if ids, err := exec.EventDeadLetter(ctx, []int64{stored.ID}); err != nil || len(ids) != 1 {
				t.Fatalf("factory: dead-letter event %d: %v %v", stored.ID, ids, err)
			}
		}
	}
	if stored, err = exec.EventGetByID(ctx, stored.ID); err != nil {
		t.Fatalf("factory: %v", err)
	}
	return stored
}

// Events stores n events as opts describe them, each with its own event
// id (opts.EventID, when set, is their prefix), oldest first.
func Events(ctx context.Context, t testing.TB, exec storage.Executor, n int, opts *EventOpts) []*inbox.Event {
	t.Helper()
	if opts == nil {
		opts = &EventOpts{}
	}
	out := make([]*inbox.Event, n)
	for i := range out {
		o := *opts
		if opts.EventID != "" {
			o.EventID = fmt.Sprintf("%s%05d", opts.EventID, i+1)
		}
		out[i] = Event(ctx, t, exec, &o)
	}
	return out
}

func now(opts *EventOpts) time.Time {
	if !opts.Now.IsZero() {
		return opts.Now
	}
	return time.Now()
}

// build turns opts into the row to insert.
func build(opts *EventOpts) *inbox.Event {
	at := now(opts)
	ev := &inbox.Event{
		Source: opts.Source, SourceKind: opts.SourceKind, EventID: opts.EventID, Type: opts.Type,
		Body: opts.Body, Metadata: opts.Metadata,
		CreatedAt: opts.CreatedAt, NextAttemptAt: opts.NextAttemptAt,
		ArchivedAt: opts.ArchivedAt, ArchiveKey: opts.ArchiveKey,
		ArchiveOffset: opts.ArchiveOffset, ArchiveLength: opts.ArchiveLength, ExpungedAt: opts.ExpungedAt,
	}
	if ev.Source == "" {
		ev.Source = "stripe"
	}
	if ev.SourceKind == "" && opts.Source == "" {
		ev.SourceKind = "stripe"
	}
	if ev.EventID == "" {
		ev.EventID = fmt.Sprintf("evt_factory_%d_%d", at.UnixNano(), seq.Add(1))
	}
	if ev.Type == "" {
		ev.Type = "test.event"
	}
	if ev.Body == nil {
		ev.Body, _ = json.Marshal(map[string]any{"id": ev.EventID, "type": ev.Type})
	}
	sum := sha256.Sum256(ev.Body)
	ev.BodySHA256, ev.BodySize = sum[:], len(ev.Body)
	if opts.BodySHA256 != nil {
		ev.BodySHA256 = opts.BodySHA256
	}
	if !opts.NoPayload && json.Valid(ev.Body) {
		ev.Payload = json.RawMessage(ev.Body)
	}
	if ev.NextAttemptAt.IsZero() {
		// Due at once on the factory's clock, whatever the server's says.
		ev.NextAttemptAt = at
	}

	// What the state implies of the row itself, where the caller said
	// nothing; Event records the processing.
	switch opts.State {
	case "", inbox.StatePending, inbox.StateRetrying, inbox.StateInFlight, inbox.StateProcessed, inbox.StateDead, inbox.StatePaused:
	case inbox.StateArchived:
		if ev.ArchivedAt == nil {
			ev.ArchivedAt = new(at)
		}
		if ev.ArchiveKey == "" {
			ev.ArchiveKey = "factory/" + ev.Source + "/" + ev.EventID + ".jsonl.gz"
		}
		if ev.ArchiveLength == 0 {
			ev.ArchiveLength = int64(ev.BodySize) + 1
		}
		ev.Body, ev.Payload = nil, nil
	case inbox.StateExpunged:
		if ev.ExpungedAt == nil {
			ev.ExpungedAt = new(at)
		}
		ev.Body, ev.Payload = nil, nil
	default:
		panic("factory: unknown state " + string(opts.State))
	}
	return ev
}

// RejectionOpts describes a refused request to record.
type RejectionOpts struct {
	Source  string
	Cause   inbox.Cause
	Message string
	// ReceivedAt is when it was refused; default the server's now.
	ReceivedAt time.Time
	Suppressed int64
}

// Rejection records a refusal in the ring buffer.
func Rejection(ctx context.Context, t testing.TB, exec storage.Executor, opts *RejectionOpts) {
	t.Helper()
	r := inbox.Rejection{Source: opts.Source, Cause: opts.Cause, Message: opts.Message, ReceivedAt: opts.ReceivedAt, Suppressed: opts.Suppressed}
	if r.Source == "" {
		r.Source = "stripe"
	}
	if r.Cause == "" {
		r.Cause = inbox.CauseSignatureMismatch
	}
	if r.Message == "" {
		r.Message = "factory: refused"
	}
	if err := exec.RejectionInsert(ctx, r, 0); err != nil {
		t.Fatalf("factory: %v", err)
	}
}

// QuarantinedOpts describes a refused delivery kept in quarantine.
type QuarantinedOpts struct {
	// Source and Kind default to stripe; Cause to signature_mismatch.
	Source, Kind string
	Cause        inbox.Cause
	Header       http.Header
	Body         []byte
	// ReceivedAt defaults to now.
	ReceivedAt time.Time
}

// Quarantined keeps a refused delivery, with the receiver's own statement
// (at the default cap), and returns its id.
func Quarantined(ctx context.Context, t testing.TB, exec storage.Executor, opts *QuarantinedOpts) int64 {
	t.Helper()
	q := inbox.Quarantined{Source: opts.Source, SourceKind: opts.Kind, Cause: opts.Cause, Header: opts.Header, Body: opts.Body,
		ReceivedAt: opts.ReceivedAt, RequestID: "factory"}
	if q.Source == "" {
		q.Source = "stripe"
	}
	if q.SourceKind == "" {
		q.SourceKind = "stripe"
	}
	if q.Cause == "" {
		q.Cause = inbox.CauseSignatureMismatch
	}
	if q.Body == nil {
		q.Body = []byte(`{"id":"evt_factory_quarantined"}`)
	}
	if q.ReceivedAt.IsZero() {
		q.ReceivedAt = time.Now()
	}
	kept, err := exec.QuarantineInsert(ctx, q, 0)
	if err != nil || !kept {
		t.Fatalf("factory: quarantine: kept %v, %v", kept, err)
	}
	page, err := exec.QuarantineListPage(ctx, storage.QuarantineFilter{Source: q.Source}, 0, 1)
	if err != nil || len(page) != 1 {
		t.Fatalf("factory: quarantine: %v", err)
	}
	return page[0].ID
}

// ProcessDue marks every event due now processed at processedAt (outcome
// handled), through the processor's own statements: the claims, then the
// record of each attempt its transaction makes. It is how tests age events
// that the receiver's statement stored (with the payload it chose). It
// returns them.
func ProcessDue(ctx context.Context, t testing.TB, exec storage.Executor, processedAt time.Time) []*inbox.Event {
	t.Helper()
	now := time.Now().Add(time.Second) // past the server's now() the receiver stamped
	batch, err := exec.EventClaimBatch(ctx, storage.ClaimParams{Now: now, Max: 1 << 20, BodyBudget: 1 << 62})
	if err != nil {
		t.Fatalf("factory: %v", err)
	}
	claimed := batch.Events
	finish(ctx, t, exec, processedAt, claimed)
	for {
		solo, err := exec.EventClaimSolo(ctx, now, 1<<62)
		if err != nil {
			t.Fatalf("factory: %v", err)
		}
		if len(solo.Events) == 0 {
			break
		}
		// One at a time: the solo claim takes the oldest, which is only
		// not due again once processed.
		finish(ctx, t, exec, processedAt, solo.Events)
		claimed = append(claimed, solo.Events...)
	}
	out := make([]*inbox.Event, len(claimed))
	for i, c := range claimed {
		out[i] = c.Event
	}
	return out
}

// finish records a handled attempt of each claimed event still to be
// processed.
func finish(ctx context.Context, t testing.TB, exec storage.Executor, at time.Time, claimed []storage.ClaimedEvent) {
	t.Helper()
	results := make([]storage.AttemptResult, len(claimed))
	for i, c := range claimed {
		results[i] = storage.AttemptResult{ID: c.ID, Outcome: inbox.AttemptHandled, StartedAt: at, FinishedAt: at}
	}
	if len(results) == 0 {
		return
	}
	if _, err := exec.EventFinish(ctx, storage.EventFinishParams{Processor: "factory", BatchSize: len(results), Results: results}); err != nil {
		t.Fatalf("factory: mark %d events processed: %v", len(results), err)
	}
}

// MarkArchived marks processed events archived in key through the
// archiver's own statements (lock, mark, in one transaction), as if their
// object had been written: for tests of what an archived event means to
// the other parts, without an S3 server.
func MarkArchived(ctx context.Context, t testing.TB, store *storage.Store, key string, ids ...int64) {
	t.Helper()
	tx, err := store.Begin(ctx)
	if err != nil {
		t.Fatalf("factory: %v", err)
	}
	defer tx.Rollback(ctx)
	evs, err := tx.EventLockForArchive(ctx, ids)
	if err != nil || len(evs) != len(ids) {
		t.Fatalf("factory: lock %d events for archiving: %d locked, %v", len(ids), len(evs), err)
	}
	locs := make([]storage.ArchiveLocation, len(evs))
	for i, ev := range evs {
		locs[i] = storage.ArchiveLocation{EventPK: ev.ID, Offset: int64(i), Length: 1}
	}
	if err := tx.EventMarkArchived(ctx, key, locs); err != nil {
		t.Fatalf("factory: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("factory: %v", err)
	}
}

// SourceActivity records sources as a receiver does at now
// (storage's SourceActivityRecord): each configured with its setting and,
// where ReceivedAt is set, its newest delivery; any other source recorded
// before is no longer configured.
func SourceActivity(ctx context.Context, t testing.TB, exec storage.Executor, now time.Time, sources ...storage.SourceRecord) {
	t.Helper()
	if err := exec.SourceActivityRecord(ctx, sources, now); err != nil {
		t.Fatalf("factory: %v", err)
	}
}
