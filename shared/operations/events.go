package operations

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// StateUnhandled is the events list's filter for the processed events no
// handler took: a state to an operator, an outcome to storage.
const StateUnhandled = string(inbox.OutcomeUnhandled)

// EventStates are the state filters of the events list, in the order of
// an event's life, "unhandled" after processed.
func EventStates() []string {
	var out []string
	for _, st := range inbox.EventStates() {
		out = append(out, string(st))
		if st == inbox.StateProcessed {
			out = append(out, StateUnhandled)
		}
	}
	return out
}

// EventQuery asks for a page of events, newest first.
type EventQuery struct {
	Source string `json:"source,omitzero"`
	Type   string `json:"type,omitzero"`
	// State is one of EventStates ("" any).
	State string `json:"state,omitzero"`
	// Window bounds when they were received.
	Window Window `json:"window,omitzero"`
	// Before pages on: only events with a smaller id (the previous page's
	// NextBefore).
	Before int64 `json:"before,omitzero"`
	Limit  int   `json:"limit,omitzero"`
	// Match searches by content: JSON (an object or array, at most
	// MaxMatchBytes) the stored payload contains (jsonb @>). Archived,
	// expired and expunged events keep no payload and never match.
	Match string `json:"match,omitzero"`
	// Header searches by a header a kind keeps in its events' metadata:
	// "NAME=VALUE" (source.MetadataHeaders).
	Header string `json:"header,omitzero"`
}

// EventPage is a page of events, newest first.
type EventPage struct {
	At     time.Time `json:"at"`
	Events []Event   `json:"events"`
	// NextBefore is the cursor of the next (older) page; null on the
	// last.
	NextBefore *int64 `json:"next_before"`
	// Search is how far a search by content (Match, Header) got; nil
	// for a plain list.
	Search *Search `json:"search,omitempty"`
}

// Events reads a page of events in one snapshot.
func (s *Service) Events(ctx context.Context, q EventQuery) (*EventPage, error) {
	f, n, err := q.filter()
	if err != nil {
		return nil, err
	}
	match, metadata, err := q.searchFilter()
	if err != nil {
		return nil, err
	}
	p := &EventPage{}
	err = s.read(ctx, func(tx *storage.Tx, now time.Time) error {
		p.At = now
		if q.searching() {
			evs, next, sr, err := s.search(ctx, tx, f, match, metadata, now, n, q.Window)
			if err != nil {
				return err
			}
			p.Events, p.NextBefore, p.Search = eventsOf(now, evs), next, sr
			return nil
		}
		f.CreatedFrom, f.CreatedTo = q.Window.Bounds(now)
		// One more than the page says whether another follows.
		evs, err := tx.EventList(ctx, f, now, n+1)
		if err != nil {
			return err
		}
		evs, p.NextBefore = keyset(evs, n, func(e *inbox.Event) int64 { return e.ID })
		p.Events = eventsOf(now, evs)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// filter checks q and returns its storage filter (without the window,
// which is read at the snapshot's now) and its page size.
func (q EventQuery) filter() (storage.EventFilter, int, error) {
	var f storage.EventFilter
	n, err := limit(q.Limit)
	if err != nil {
		return f, 0, err
	}
	if f.Source, err = text("source", q.Source); err != nil {
		return f, 0, err
	}
	if f.EventType, err = text("type", q.Type); err != nil {
		return f, 0, err
	}
	if q.Before < 0 {
		return f, 0, invalid("before must be an event's id")
	}
	f.BeforeID = q.Before
	if q.State == StateUnhandled {
		f.Outcome = inbox.OutcomeUnhandled
	} else if f.State, err = inbox.ParseEventState(q.State); err != nil {
		return f, 0, invalid("state: %q is not one of %v", inbox.EscapeControls(q.State, ""), EventStates())
	}
	return f, n, q.Window.check()
}

// FindQuery looks an event up as an operator types it: its id, or the
// sender's event id in Source (or in every source when Source is empty).
type FindQuery struct {
	Find   string `json:"find"`
	Source string `json:"source,omitzero"`
}

// Find returns the events q names, oldest source first: none, one, or (a
// sender's id several sources have) each of them. None is not an error.
func (s *Service) Find(ctx context.Context, q FindQuery) (*EventPage, error) {
	find, err := text("find", q.Find)
	if err != nil {
		return nil, err
	}
	source, err := text("source", q.Source)
	if err != nil {
		return nil, err
	}
	if find == "" {
		return nil, invalid("find: give an event's id, or the sender's event id")
	}
	p := &EventPage{Events: []Event{}}
	err = s.read(ctx, func(tx *storage.Tx, now time.Time) error {
		p.At = now
		var found []*inbox.Event
		if source != "" {
			e, err := tx.EventGetByKey(ctx, source, find)
			if err != nil && !errors.Is(err, storage.ErrEventNotFound) {
				return err
			}
			if e != nil && err == nil {
				found = append(found, e)
			}
		} else {
			if id, perr := strconv.ParseInt(find, 10, 64); perr == nil && id > 0 {
				e, err := tx.EventGetByID(ctx, id)
				if err == nil {
					found = append(found, e)
				} else if !errors.Is(err, storage.ErrEventNotFound) {
					return err
				}
			}
			if len(found) == 0 {
				var err error
				if found, err = tx.EventListByEventID(ctx, find, MaxLimit); err != nil {
					return err
				}
			}
		}
		p.Events = eventsOf(now, found)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// MetadataKeys are the keys of the event's metadata, sorted.
func (e Event) MetadataKeys() []string { return slices.Sorted(maps.Keys(e.Metadata)) }

// EventRef names one event: its id, or its source and the sender's event
// id.
type EventRef struct {
	ID      int64  `json:"id,omitzero"`
	Source  string `json:"source,omitzero"`
	EventID string `json:"event_id,omitzero"`
}

// String names the event as a person would: "id 42" or "stripe/evt_1".
func (r EventRef) String() string {
	if r.ID != 0 {
		return "id " + strconv.FormatInt(r.ID, 10)
	}
	return inbox.EscapeControls(r.Source+"/"+r.EventID, "")
}

func (r EventRef) check() (EventRef, error) {
	var err error
	switch {
	case r.ID < 0:
		return r, invalid("not an event's id: %d", r.ID)
	case r.ID > 0 && (r.Source != "" || r.EventID != ""):
		return r, invalid("name the event by its id, or by its source and event id, not both")
	case r.ID > 0:
		return r, nil
	}
	if r.Source, err = text("source", r.Source); err != nil {
		return r, err
	}
	if r.EventID, err = text("event_id", r.EventID); err != nil {
		return r, err
	}
	if r.Source == "" || r.EventID == "" {
		return r, invalid("name one event: its id, or its source and event id")
	}
	return r, nil
}

// get reads the event r names.
func (r EventRef) get(ctx context.Context, exec storage.Executor) (*inbox.Event, error) {
	var e *inbox.Event
	var err error
	if r.ID != 0 {
		e, err = exec.EventGetByID(ctx, r.ID)
	} else {
		e, err = exec.EventGetByKey(ctx, r.Source, r.EventID)
	}
	if errors.Is(err, storage.ErrEventNotFound) {
		return nil, inbox.WrapError(inbox.CauseEventNotFound, err, "no such event ("+r.String()+")")
	}
	return e, err
}

// EventDetail is one event in full, but its body.
type EventDetail struct {
	At    time.Time `json:"at"`
	Event Event     `json:"event"`
	// History is every attempt, oldest first.
	History []Attempt `json:"history"`
	// Actions are the operator actions that changed it, oldest first.
	Actions []Action `json:"actions"`
	// DeadLetters are its dead letters, open or not, oldest first;
	// OpenDeadLetter the one neither requeued nor resolved (0: none).
	DeadLetters    []DeadLetter `json:"dead_letters"`
	OpenDeadLetter int64        `json:"open_dead_letter"`
	// Mismatches are the deliveries of it that were not stored.
	Mismatches []Mismatch `json:"payload_mismatches"`
}

// Event reads one event and what belongs to it in one snapshot.
func (s *Service) Event(ctx context.Context, ref EventRef) (*EventDetail, error) {
	ref, err := ref.check()
	if err != nil {
		return nil, err
	}
	d := &EventDetail{}
	err = s.read(ctx, func(tx *storage.Tx, now time.Time) error {
		d.At = now
		e, err := ref.get(ctx, tx)
		if err != nil {
			return err
		}
		d.Event = eventOf(now, e)
		hist, err := tx.AttemptListByEvent(ctx, e.ID)
		if err != nil {
			return err
		}
		d.History = attemptsOf(hist)
		acts, err := tx.OperatorActionListByEvent(ctx, e.ID)
		if err != nil {
			return err
		}
		d.Actions = actionsOf(acts)
		dls, err := tx.DeadLetterListByEvent(ctx, e.ID)
		if err != nil {
			return err
		}
		d.DeadLetters = deadLettersOf(dls)
		for _, dl := range dls {
			if dl.RequeuedAt == nil && dl.ResolvedAt == nil {
				d.OpenDeadLetter = dl.ID
			}
		}
		mms, err := tx.PayloadMismatchListByEvent(ctx, e.Source, e.EventID)
		if err != nil {
			return err
		}
		d.Mismatches = mismatchesOf(mms)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Where a body was read from.
const (
	BodyFromPostgres = "postgres"
	BodyFromArchive  = "archive"
)

// Body is an event's raw body, byte for byte as the sender signed it.
type Body struct {
	Bytes []byte `json:"-"`
	// From is where it was read: "postgres" or "archive".
	From string `json:"from"`
	// SHA256 is the hash recorded at receipt, which Bytes matches.
	SHA256 string `json:"sha256"`
	// ArchiveKey is the object it was read from (From "archive").
	ArchiveKey string `json:"archive_key,omitempty"`
}

// EventBody reads an event's body: from its row while it is there
// (checked against the hash recorded at receipt), else from its archive
// object (a ranged read, checked the same way). An expunged body is an
// error with cause event_expunged; one past the body retention, with cause
// body_expired.
func (s *Service) EventBody(ctx context.Context, id int64) (*Body, error) {
	if id <= 0 {
		return nil, invalid("not an event's id: %d", id)
	}
	var e *inbox.Event
	err := s.read(ctx, func(tx *storage.Tx, _ time.Time) error {
		var err error
		e, err = EventRef{ID: id}.get(ctx, tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	b := &Body{SHA256: hex.EncodeToString(e.BodySHA256)}
	switch {
	case e.ExpungedAt != nil:
		return nil, inbox.Errorf(inbox.CauseEventExpunged, "the body of event %d was expunged (erased on request)", e.ID)
	case e.BodyExpiredAt != nil:
		return nil, bodyExpired(e)
	case e.Body != nil:
		sum := sha256.Sum256(e.Body)
		if len(e.Body) != e.BodySize || !bytes.Equal(sum[:], e.BodySHA256) {
			return nil, inbox.Errorf(inbox.CauseBodyCorrupt,
				"the stored body of event %d does not match the hash recorded at receipt (%d bytes sha256 %x, recorded %d bytes sha256 %x)",
				e.ID, len(e.Body), sum, e.BodySize, e.BodySHA256)
		}
		b.Bytes, b.From = e.Body, BodyFromPostgres
		return b, nil
	case e.ArchiveKey == "":
		return nil, inbox.Errorf(inbox.CauseInternal, "event %d has neither a body in Postgres nor an archive location", e.ID)
	}
	cfg, err := s.archiveConfig("reading an archived body")
	if err != nil {
		return nil, err
	}
	a, err := s.archiver(cfg, nil)
	if err != nil {
		return nil, classify(err)
	}
	body, err := a.Body(ctx, e)
	if err != nil {
		return nil, classify(err)
	}
	b.Bytes, b.From, b.ArchiveKey = body, BodyFromArchive, e.ArchiveKey
	return b, nil
}

// bodyExpired is the refusal to read or replay e, whose body the
// archiver's body retention removed.
func bodyExpired(e *inbox.Event) error {
	return inbox.Errorf(inbox.CauseBodyExpired,
		"the body of event %d was removed on %s, past the body retention (ARCHIVE_BODY_RETENTION_DAYS); its row, id and hash stay",
		e.ID, Stamp(e.BodyExpiredAt))
}
