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
	Attempts      int
	Errors        []inbox.AttemptError
	LastError     string
	Outcome       inbox.Outcome
	ProcessedAt   *time.Time
	LockedUntil   *time.Time
	LockedBy      string
	DeadAt        *time.Time
	ArchivedAt    *time.Time
	ArchiveKey    string
	ArchiveOffset int64
	ArchiveLength int64
	ExpungedAt    *time.Time
}

var seq atomic.Int64

// Event stores one event as opts describe it and returns the stored row.
// A dead event also gets its dead letter, written by the processor's own
// statement (EventDeadLetter), so the pair is as the processor leaves it.
func Event(ctx context.Context, t testing.TB, exec storage.Executor, opts *EventOpts) *inbox.Event {
	t.Helper()
	if opts == nil {
		opts = &EventOpts{}
	}
	ev := build(opts)
	dead := opts.State == inbox.StateDead && opts.DeadAt == nil
	if dead {
		// Claimed first, so EventDeadLetter (which checks the claim)
		// moves it.
		ev.DeadAt = nil
		ev.LockedUntil = new(ev.NextAttemptAt.Add(time.Hour))
		ev.LockedBy = "factory"
	}
	stored, err := exec.EventInsertFull(ctx, ev)
	if err != nil {
		t.Fatalf("factory: %v", err)
	}
	if dead {
		_, ok, err := exec.EventDeadLetter(ctx, storage.EventDeadLetterParams{
			ID: stored.ID, Token: "factory", Now: now(opts), Cause: inbox.CauseHandlerFailed, Error: "factory: dead",
		})
		if err != nil || !ok {
			t.Fatalf("factory: dead-letter event %d: ok=%v %v", stored.ID, ok, err)
		}
		if stored, err = exec.EventGetByID(ctx, stored.ID); err != nil {
			t.Fatalf("factory: %v", err)
		}
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
		Attempts: opts.Attempts, Errors: opts.Errors, LastError: opts.LastError, Outcome: opts.Outcome,
		ProcessedAt: opts.ProcessedAt, LockedUntil: opts.LockedUntil, LockedBy: opts.LockedBy,
		DeadAt: opts.DeadAt, ArchivedAt: opts.ArchivedAt, ArchiveKey: opts.ArchiveKey,
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

	// What the state implies, where the caller said nothing.
	failed := func(n int) {
		if ev.Attempts == 0 {
			ev.Attempts = n
		}
		if ev.Errors == nil {
			for i := 1; i <= ev.Attempts; i++ {
				ev.Errors = append(ev.Errors, inbox.AttemptError{Attempt: i, At: at, Cause: inbox.CauseHandlerFailed, Error: "factory: failed"})
			}
		}
		if ev.LastError == "" && len(ev.Errors) > 0 {
			ev.LastError = ev.Errors[len(ev.Errors)-1].Error
		}
	}
	processed := func() {
		if ev.ProcessedAt == nil {
			ev.ProcessedAt = new(at)
		}
		if ev.Outcome == "" {
			ev.Outcome = inbox.OutcomeHandled
		}
		if ev.Attempts == 0 && ev.Outcome == inbox.OutcomeHandled {
			ev.Attempts = 1
		}
	}
	switch opts.State {
	case "", inbox.StatePending:
	case inbox.StateRetrying:
		failed(1)
		if opts.NextAttemptAt.IsZero() {
			ev.NextAttemptAt = at.Add(time.Minute)
		}
	case inbox.StateInFlight:
		if ev.LockedUntil == nil {
			ev.LockedUntil = new(at.Add(time.Minute))
		}
		if ev.LockedBy == "" {
			ev.LockedBy = "factory"
		}
	case inbox.StateProcessed:
		processed()
	case inbox.StateArchived:
		processed()
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
	case inbox.StateDead:
		failed(3)
	case inbox.StateExpunged:
		processed()
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

// ProcessDue marks every event due now processed at processedAt (outcome
// handled), through the processor's own statements: a claim, then the mark
// its handler's transaction makes. It is how tests age events that the
// receiver's statement stored (with the payload it chose). It returns them.
func ProcessDue(ctx context.Context, t testing.TB, exec storage.Executor, processedAt time.Time) []*inbox.Event {
	t.Helper()
	now := time.Now().Add(time.Second) // past the server's now() the receiver stamped
	claimed, err := exec.EventClaim(ctx, storage.EventClaimParams{Now: now, Limit: 1 << 20, LockedUntil: now.Add(time.Hour), Token: "factory"})
	if err != nil {
		t.Fatalf("factory: %v", err)
	}
	out := make([]*inbox.Event, len(claimed))
	for i, c := range claimed {
		ok, err := exec.EventMarkProcessed(ctx, storage.EventMarkProcessedParams{ID: c.ID, Token: "factory", Now: processedAt, Outcome: inbox.OutcomeHandled})
		if err != nil || !ok {
			t.Fatalf("factory: mark event %d processed: ok=%v %v", c.ID, ok, err)
		}
		out[i] = c.Event
	}
	return out
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
