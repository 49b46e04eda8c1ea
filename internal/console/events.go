package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
)

// The events list (API.Events), finding one (API.Find), and one event's
// page (API.Event, API.EventBody).

type eventsData struct {
	Now time.Time
	// Form is the filter as the operator typed it, shown back in the form.
	Form   url.Values
	States []string
	Events []operations.Event
	// Source and Type are the list's, for its replay (Replayable: the
	// filter has no state or time, which a replay cannot take).
	Source, Type string
	Replayable   bool
	// Next is the address of the next (older) page, "" on the last:
	// url.Values encoded, so safe as a URL.
	Next  template.URL
	Error string
	// Replayed is the notice after a replay of the filter (replay.go).
	Replayed string
	// Discard is the filter as the discard form's hidden fields (nil:
	// a discard cannot take it); Causes the causes it suggests;
	// Discarded the notice after a discard (discard.go).
	Discard   url.Values
	Causes    []string
	Discarded string
	// Found is the sender's id several sources have (the events listed).
	Found string
	// Search is how far a search by content (match=, header=) got.
	Search *operations.Search
}

func (d eventsData) at() time.Time { return d.Now }

// events lists a page of events, newest first, or finds one (find=).
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	qs := r.URL.Query()
	d := eventsData{Form: qs, States: operations.EventStates(), Replayed: replayedNote(qs), Discarded: discardedNote(qs), Causes: attemptCauses}
	if strings.TrimSpace(qs.Get("find")) != "" {
		return s.find(w, r, d)
	}
	q, err := operatorapi.ParseEvents(qs)
	var p *operations.EventPage
	if err == nil {
		p, err = s.api.Events(r.Context(), q)
	}
	if err != nil {
		if !inPlace(err) {
			return err
		}
		d.Error = messageOf(err)
		return s.render(w, r, err, "events", "Events", d)
	}
	d.Now, d.Events, d.Search = p.At, p.Events, p.Search
	// A replay takes a source and a type, not a state, a time or content.
	d.Source, d.Type, d.Replayable = q.Source, q.Type, q.State == "" && q.Window.IsZero() && p.Search == nil
	d.Discard = eventsDiscard(q, p.Search != nil)
	if p.NextBefore != nil {
		q.Before = *p.NextBefore
		d.Next = template.URL("/events?" + operatorapi.EventsValues(q).Encode())
	}
	return s.render(w, r, nil, "events", "Events", d)
}

// find opens the event named by find=: its id, or the sender's event id
// within source= when given, else in every source: one match opens it,
// several are listed to choose from.
func (s *Server) find(w http.ResponseWriter, r *http.Request, d eventsData) error {
	q, err := operatorapi.ParseFind(r.URL.Query())
	var p *operations.EventPage
	if err == nil {
		p, err = s.api.Find(r.Context(), q)
	}
	if err == nil && len(p.Events) == 0 {
		err = inbox.Errorf(inbox.CauseEventNotFound, "no such event: %s", inbox.EscapeControls(q.Find, ""))
	}
	if err != nil {
		if !inPlace(err) {
			return err
		}
		d.Error = messageOf(err)
		return s.render(w, r, err, "events", "Events", d)
	}
	if len(p.Events) == 1 {
		return redirect(w, r, "/events/"+strconv.FormatInt(p.Events[0].ID, 10), nil)
	}
	d.Now, d.Events, d.Found = p.At, p.Events, inbox.EscapeControls(q.Find, "")
	return s.render(w, r, nil, "events", "Events", d)
}

// --- One event ---

type eventData struct {
	*operations.EventDetail
	// Body is the body as shown (JSON indented); BodyFrom where it was
	// read ("postgres" or "archive"); BodyNote why it is not shown.
	Body, BodyFrom, BodyNote string
	// Replayed is the notice after a replay of the event (replay.go).
	Replayed string
}

func (d eventData) at() time.Time { return d.At }

// event shows one event: its state and metadata, its attempts, dead
// letters, mismatched redeliveries, the actions that touched it, and its
// body.
func (s *Server) event(w http.ResponseWriter, r *http.Request) error {
	id, err := pathEventID(r)
	if err != nil {
		return err
	}
	det, err := s.api.Event(r.Context(), operations.EventRef{ID: id})
	if err != nil {
		return err
	}
	d := eventData{EventDetail: det, Replayed: replayedNote(r.URL.Query())}
	d.Body, d.BodyFrom, d.BodyNote = s.body(r, &det.Event)
	return s.render(w, r, nil, "event", fmt.Sprintf("Event %d", id), d)
}

// pathEventID reads the event id of /events/{id}/...; a path that names
// no event is a page that does not exist.
func pathEventID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, inbox.Errorf(inbox.CauseEventNotFound, "not an event id: %q", inbox.EscapeControls(r.PathValue("id"), ""))
	}
	return id, nil
}

// body is e's body as the page shows it, or why it is not shown: the
// event page stands without its body.
func (s *Server) body(r *http.Request, e *operations.Event) (body, from, note string) {
	if e.ExpungedAt != nil {
		return "", "", "the body was expunged (erased on request)"
	}
	if e.BodyExpiredAt != nil {
		return "", "", "the body was removed on " + operations.Stamp(e.BodyExpiredAt) + ", past the body retention (its row, id and hash stay)"
	}
	b, err := s.api.EventBody(r.Context(), e.ID)
	switch {
	case err == nil:
		return pretty(b.Bytes), b.From, ""
	case inbox.CauseOf(err) == inbox.CauseArchiveNotConfigured:
		return "", "", "the body is archived, and the console has no archive settings: " + messageOf(err)
	}
	s.log.Warn("console: body unreadable", "event", e.ID, "cause", inbox.CauseOf(err), "err", err)
	return "", "", messageOf(err)
}

// pretty is the body as shown: JSON indented, other UTF-8 text as is,
// anything else described.
func pretty(body []byte) string {
	var buf bytes.Buffer
	if json.Valid(body) && json.Indent(&buf, body, "", "  ") == nil {
		return buf.String()
	}
	if utf8.Valid(body) {
		return string(body)
	}
	return fmt.Sprintf("(%d bytes, not UTF-8 text: webhookctl events show --body-out FILE writes them)", len(body))
}
