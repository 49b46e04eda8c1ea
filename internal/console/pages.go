package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var embedded embed.FS

// staticFS serves static/console.css as /static/console.css.
var staticFS fs.FS = embedded

// pageLimit is how many rows a list page shows.
const pageLimit = 50

// pages are the parsed templates, one per page, each with the layout.
type pages struct{ byName map[string]*template.Template }

var funcs = template.FuncMap{
	// clean escapes the control characters and bidi overrides of text
	// from senders and handlers (html/template escapes the HTML).
	"clean": func(s string) string { return inbox.EscapeControls(s, "\n\t") },
	"stamp": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return v.UTC().Format("2006-01-02 15:04:05")
		case *time.Time:
			if v == nil {
				return "-"
			}
			return v.UTC().Format("2006-01-02 15:04:05")
		}
		return "-"
	},
	"ago":   ago,
	"span":  span,
	"deref": func(t *time.Time) time.Time { return *t },
	"took": func(a inbox.Attempt) string {
		if a.FinishedAt == nil {
			return "-"
		}
		return a.FinishedAt.Sub(a.StartedAt).Round(time.Millisecond).String()
	},
}

func parsePages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}}
	for _, name := range []string{"overview", "refusals", "events", "event", "dead_letters", "confirm", "actions", "message", "replay", "expunge"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		p.byName[name] = t
	}
	return p, nil
}

// view is what every page's layout needs beside the page's own data.
type view struct {
	Title    string
	Nav      string
	CSRF     string
	ReadOnly bool
	Actor    string
	Now      time.Time
	Data     any
}

// render writes the page, or a 500 when it fails before a byte is sent.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	v := view{Title: title, Nav: name, CSRF: s.csrfToken(r), ReadOnly: s.cfg.ReadOnly, Actor: s.cfg.Actor.Name, Data: data}
	if now, ok := data.(interface{ at() time.Time }); ok {
		v.Now = now.at()
	}
	var buf bytes.Buffer
	if err := s.pages.byName[name].Execute(&buf, v); err != nil {
		s.fail(w, fmt.Errorf("render %s: %w", name, err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// fail answers 500 with a fixed text; the error goes to the log.
func (s *Server) fail(w http.ResponseWriter, err error) {
	s.log.Error("console: page failed", "err", err)
	http.Error(w, "the console could not read the database: see its log", http.StatusInternalServerError)
}

// message renders a page that only says something (a refusal, a result).
func (s *Server) message(w http.ResponseWriter, r *http.Request, status int, title, text string) {
	s.render(w, r, status, "message", title, struct{ Text string }{text})
}

// ago renders how long before now t was, coarsely.
func ago(now, t time.Time) string {
	d := now.Sub(t)
	suffix := " ago"
	if d < 0 {
		d, suffix = -d, " from now"
	}
	switch {
	case d >= time.Hour:
		d = d.Round(time.Minute)
	case d >= time.Minute:
		d = d.Round(time.Second)
	default:
		d = d.Round(100 * time.Millisecond)
	}
	return d.String() + suffix
}

// span renders a window: "1h", "30m", "1h30m", "24h", "7d" (whole days
// from two on).
func span(d time.Duration) string {
	if day := 24 * time.Hour; d >= 2*day && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// --- Events ---

// eventsQuery is the events page's filter, as its form sends it.
type eventsQuery struct {
	Source, Type, State, Since, From, To string
	Before                               int64
}

func (q eventsQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"source": q.Source, "type": q.Type, "state": q.State, "since": q.Since, "from": q.From, "to": q.To} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

type eventsData struct {
	Now    time.Time
	Query  eventsQuery
	States []string
	Events []*inbox.Event
	// Next is the address of the next (older) page, "" on the last:
	// url.Values encoded, so safe as a URL.
	Next  template.URL
	Error string
	// Replayed is the notice after a replay of the filter (actions.go).
	Replayed string
	// Found is the sender's id several sources have (the events listed).
	Found string
}

func (d eventsData) at() time.Time { return d.Now }

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	qs := r.URL.Query()
	q := eventsQuery{
		Source: strings.TrimSpace(qs.Get("source")), Type: strings.TrimSpace(qs.Get("type")), State: qs.Get("state"),
		Since: strings.TrimSpace(qs.Get("since")), From: strings.TrimSpace(qs.Get("from")), To: strings.TrimSpace(qs.Get("to")),
	}
	d := eventsData{Query: q, States: stateChoices(), Replayed: replayedNote(qs)}
	var err error
	if d.Now, err = s.cfg.Store.PGNow(ctx); err != nil {
		s.fail(w, err)
		return
	}
	// Find one event: by its id, or by its source and the sender's id.
	if find := strings.TrimSpace(qs.Get("find")); find != "" {
		s.find(w, r, d, find)
		return
	}
	f := storage.EventFilter{Source: q.Source, EventType: q.Type}
	if b := qs.Get("before"); b != "" {
		if f.BeforeID, err = strconv.ParseInt(b, 10, 64); err != nil || f.BeforeID <= 0 {
			d.Error = "before: not an event id"
		}
	}
	// "unhandled" is a state to an operator (processed, no handler took
	// it: the list of states), an outcome to storage.
	if q.State == string(inbox.OutcomeUnhandled) {
		f.Outcome = inbox.OutcomeUnhandled
	} else if f.State, err = inbox.ParseEventState(q.State); err != nil {
		d.Error = "state: " + err.Error()
	}
	if from, to, werr := window(d.Now, q.Since, q.From, q.To); werr != nil {
		d.Error = werr.Error()
	} else {
		f.CreatedFrom, f.CreatedTo = from, to
	}
	if d.Error != "" {
		s.render(w, r, http.StatusBadRequest, "events", "Events", d)
		return
	}
	if d.Events, err = s.cfg.Store.EventList(ctx, f, d.Now, pageLimit); err != nil {
		s.fail(w, err)
		return
	}
	if len(d.Events) == pageLimit {
		v := q.values()
		v.Set("before", strconv.FormatInt(d.Events[len(d.Events)-1].ID, 10))
		d.Next = template.URL("/events?" + v.Encode())
	}
	s.render(w, r, http.StatusOK, "events", "Events", d)
}

// find redirects to the event named by find: its id, or the sender's event
// id within the filter's source. Without a source, the sender's id is
// looked for in every source: one match opens it, several are listed.
func (s *Server) find(w http.ResponseWriter, r *http.Request, d eventsData, find string) {
	ctx := r.Context()
	var e *inbox.Event
	var err error
	if d.Query.Source != "" {
		e, err = s.cfg.Store.EventGetByKey(ctx, d.Query.Source, find)
	} else {
		err = storage.ErrEventNotFound
		if id, perr := strconv.ParseInt(find, 10, 64); perr == nil && id > 0 {
			e, err = s.cfg.Store.EventGetByID(ctx, id)
		}
		if errors.Is(err, storage.ErrEventNotFound) {
			var found []*inbox.Event
			if found, err = s.cfg.Store.EventListByEventID(ctx, find, pageLimit); err != nil {
				s.fail(w, err)
				return
			}
			switch len(found) {
			case 0:
				err = storage.ErrEventNotFound
			case 1:
				e = found[0]
			default:
				d.Events, d.Found = found, inbox.EscapeControls(find, "")
				s.render(w, r, http.StatusOK, "events", "Events", d)
				return
			}
		}
	}
	if errors.Is(err, storage.ErrEventNotFound) {
		d.Error = "no such event: " + inbox.EscapeControls(find, "")
		s.render(w, r, http.StatusNotFound, "events", "Events", d)
		return
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	http.Redirect(w, r, "/events/"+strconv.FormatInt(e.ID, 10), http.StatusSeeOther)
}

// window reads the time filter: since (a duration before now), or from
// and to (RFC 3339 times or dates); zero times are open ends.
func window(now time.Time, since, fromS, toS string) (from, to time.Time, err error) {
	if since != "" {
		d, err := time.ParseDuration(since)
		if err != nil || d <= 0 {
			return from, to, fmt.Errorf("since: %q is not a positive duration (2h, 30m)", since)
		}
		if fromS != "" {
			return from, to, errors.New("give since or from, not both")
		}
		from = now.Add(-d)
	}
	if fromS != "" {
		if from, err = parseTime(fromS); err != nil {
			return from, to, fmt.Errorf("from: %w", err)
		}
	}
	if toS != "" {
		if to, err = parseTime(toS); err != nil {
			return from, to, fmt.Errorf("to: %w", err)
		}
	}
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		return from, to, errors.New("the window is empty: from must be before to")
	}
	return from, to, nil
}

// parseTime reads RFC 3339 or a UTC date, as webhookctl's --from does.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-12-01T02:00:00Z) nor a date (2026-12-01)", inbox.EscapeControls(s, ""))
}

// --- One event ---

type eventData struct {
	Now         time.Time
	Event       *inbox.Event
	State       inbox.EventState
	History     []inbox.Attempt
	Actions     []inbox.OperatorAction
	DeadLetters []*inbox.DeadLetter
	Mismatches  []inbox.PayloadMismatch
	Metadata    [][2]string
	// Body is the body as shown (JSON indented); BodyFrom where it was
	// read ("postgres" or "archive"); BodyNote why it is not shown.
	Body, BodyFrom, BodyNote string
	// OpenDeadLetter is the event's open dead letter (0: none).
	OpenDeadLetter int64
	// Replayed is the notice after a replay of the event (actions.go).
	Replayed string
}

func (d eventData) at() time.Time { return d.Now }

func (s *Server) event(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.message(w, r, http.StatusNotFound, "No such event", "not an event id")
		return
	}
	d := eventData{Replayed: replayedNote(r.URL.Query())}
	if d.Now, err = s.cfg.Store.PGNow(ctx); err != nil {
		s.fail(w, err)
		return
	}
	d.Event, err = s.cfg.Store.EventGetByID(ctx, id)
	if errors.Is(err, storage.ErrEventNotFound) {
		s.message(w, r, http.StatusNotFound, "No such event", fmt.Sprintf("no event has the id %d", id))
		return
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	e := d.Event
	d.State = e.State(d.Now)
	if d.History, err = s.cfg.Store.AttemptListByEvent(ctx, id); err != nil {
		s.fail(w, err)
		return
	}
	if d.Actions, err = s.cfg.Store.OperatorActionListByEvent(ctx, id); err != nil {
		s.fail(w, err)
		return
	}
	if d.DeadLetters, err = s.cfg.Store.DeadLetterListByEvent(ctx, id); err != nil {
		s.fail(w, err)
		return
	}
	for _, dl := range d.DeadLetters {
		if dl.RequeuedAt == nil {
			d.OpenDeadLetter = dl.ID
		}
	}
	if d.Mismatches, err = s.cfg.Store.PayloadMismatchListByEvent(ctx, e.Source, e.EventID); err != nil {
		s.fail(w, err)
		return
	}
	for k, v := range e.Metadata {
		d.Metadata = append(d.Metadata, [2]string{k, v})
	}
	sortPairs(d.Metadata)
	body, from, berr := s.readBody(ctx, e)
	if berr != nil {
		d.BodyNote = berr.Error()
		if !errors.Is(berr, errExpunged) && !errors.Is(berr, errNoArchive) {
			s.log.Warn("console: body unreadable", "source", e.Source, "event_id", e.EventID, "err", berr)
		}
	} else {
		d.Body, d.BodyFrom = pretty(body), from
	}
	s.render(w, r, http.StatusOK, "event", fmt.Sprintf("Event %d", id), d)
}

func sortPairs(p [][2]string) {
	slices.SortFunc(p, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
}

var (
	errExpunged  = errors.New("the body was expunged (erased on request)")
	errNoArchive = errors.New("the body is archived, and the console has no archive settings (start it with the archiver's ARCHIVE_BUCKET and S3 settings)")
)

// readBody returns the raw body and where it came from: Postgres while it
// is there (checked against the hash recorded at receipt), else the
// archive through the archiver's reader, as `webhookctl events show` does.
func (s *Server) readBody(ctx context.Context, e *inbox.Event) ([]byte, string, error) {
	switch {
	case e.ExpungedAt != nil:
		return nil, "", errExpunged
	case e.Body != nil:
		sum := sha256.Sum256(e.Body)
		if len(e.Body) != e.BodySize || !bytes.Equal(sum[:], e.BodySHA256) {
			return nil, "", errors.New("the stored body does not match the hash recorded at receipt")
		}
		return e.Body, "postgres", nil
	case e.ArchiveKey == "":
		return nil, "", errors.New("the event has neither a body in Postgres nor an archive location")
	case s.cfg.Archiver == nil:
		return nil, "", errNoArchive
	}
	a, err := s.cfg.Archiver(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("the archive: %w", err)
	}
	body, err := a.Body(ctx, e)
	if err != nil {
		return nil, "", err
	}
	return body, "archive", nil
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

// --- Dead letters ---

type deadLettersData struct {
	Now         time.Time
	Source      string
	Type        string
	DeadLetters []*inbox.DeadLetter
	// Next is the address of the next page (keyset: after the last dead
	// letter shown), "" on the last.
	Next     template.URL
	Requeued string
	Error    string
}

func (d deadLettersData) at() time.Time { return d.Now }

func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	qs := r.URL.Query()
	d := deadLettersData{Source: strings.TrimSpace(qs.Get("source")), Type: strings.TrimSpace(qs.Get("type")), Requeued: qs.Get("requeued")}
	if _, err := strconv.Atoi(d.Requeued); err != nil {
		d.Requeued = ""
	}
	var err error
	if d.Now, err = s.cfg.Store.PGNow(ctx); err != nil {
		s.fail(w, err)
		return
	}
	var after int64
	if a := qs.Get("after"); a != "" {
		if after, err = strconv.ParseInt(a, 10, 64); err != nil || after < 0 {
			d.Error = "after: not a dead letter's id"
			s.render(w, r, http.StatusBadRequest, "dead_letters", "Dead letters", d)
			return
		}
	}
	f := storage.DeadLetterFilter{Source: d.Source, EventType: d.Type}
	if d.DeadLetters, err = s.cfg.Store.DeadLetterListPage(ctx, f, after, pageLimit+1); err != nil {
		s.fail(w, err)
		return
	}
	if len(d.DeadLetters) > pageLimit {
		d.DeadLetters = d.DeadLetters[:pageLimit]
		v := url.Values{"after": {strconv.FormatInt(d.DeadLetters[pageLimit-1].ID, 10)}}
		for k, s := range map[string]string{"source": d.Source, "type": d.Type} {
			if s != "" {
				v.Set(k, s)
			}
		}
		d.Next = template.URL("/dead-letters?" + v.Encode())
	}
	s.render(w, r, http.StatusOK, "dead_letters", "Dead letters", d)
}

// confirmData is the requeue's confirmation page.
type confirmData struct {
	Now    time.Time
	ID     int64
	Source string
	Type   string
	All    bool
	Count  int
	// Changed: the count differs from the one the operator confirmed.
	Changed bool
}

func (d confirmData) at() time.Time { return d.Now }

// requeue is two POSTs: the first (no confirm) counts what the selection
// touches and asks to confirm; the second, with confirm and the count the
// operator saw, requeues, unless the count changed in between (then it
// asks again).
func (s *Server) requeue(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	form := r.PostForm
	d := confirmData{Source: strings.TrimSpace(form.Get("source")), Type: strings.TrimSpace(form.Get("type")), All: form.Get("all") == "1"}
	if id := form.Get("id"); id != "" {
		var err error
		if d.ID, err = strconv.ParseInt(id, 10, 64); err != nil || d.ID <= 0 {
			s.message(w, r, http.StatusBadRequest, "Requeue", "not a dead letter's id")
			return
		}
	}
	f := storage.DeadLetterFilter{ID: d.ID, Source: d.Source, EventType: d.Type, All: d.All}
	var err error
	if d.Now, err = s.cfg.Store.PGNow(ctx); err != nil {
		s.fail(w, err)
		return
	}
	d.Count, err = s.cfg.Store.DeadLetterCountRequeueable(ctx, f)
	if errors.Is(err, storage.ErrEmptyFilter) {
		s.message(w, r, http.StatusBadRequest, "Requeue", "choose a dead letter, a source or type, or every open dead letter")
		return
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	if form.Get("confirm") != "yes" {
		s.render(w, r, http.StatusOK, "confirm", "Requeue dead letters", d)
		return
	}
	if seen, err := strconv.Atoi(form.Get("count")); err != nil || seen != d.Count {
		d.Changed = true
		s.render(w, r, http.StatusConflict, "confirm", "Requeue dead letters", d)
		return
	}
	n, err := s.cfg.Store.DeadLetterRequeue(ctx, f, d.Now, s.cfg.Actor)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.log.Info("console: dead letters requeued", "actor", s.cfg.Actor.Name, "events", n, "source", d.Source, "event_type", d.Type)
	v := url.Values{"requeued": {strconv.Itoa(n)}}
	if d.ID == 0 {
		for k, s := range map[string]string{"source": d.Source, "type": d.Type} {
			if s != "" {
				v.Set(k, s)
			}
		}
	}
	http.Redirect(w, r, "/dead-letters?"+v.Encode(), http.StatusSeeOther)
}

// --- Operator actions ---

type actionsData struct {
	Now     time.Time
	Actions []inbox.OperatorAction
	// Next is the address of the next (older) page, "" on the last.
	Next  template.URL
	Error string
}

func (d actionsData) at() time.Time { return d.Now }

func (s *Server) actions(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var d actionsData
	var err error
	if d.Now, err = s.cfg.Store.PGNow(ctx); err != nil {
		s.fail(w, err)
		return
	}
	var before int64
	if b := r.URL.Query().Get("before"); b != "" {
		if before, err = strconv.ParseInt(b, 10, 64); err != nil || before <= 0 {
			d.Error = "before: not an action's id"
			s.render(w, r, http.StatusBadRequest, "actions", "Operator actions", d)
			return
		}
	}
	if d.Actions, err = s.cfg.Store.OperatorActionListPage(ctx, time.Time{}, before, pageLimit+1); err != nil {
		s.fail(w, err)
		return
	}
	if len(d.Actions) > pageLimit {
		d.Actions = d.Actions[:pageLimit]
		d.Next = template.URL("/actions?before=" + strconv.FormatInt(d.Actions[pageLimit-1].ID, 10))
	}
	s.render(w, r, http.StatusOK, "actions", "Operator actions", d)
}

// stateChoices are the events list's state filter's options: the event
// states, and "unhandled" (processed without a handler) after processed.
func stateChoices() []string {
	var out []string
	for _, st := range inbox.EventStates() {
		out = append(out, string(st))
		if st == inbox.StateProcessed {
			out = append(out, string(inbox.OutcomeUnhandled))
		}
	}
	return out
}
