package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
)

// The replay (API.Replay): like the requeue, two POSTs behind
// Server.action; the first counts (a dry run) and changes nothing, the
// second, with the operator's confirmation, replays, recorded as an
// operator action by the API.

// replayData is the replay's confirmation page.
type replayData struct {
	Now time.Time
	operations.ReplaySelection
	// Count is what the replay resets; Archived the part of it whose
	// bodies the processor reads back from S3.
	Count    int
	Archived int
	// Changed: the count differs from the one the operator confirmed.
	Changed bool
}

func (d replayData) at() time.Time { return d.Now }

// replaySelection reads the replay's selection from the form: an event's
// id, or the events list's filter. The list filters on the time of receipt
// and on states, and a replay selects processed events by source, type and
// time of processing: a filter with a state or a time window is refused
// rather than replaying something other than the list shows.
func replaySelection(form url.Values) (operations.ReplaySelection, error) {
	if strings.TrimSpace(form.Get("id")) != "" {
		ref, err := operatorapi.ParseEvent(url.Values{"id": form["id"]})
		return operations.ReplaySelection{ID: ref.ID}, err
	}
	for _, k := range []string{"state", "since", "from", "to"} {
		if strings.TrimSpace(form.Get(k)) != "" {
			return operations.ReplaySelection{}, inbox.Errorf(inbox.CauseInvalidArgument,
				"a replay takes the processed events (archived ones too) of a source or a type: clear the state and time filters, "+
					"or use `webhookctl replay --from/--to` for a window of processing time")
		}
	}
	sel := operations.ReplaySelection{Source: strings.TrimSpace(form.Get("source")), Type: strings.TrimSpace(form.Get("type"))}
	sel.All = sel.Source == "" && sel.Type == "" && form.Get("all") == "1"
	return sel, nil
}

// replay is two POSTs, as requeue: the first counts (a dry run) and asks
// to confirm; the second, with confirm and the count seen, replays,
// unless the count changed in between (count_changed: it asks again). A
// replay larger than one call (operations.ReplayPerCall) goes on, call
// after call, within the confirmed POST.
func (s *Server) replay(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	form := r.PostForm
	sel, err := replaySelection(form)
	if err != nil {
		return err
	}
	d := replayData{ReplaySelection: sel}
	ask := func(changed error) error {
		dry, err := s.api.Replay(ctx, operations.ReplayRequest{Select: sel, DryRun: true})
		if err != nil {
			return err
		}
		d.Count, d.Archived, d.Changed = dry.Matched, dry.Archived, changed != nil
		return s.render(w, r, changed, "replay", "Replay events", d)
	}
	if form.Get("confirm") != "yes" {
		return ask(nil)
	}
	seen, err := confirmedCount(form)
	var res *operations.ReplayResult
	if err == nil {
		res, err = s.api.Replay(ctx, operations.ReplayRequest{Select: sel, Expect: &seen, Reason: s.cfg.Reason})
	}
	if err != nil {
		if inbox.CauseOf(err) == inbox.CauseCountChanged {
			return ask(err)
		}
		return err
	}
	// The first call's counts are the whole replay's.
	matched, archived, replayed := res.Matched, res.Archived, res.Replayed
	for next := res.Next; next != nil; next = res.Next {
		res, err = s.api.Replay(ctx, operations.ReplayRequest{Select: sel, Continue: next, Reason: s.cfg.Reason})
		if err != nil {
			return inbox.WrapError(inbox.CauseOf(err), err, fmt.Sprintf(
				"the replay stopped after %d of its %d events (recorded as operator action %d): %s",
				replayed, matched, next.ActionID, messageOf(err)))
		}
		replayed += res.Replayed
	}
	s.log.Info("console: events replayed", "operator", s.who, "events", replayed, "archived", archived,
		"action_id", res.ActionID, "event", sel.ID, "source", sel.Source, "event_type", sel.Type, "all", sel.All)
	if sel.ID != 0 {
		return redirect(w, r, fmt.Sprintf("/events/%d", sel.ID), replayedValues(url.Values{}, replayed, archived))
	}
	list := operatorapi.EventsValues(operations.EventQuery{Source: sel.Source, Type: sel.Type})
	return redirect(w, r, "/events", replayedValues(list, replayed, archived))
}

// replayedValues adds to v what replayedNote says.
func replayedValues(v url.Values, replayed, archived int) url.Values {
	v.Set("replayed", strconv.Itoa(replayed))
	v.Set("archived", strconv.Itoa(archived))
	return v
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
