package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The replay and expunge actions. Like the requeue (pages.go) each is two
// POSTs behind Server.action (read-only, CSRF, and cross-origin checks):
// the first shows what the action touches and changes nothing; the second,
// with the operator's confirmation, does it, recorded as an operator action
// by storage (replay) or by the archive (expunge).

// --- Replay ---

// replayData is the replay's confirmation page.
type replayData struct {
	Now time.Time
	// ID is one event (from its page); else the events list's filter.
	ID     int64
	Source string
	Type   string
	All    bool
	// Count is what the replay resets; Archived the part of it whose
	// bodies the processor reads back from S3.
	Count    int
	Archived int
	// Changed: the count differs from the one the operator confirmed.
	Changed bool
}

func (d replayData) at() time.Time { return d.Now }

// replayFilter reads the replay's selection from the form: an event's id,
// or the events list's filter. The list filters on the time of receipt and
// on states, and a replay selects processed events by source, type and
// time of processing: a filter with a state or a time window is refused
// rather than replaying something other than the list shows.
func replayFilter(form url.Values) (storage.ReplayFilter, string) {
	var f storage.ReplayFilter
	if id := form.Get("id"); id != "" {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n <= 0 {
			return f, "not an event's id"
		}
		f.ID = n
		return f, ""
	}
	if form.Get("state") != "" || form.Get("since") != "" || form.Get("from") != "" || form.Get("to") != "" {
		return f, "a replay takes the processed events (archived ones too) of a source or a type: clear the state and time filters, " +
			"or use `webhookctl replay --from/--to` for a window of processing time"
	}
	f.Source, f.EventType = strings.TrimSpace(form.Get("source")), strings.TrimSpace(form.Get("type"))
	f.All = f.Source == "" && f.EventType == "" && form.Get("all") == "1"
	return f, ""
}

// replay is two POSTs, as requeue: the first counts (a dry run) and asks to
// confirm; the second, with confirm and the count seen, replays, unless
// the count changed in between (409, asking again).
func (s *Server) replay(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	form := r.PostForm
	f, bad := replayFilter(form)
	if bad != "" {
		s.message(w, r, http.StatusBadRequest, "Replay", bad)
		return
	}
	d := replayData{ID: f.ID, Source: f.Source, Type: f.EventType, All: f.All}
	var err error
	if d.Now, err = s.cfg.Store.PGNow(ctx); err != nil {
		s.fail(w, err)
		return
	}
	dry, err := s.cfg.Store.EventReplay(ctx, f, storage.ReplayOptions{Now: d.Now, DryRun: true})
	if errors.Is(err, storage.ErrEmptyReplayFilter) {
		s.message(w, r, http.StatusBadRequest, "Replay", "choose an event, a source or a type, or every processed event")
		return
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	d.Count, d.Archived = dry.Matched, dry.Archived
	if form.Get("confirm") != "yes" {
		s.render(w, r, http.StatusOK, "replay", "Replay events", d)
		return
	}
	if seen, err := strconv.Atoi(form.Get("count")); err != nil || seen != d.Count {
		d.Changed = true
		s.render(w, r, http.StatusConflict, "replay", "Replay events", d)
		return
	}
	res, err := s.cfg.Store.EventReplay(ctx, f, storage.ReplayOptions{Now: d.Now, By: s.cfg.Actor})
	if err != nil {
		s.fail(w, err)
		return
	}
	s.log.Info("console: events replayed", "actor", s.cfg.Actor.Name, "events", res.Replayed, "archived", res.Archived,
		"action_id", res.ActionID, "event", f.ID, "source", f.Source, "event_type", f.EventType)
	v := url.Values{"replayed": {strconv.Itoa(res.Replayed)}, "archived": {strconv.Itoa(res.Archived)}}
	if f.ID != 0 {
		http.Redirect(w, r, fmt.Sprintf("/events/%d?%s", f.ID, v.Encode()), http.StatusSeeOther)
		return
	}
	for k, s := range map[string]string{"source": f.Source, "type": f.EventType} {
		if s != "" {
			v.Set(k, s)
		}
	}
	http.Redirect(w, r, "/events?"+v.Encode(), http.StatusSeeOther)
}

// replayable reports whether the events list's filter q can be replayed
// as it stands (replayFilter accepts it), so the page offers the button.
func (q eventsQuery) Replayable() bool {
	return q.State == "" && q.Since == "" && q.From == "" && q.To == ""
}

// replayedNote is the notice a page shows after a replay redirected to it.
func replayedNote(qs url.Values) string {
	n, err := strconv.Atoi(qs.Get("replayed"))
	if err != nil || n < 0 {
		return ""
	}
	note := fmt.Sprintf("Replayed %d %s: due now.", n, plural(n, "event", "events"))
	if a, err := strconv.Atoi(qs.Get("archived")); err == nil && a > 0 {
		note += fmt.Sprintf(" %d of them archived: the processor reads their bodies back from S3.", a)
	}
	return note
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// --- Expunge ---

// expungeData is the expunge's confirmation page, and its report.
type expungeData struct {
	Now   time.Time
	Event *inbox.Event
	// Mistyped: the event id typed does not name this event.
	Mistyped bool
	// NoArchive: the console has no archive settings, so it cannot expunge.
	NoArchive string
	// Done is the report once erased.
	Done *archive.ExpungeReport
	// NotReached lists the copies expunge cannot erase.
	NotReached []string
}

func (d expungeData) at() time.Time { return d.Now }

// confirmField carries the event id the operator types to confirm.
const confirmField = "confirm_event_id"

// expunge erases one event's body everywhere: the first POST says what it
// erases and asks for the sender's event id to be typed; the second, with
// that id exactly, expunges it through the archive (Postgres, the archive
// object, the bucket's older versions and orphans) and shows the report.
// A mistyped id asks again (409) and erases nothing.
func (s *Server) expunge(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.message(w, r, http.StatusNotFound, "No such event", "not an event id")
		return
	}
	d := expungeData{NotReached: archive.Unreachable}
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
	title := fmt.Sprintf("Expunge event %d", id)
	if s.cfg.Archiver == nil {
		d.NoArchive = "the console has no archive settings: start it with the archiver's ARCHIVE_BUCKET, ARCHIVE_PREFIX and S3 settings to expunge (the bucket is searched for copies even of an event never archived)"
		s.render(w, r, http.StatusServiceUnavailable, "expunge", title, d)
		return
	}
	typed, asked := r.PostForm[confirmField]
	if !asked {
		s.render(w, r, http.StatusOK, "expunge", title, d)
		return
	}
	if len(typed) != 1 || typed[0] != d.Event.EventID {
		d.Mistyped = true
		s.render(w, r, http.StatusConflict, "expunge", title, d)
		return
	}
	a, err := s.cfg.Archiver(ctx)
	if err != nil {
		s.log.Error("console: the archive cannot be opened", "err", err)
		s.message(w, r, http.StatusServiceUnavailable, title, "the archive cannot be opened: see the console's log")
		return
	}
	rep, err := a.Expunge(ctx, d.Event.Source, d.Event.EventID, s.cfg.Actor)
	if err != nil {
		s.log.Error("console: expunge failed", "source", d.Event.Source, "event_id", d.Event.EventID, "err", err)
		s.message(w, r, http.StatusInternalServerError, title,
			"the expunge did not finish (see the console's log); running it again is safe and finishes the job")
		return
	}
	s.log.Info("console: event expunged", "actor", s.cfg.Actor.Name, "source", d.Event.Source, "event_id", d.Event.EventID,
		"attempt_errors", rep.AttemptErrors, "dead_letters", rep.DeadLetters, "orphans_deleted", len(rep.Orphans), "versions_deleted", rep.Versions)
	d.Done = &rep
	if d.Event, err = s.cfg.Store.EventGetByID(ctx, id); err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, r, http.StatusOK, "expunge", fmt.Sprintf("Event %d expunged", id), d)
}
