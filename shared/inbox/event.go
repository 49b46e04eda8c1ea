package inbox

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Event is a stored webhook event: one row of webhook_events, the one shape
// in which every part of the system (receiver, processor, handlers,
// archiver, operator tools) sees it. The row is kept for ever: it is the
// deduplication memory and the audit trail.
type Event struct {
	// ID is the row's primary key.
	ID int64
	// Source is the configured source the event was posted to (the
	// {source} of the URL, stored in the provider column); SourceKind the
	// kind of that source when the receiver verified it ("" for rows
	// stored before the receiver recorded kinds).
	Source     string
	SourceKind string
	// EventID and Type are the event's identity as its sender gave it;
	// (Source, EventID) is the deduplication key.
	EventID string
	Type    string
	// Payload is the body as JSON: read from the row, the JSONB parsed
	// from it, nil when the body is not JSON Postgres can hold, and once
	// archived or expunged. A handler is handed the body's own bytes here
	// when the row holds (or, archived, the body is) such JSON: the
	// processor does not make Postgres print the JSONB back, and the
	// bytes are the ones the sender signed.
	Payload json.RawMessage
	// Body is the raw body, byte for byte as signed; nil once archived
	// (see ArchiveKey) or expunged, and in listings that do not read it.
	Body []byte
	// BodySHA256 and BodySize describe the body as received, for ever.
	BodySHA256 []byte
	BodySize   int
	// Metadata holds sender-specific identifiers kept beside the event.
	Metadata map[string]string
	// CreatedAt is when the receiver stored the event.
	CreatedAt time.Time

	// Attempts is the number of processing attempts recorded for the
	// event over its whole life (replays and requeues add to it, never
	// reset it): the number of the last row of its history. A handler
	// sees this attempt's number, from 1.
	Attempts int
	// FailedAttempts counts the attempts of the current run (since the
	// event was received, replayed or requeued) that failed, or were
	// interrupted while it ran alone: what the processor's MaxAttempts
	// limits. An attempt interrupted in a batch is not charged to it.
	FailedAttempts int
	// Solo is set once an attempt of the event failed or was interrupted:
	// it then runs alone in its own transaction, never in a batch.
	Solo bool
	// LastAttemptAt is when the newest recorded attempt started.
	LastAttemptAt *time.Time
	// NextAttemptAt is when the event is due (again).
	NextAttemptAt time.Time
	// ClaimedUntil and ClaimedBy are the claim of a processor that holds
	// the event (webhook_claims): its lease's end and the processor; nil
	// and "" when none does, and in rows read without the claims.
	ClaimedUntil *time.Time
	ClaimedBy    string
	// LastError is the newest failure's text in the current run ("" when
	// none); the attempt history (AttemptListByEvent) holds them all.
	LastError string
	// Outcome says how a processed event ended; ProcessedAt when.
	Outcome     Outcome
	ProcessedAt *time.Time
	// DeadAt is when the event moved to the dead letters.
	DeadAt *time.Time

	// ArchiveKey, ArchiveOffset and ArchiveLength locate the body's gzip
	// member in the archive once archived ("" before).
	ArchiveKey    string
	ArchiveOffset int64
	ArchiveLength int64
	ArchivedAt    *time.Time
	// ExpungedAt records a privacy erasure of the body.
	ExpungedAt *time.Time
	// BodyExpiredAt is when the archiver's retention pass removed the body
	// (ARCHIVE_BODY_RETENTION_DAYS): its archive object deleted, or its
	// copy in the row cleared. The row, its key and hash stay.
	BodyExpiredAt *time.Time

	// HeldBy names the pause that holds the event back from the
	// processor (HoldOf: "source:NAME" or "handler:ROUTE"), "" when
	// none does; HeldDueAt is when it was due, which a resume gives back.
	// A held event's NextAttemptAt is the far future (infinity), beyond
	// every claim.
	HeldBy    string
	HeldDueAt *time.Time
}

// Attempt is one processing attempt of an event (webhook_attempts): its
// history is every attempt, for ever, in order.
type Attempt struct {
	EventPK int64
	// Number is the attempt's number for the event, from 1.
	Number    int
	StartedAt time.Time
	// FinishedAt is nil for an attempt that never finished (its processor
	// died or froze): Outcome is then AttemptInterrupted.
	FinishedAt *time.Time
	Outcome    AttemptOutcome
	Cause      Cause
	Error      string
	// Dead reports that this attempt moved the event to the dead letters.
	Dead bool
	// Processor names the processor that ran it; BatchSize how many events
	// its transaction ran (1: alone).
	Processor string
	BatchSize int
}

// AttemptOutcome says how one attempt ended.
type AttemptOutcome string

// Attempt outcomes.
const (
	// AttemptHandled: the handler ran and committed with the event.
	AttemptHandled AttemptOutcome = "handled"
	// AttemptUnhandled: no handler matched; the event was marked processed.
	AttemptUnhandled AttemptOutcome = "unhandled"
	// AttemptFailed: the handler (or the processor, before it) refused the
	// event; retried later, or dead-lettered (Dead).
	AttemptFailed AttemptOutcome = "failed"
	// AttemptInterrupted: the attempt never finished; the processor that
	// found its claim past the lease recorded it.
	AttemptInterrupted AttemptOutcome = "interrupted"
)

// AttemptError is one failed attempt in a dead letter's copy of the
// event's history.
type AttemptError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Cause   Cause     `json:"cause"`
	Error   string    `json:"error"`
}

// Outcome says how a processed event ended (webhook_events.outcome).
type Outcome string

// Outcomes.
const (
	// OutcomeHandled: a handler ran and committed with the event.
	OutcomeHandled Outcome = "handled"
	// OutcomeUnhandled: no handler was registered; the event was marked
	// processed without running anything (the default unhandled policy).
	OutcomeUnhandled Outcome = "unhandled"
	// OutcomeExpunged: the body was erased before the event was
	// processed, so it left the drain without running.
	OutcomeExpunged Outcome = "expunged"
	// OutcomeResolved: the event died and an operator resolved its dead
	// letter: it is finished without running again.
	OutcomeResolved Outcome = "resolved"
	// OutcomeDiscarded: an operator discarded the event before it was
	// processed: it is finished without running.
	OutcomeDiscarded Outcome = "discarded"
)

// EventState is where an event is in its life, as operators filter by it.
// Every event is in exactly one state at a given time (see State).
type EventState string

// Event states.
const (
	// StatePending: unprocessed, no failed attempt in the current run, not
	// claimed.
	StatePending EventState = "pending"
	// StateRetrying: unprocessed, at least one attempt of the current run
	// charged to it (FailedAttempts), waiting for the next (not claimed).
	StateRetrying EventState = "retrying"
	// StateInFlight: held by the claim of a processor whose lease has not
	// passed.
	StateInFlight EventState = "in_flight"
	// StatePaused: unprocessed, held back by the pause of its source or
	// its handler until that is resumed.
	StatePaused EventState = "paused"
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
	return []EventState{StatePending, StateRetrying, StatePaused, StateInFlight, StateProcessed, StateArchived, StateDead, StateExpunged}
}

// ParseEventState reads a state name; "" is every state.
func ParseEventState(s string) (EventState, error) {
	if s == "" {
		return "", nil
	}
	for _, st := range EventStates() {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown state %q (want one of %v)", s, EventStates())
}

// State returns the event's state at now (leases are judged at now). The
// storage's state filter selects exactly the events this names; a test
// holds the two together.
func (e *Event) State(now time.Time) EventState {
	switch {
	case e.ExpungedAt != nil:
		return StateExpunged
	case e.DeadAt != nil:
		return StateDead
	case e.ArchivedAt != nil:
		return StateArchived
	case e.ProcessedAt != nil:
		return StateProcessed
	case e.ClaimedUntil != nil && e.ClaimedUntil.After(now):
		return StateInFlight
	case e.HeldBy != "":
		return StatePaused
	case e.FailedAttempts > 0:
		return StateRetrying
	default:
		return StatePending
	}
}

// Decode unmarshals the event's JSON into v: the payload, or the raw body
// when there is no payload. An event that does not decode can never be
// handled, so handlers usually return a permanent error for this error.
func (e *Event) Decode(v any) error {
	data := []byte(e.Payload)
	if data == nil {
		data = e.Body
	}
	if data == nil {
		return fmt.Errorf("event %s/%s has neither payload nor body", e.Source, e.EventID)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode event %s/%s: %w", e.Source, e.EventID, err)
	}
	return nil
}

// DeadLetter is a poison event's copy in webhook_dead_letters, kept with
// what an operator needs to decide on a requeue.
type DeadLetter struct {
	ID int64
	// EventPK is the event's primary key (webhook_events.id).
	EventPK   int64
	Source    string
	EventID   string
	Type      string
	Payload   json.RawMessage
	Body      []byte
	Attempts  int
	Errors    []AttemptError
	LastError string
	DeadAt    time.Time
	// RequeuedAt is when an operator sent it back to the drain, and
	// ResolvedAt when one closed it without running the event again; both
	// nil while it is open.
	RequeuedAt *time.Time
	ResolvedAt *time.Time
}

// Rejection is one refused request, as the receiver records it in its
// ring buffer. Every field is bounded and free of secrets, signatures and
// bodies.
type Rejection struct {
	// Source is the source name as requested: it may name no configured
	// source (cause unknown_source).
	Source     string
	Cause      Cause
	Message    string
	RequestID  string
	RemoteAddr string
	BodySize   int64
	// Suppressed is how many rejections of the same source and cause were
	// not written since the previous record (sampling).
	Suppressed int64
	ReceivedAt time.Time
}

// PayloadMismatch is an anomaly recorded for a stored event (Source,
// EventID): a redelivery of its id whose body differed (Cause
// CausePayloadMismatch: the first body stays), or its body posted under
// another id (Cause CauseSuspectedReplay: ReceivedEventID and
// ReceivedEventType say what was posted; nothing was stored).
type PayloadMismatch struct {
	Source  string
	EventID string
	// Cause is CausePayloadMismatch or CauseSuspectedReplay ("" is read
	// as CausePayloadMismatch when writing).
	Cause             Cause
	StoredSHA256      []byte
	ReceivedSHA256    []byte
	ReceivedSize      int
	ReceivedEventID   string
	ReceivedEventType string
	ReceivedAt        time.Time
}

// ArchiveObject is a manifest row: an S3 object of archived bodies.
type ArchiveObject struct {
	Key    string
	Source string
	// EventCount, Size and SHA256 are known once committed (zero while
	// pending).
	EventCount  int
	Size        int64
	SHA256      []byte
	CreatedAt   time.Time
	CommittedAt *time.Time
	RewrittenAt *time.Time
	// FirstID and LastID bound its events' ids, and LastReceivedAt is the
	// newest receipt among them: the retention pass deletes the object
	// only once that is past retention (known once committed).
	FirstID, LastID int64
	LastReceivedAt  *time.Time
	// ExpiredAt is when the retention pass deleted the object.
	ExpiredAt *time.Time
}

// Actor is who performs an operator action (a replay, a requeue, an
// expunge), as the action's record keeps it.
type Actor struct {
	// Name is who the operator says they are (webhookctl --actor, else
	// user@host). The record also keeps the database role that ran the
	// action, which nobody chooses.
	Name string
	// Reason is why, in their words; optional.
	Reason string
}

// Operator actions (webhook_operator_actions.action).
const (
	ActionReplay  = "replay"
	ActionRequeue = "requeue"
	ActionExpunge = "expunge"
	// ActionPause and ActionResume hold a source's or a handler's events
	// back from the processor, and let them go again.
	ActionPause  = "pause"
	ActionResume = "resume"
	// ActionResolve closes dead letters without running their events
	// again; ActionDiscard makes due events never run. Both say why.
	ActionResolve = "resolve"
	ActionDiscard = "discard"
	// ActionReingest verifies quarantined deliveries again and stores
	// those that now verify; ActionPurge deletes quarantined deliveries.
	ActionReingest = "reingest"
	ActionPurge    = "purge"
)

// PauseScope is what a pause names: a source, or a handler's route.
type PauseScope string

// Pause scopes (webhook_pauses.scope).
const (
	// PauseSource holds the events of one source (its name).
	PauseSource PauseScope = "source"
	// PauseHandler holds the events one route sends to its handler (the
	// route as `webhookctl handlers` prints it: "source stripe, type
	// invoice.paid", "kind github, any type", "fallback"), while the
	// events of other routes run.
	PauseHandler PauseScope = "handler"
)

// Pause is a source or a handler an operator paused (webhook_pauses):
// its events are stored as ever, but wait until it is resumed.
type Pause struct {
	Scope PauseScope
	Name  string
	// PausedAt, Actor and Reason: when, who and why.
	PausedAt time.Time
	Actor    string
	Reason   string
}

// HoldOf is what the events a pause of this scope and name holds record
// as their HeldBy: "source:NAME" or "handler:ROUTE".
func HoldOf(scope PauseScope, name string) string { return string(scope) + ":" + name }

// Quarantined is a delivery to a configured source refused for its
// signature or its signed time (CauseSignatureMismatch,
// CauseTimestampOutOfTolerance), kept so that an operator can verify it
// again once the source's secrets are fixed. Nothing in it is
// authenticated: it is never processed as it is.
type Quarantined struct {
	ID         int64
	Source     string
	SourceKind string
	Cause      Cause
	RequestID  string
	ReceivedAt time.Time
	// Header holds only the headers the source's kind reads to verify and
	// identify a delivery; nil in a list.
	Header http.Header
	// Body is the raw body; nil in a list.
	Body       []byte
	BodySHA256 []byte
	BodySize   int
	// TriedAt, LastCause and LastError: the last re-ingest that still
	// refused it, if any.
	TriedAt   *time.Time
	LastCause Cause
	LastError string
}

// OperatorAction is the record of one operator action: who, when, what
// selection, and how many events it changed.
type OperatorAction struct {
	ID     int64
	Action string
	Actor  string
	// DBUser is the database role the action ran as.
	DBUser string
	At     time.Time
	// Filter is the selection as given, a JSON object.
	Filter json.RawMessage
	Events int
	Reason string
}

// SourceActivity is what the receivers recorded of one source
// (webhook_source_activity): whether it is configured, its silence
// setting, and when it last delivered.
type SourceActivity struct {
	Source string
	// Configured is false for a source the sources document no longer
	// has; its row stays, with its last receipt.
	Configured bool
	// SilentAfter is the source's "silent_after"; 0: none.
	SilentAfter time.Duration
	// SeenAt is when a receiver first recorded the source; silence is
	// counted from it until the first delivery.
	SeenAt time.Time
	// LastReceivedAt is its newest delivery, to within a minute (each
	// receiver container records at most once a minute); nil: none yet.
	LastReceivedAt *time.Time
}

// QuietSince is when the source's current quiet began: its last
// delivery, or when it was first seen if it never delivered.
func (a SourceActivity) QuietSince() time.Time {
	if a.LastReceivedAt != nil {
		return *a.LastReceivedAt
	}
	return a.SeenAt
}

// SilentAt is when the source becomes silent unless it delivers first;
// ok is false for a source without a setting (or no longer configured),
// which is never silent.
func (a SourceActivity) SilentAt() (at time.Time, ok bool) {
	if !a.Configured || a.SilentAfter <= 0 {
		return time.Time{}, false
	}
	return a.QuietSince().Add(a.SilentAfter), true
}

// Silent reports whether the source has gone longer than its SilentAfter
// without a delivery at now.
func (a SourceActivity) Silent(now time.Time) bool {
	at, ok := a.SilentAt()
	return ok && now.After(at)
}
