package operations

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The answers' types. They are the operator API's JSON (version 1) and
// what `webhookctl --json` prints, so their field names are a contract:
// add fields, never rename one. A nullable field is null, not absent.

// Event is one event as operators see it: everything of its row but the
// body and payload (EventBody reads the body).
type Event struct {
	ID         int64            `json:"id"`
	Source     string           `json:"source"`
	SourceKind string           `json:"source_kind"`
	EventID    string           `json:"event_id"`
	Type       string           `json:"type"`
	State      inbox.EventState `json:"state"`
	// Outcome is how it was processed: handled, or unhandled (no handler
	// took it).
	Outcome  *string `json:"outcome"`
	Attempts int     `json:"attempts"`
	// FailedAttempts counts this run's failed attempts (since it was
	// received, replayed or requeued); Solo: it runs alone, never in a
	// batch, since one failed.
	FailedAttempts int        `json:"failed_attempts"`
	Solo           bool       `json:"solo"`
	ReceivedAt     time.Time  `json:"received_at"`
	ProcessedAt    *time.Time `json:"processed_at"`
	// NextAttemptAt is when it is due, while it waits for the processor.
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	DeadAt        *time.Time `json:"dead_at"`
	LastError     *string    `json:"last_error"`
	// ClaimedUntil and ClaimedBy: the lease of the processor holding it.
	ClaimedUntil *time.Time        `json:"claimed_until"`
	ClaimedBy    *string           `json:"claimed_by"`
	BodySize     int               `json:"body_size"`
	BodySHA256   string            `json:"body_sha256"`
	Metadata     map[string]string `json:"metadata"`
	// BodyInPostgres: the body is in its row (neither archived nor
	// expunged yet).
	BodyInPostgres bool       `json:"body_in_postgres"`
	ArchiveKey     *string    `json:"archive_key"`
	ArchiveOffset  *int64     `json:"archive_offset"`
	ArchiveLength  *int64     `json:"archive_length"`
	ArchivedAt     *time.Time `json:"archived_at"`
	ExpungedAt     *time.Time `json:"expunged_at"`
	// BodyExpiredAt: when the archiver's body retention removed the body
	// (the row, its key and hash stay).
	BodyExpiredAt *time.Time `json:"body_expired_at"`
	// HeldBy names the pause that holds it ("source:NAME",
	// "handler:ROUTE"; state paused), HeldDueAt when it was due: a
	// resume makes it due then, or at once if that has passed.
	HeldBy    *string    `json:"held_by"`
	HeldDueAt *time.Time `json:"held_due_at"`
}

func eventOf(now time.Time, e *inbox.Event) Event {
	v := Event{
		ID: e.ID, Source: e.Source, SourceKind: e.SourceKind, EventID: e.EventID, Type: e.Type, State: e.State(now),
		Outcome: orNull(string(e.Outcome)), Attempts: e.Attempts, FailedAttempts: e.FailedAttempts, Solo: e.Solo,
		ReceivedAt: e.CreatedAt, ProcessedAt: e.ProcessedAt, DeadAt: e.DeadAt, LastError: orNull(e.LastError),
		ClaimedUntil: e.ClaimedUntil, ClaimedBy: orNull(e.ClaimedBy), BodySize: e.BodySize, BodySHA256: hex.EncodeToString(e.BodySHA256),
		Metadata: e.Metadata, BodyInPostgres: e.Body != nil, ArchiveKey: orNull(e.ArchiveKey), ArchivedAt: e.ArchivedAt, ExpungedAt: e.ExpungedAt,
		BodyExpiredAt: e.BodyExpiredAt,
	}
	switch {
	case e.ProcessedAt == nil && e.DeadAt == nil && e.HeldBy != "":
		// A held event is due at no time (its row says the far future):
		// when it was due is what a resume gives back.
		v.HeldBy, v.HeldDueAt = &e.HeldBy, e.HeldDueAt
	case e.ProcessedAt == nil && e.DeadAt == nil:
		// Only meaningful while the event waits for the processor.
		v.NextAttemptAt = &e.NextAttemptAt
	}
	if e.ArchiveKey != "" {
		v.ArchiveOffset, v.ArchiveLength = &e.ArchiveOffset, &e.ArchiveLength
	}
	if v.Metadata == nil {
		v.Metadata = map[string]string{}
	}
	return v
}

func eventsOf(now time.Time, evs []*inbox.Event) []Event {
	out := make([]Event, len(evs))
	for i, e := range evs {
		out[i] = eventOf(now, e)
	}
	return out
}

// Attempt is one attempt of an event's history.
type Attempt struct {
	Attempt    int        `json:"attempt"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// Outcome: handled, unhandled, failed, or interrupted (it never
	// finished: its processor died or froze).
	Outcome   string  `json:"outcome"`
	Cause     *string `json:"cause"`
	Error     *string `json:"error"`
	Dead      bool    `json:"dead"`
	Processor *string `json:"processor"`
	BatchSize int     `json:"batch_size"`
}

func attemptsOf(hist []inbox.Attempt) []Attempt {
	out := make([]Attempt, len(hist))
	for i, a := range hist {
		out[i] = Attempt{
			Attempt: a.Number, StartedAt: a.StartedAt, FinishedAt: a.FinishedAt, Outcome: string(a.Outcome),
			Cause: orNull(string(a.Cause)), Error: orNull(a.Error), Dead: a.Dead, Processor: orNull(a.Processor), BatchSize: a.BatchSize,
		}
	}
	return out
}

// Action is the record of one operator action.
type Action struct {
	ID     int64  `json:"id"`
	Action string `json:"action"`
	// Actor is who ran it: the verified AWS principal through the
	// operator API, else the name the operator gave.
	Actor string `json:"actor"`
	// DBUser is the database role it ran as.
	DBUser string    `json:"db_user"`
	At     time.Time `json:"at"`
	// Filter is the selection, as given (a JSON object).
	Filter json.RawMessage `json:"filter"`
	Events int             `json:"events"`
	Reason *string         `json:"reason"`
}

func actionsOf(acts []inbox.OperatorAction) []Action {
	out := make([]Action, len(acts))
	for i, a := range acts {
		// Compact, as JSON travels: the column is jsonb, which Postgres
		// prints with spaces, and every front end shows the same text.
		var filter bytes.Buffer
		if json.Compact(&filter, a.Filter) != nil {
			filter.Reset()
			filter.WriteString(`{}`)
		}
		out[i] = Action{ID: a.ID, Action: a.Action, Actor: a.Actor, DBUser: a.DBUser, At: a.At, Filter: json.RawMessage(filter.Bytes()), Events: a.Events, Reason: orNull(a.Reason)}
	}
	return out
}

// AttemptError is one failed attempt as a dead letter copied it.
type AttemptError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Cause   string    `json:"cause"`
	Error   string    `json:"error"`
}

// DeadLetter is one dead letter: the event's copy when it died.
type DeadLetter struct {
	ID         int64          `json:"id"`
	EventPK    int64          `json:"event"`
	Source     string         `json:"source"`
	EventID    string         `json:"event_id"`
	Type       string         `json:"type"`
	Attempts   int            `json:"attempts"`
	LastError  *string        `json:"last_error"`
	Errors     []AttemptError `json:"errors"`
	DeadAt     time.Time      `json:"dead_at"`
	RequeuedAt *time.Time     `json:"requeued_at"`
	// ResolvedAt is when an operator closed it without running the event
	// again (Resolve); null while open or once requeued.
	ResolvedAt *time.Time `json:"resolved_at"`
	// HoldsCopy: it still holds a copy of the body, the payload or an
	// error text (what an expunge erases).
	HoldsCopy bool `json:"holds_copy"`
}

func deadLettersOf(dls []*inbox.DeadLetter) []DeadLetter {
	out := make([]DeadLetter, len(dls))
	for i, d := range dls {
		errs := make([]AttemptError, len(d.Errors))
		copied := d.Body != nil || d.Payload != nil || erasable(d.LastError)
		for j, a := range d.Errors {
			errs[j] = AttemptError{Attempt: a.Attempt, At: a.At, Cause: string(a.Cause), Error: a.Error}
			copied = copied || erasable(a.Error)
		}
		out[i] = DeadLetter{
			ID: d.ID, EventPK: d.EventPK, Source: d.Source, EventID: d.EventID, Type: d.Type, Attempts: d.Attempts,
			LastError: orNull(d.LastError), Errors: errs, DeadAt: d.DeadAt, RequeuedAt: d.RequeuedAt, ResolvedAt: d.ResolvedAt, HoldsCopy: copied,
		}
	}
	return out
}

// erasable reports whether an error text is still there to erase.
func erasable(text string) bool { return text != "" && text != storage.Redacted }

// Mismatch is a delivery of a stored event that was not stored: a
// redelivery of its id with another body (payload_mismatch: the first body
// was kept), or its body under another id (suspected_replay: not stored,
// not processed).
type Mismatch struct {
	ReceivedAt        time.Time   `json:"received_at"`
	ReceivedSize      int         `json:"received_size"`
	ReceivedSHA256    string      `json:"received_sha256"`
	Cause             inbox.Cause `json:"cause"`
	ReceivedEventID   string      `json:"received_event_id,omitempty"`
	ReceivedEventType string      `json:"received_event_type,omitempty"`
}

func mismatchesOf(mms []inbox.PayloadMismatch) []Mismatch {
	out := make([]Mismatch, len(mms))
	for i, m := range mms {
		out[i] = Mismatch{m.ReceivedAt, m.ReceivedSize, hex.EncodeToString(m.ReceivedSHA256), m.Cause, m.ReceivedEventID, m.ReceivedEventType}
	}
	return out
}

// Rejection is one refused request, as the receiver recorded it.
type Rejection struct {
	ReceivedAt time.Time   `json:"received_at"`
	Source     string      `json:"source"`
	Cause      inbox.Cause `json:"cause"`
	Message    string      `json:"message"`
	RequestID  string      `json:"request_id"`
	RemoteAddr string      `json:"remote_addr"`
	BodySize   int64       `json:"body_size"`
	// Suppressed is how many refusals of the same source and cause this
	// record stands for besides itself (sampling).
	Suppressed int64 `json:"suppressed"`
}

func rejectionsOf(rs []inbox.Rejection) []Rejection {
	out := make([]Rejection, len(rs))
	for i, r := range rs {
		out[i] = Rejection{r.ReceivedAt, r.Source, r.Cause, r.Message, r.RequestID, r.RemoteAddr, r.BodySize, r.Suppressed}
	}
	return out
}

// orNull is s, or nil for an empty s: the API's nullable texts, null in
// JSON (a front end writes none as it likes: webhookctl "-", via orDash).
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
