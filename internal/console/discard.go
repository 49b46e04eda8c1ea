package console

import (
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
)

// The discard of unprocessed events (API.Discard) from the events list's
// filter: two POSTs behind Server.action (bulk.go), as the resolve; the
// first counts (a dry run) and asks to confirm, the second, with the count
// seen and the reason, finishes them without running them.

// discardValues writes a discard's selection as its form's fields. The
// criteria travel under the keys the operator API and the dead-letters
// list give them (cause, error, ids, received_since...), so that a
// criterion is written one way everywhere; the events list's window is
// the receipt window, received_*.
func discardValues(sel operations.DiscardSelection) url.Values {
	v := operatorapi.DeadLettersValues(operations.DeadLetterQuery{ID: sel.ID, Source: sel.Source, Type: sel.Type, Criteria: sel.Criteria})
	if sel.All {
		v.Set("all", "1")
	}
	return v
}

// discardSelection reads what discardValues writes. all=1 counts only
// when nothing else narrows the selection, so that a criterion typed on
// the unfiltered list narrows it rather than riding along with "every
// unprocessed event". A window of death (since, from, to) is the
// dead-letters list's, which a discard does not take: it is refused
// rather than ignored.
func discardSelection(form url.Values) (operations.DiscardSelection, error) {
	q, err := operatorapi.ParseDeadLetters(form)
	if err != nil {
		return operations.DiscardSelection{}, err
	}
	if !q.Window.IsZero() {
		return operations.DiscardSelection{}, inbox.Errorf(inbox.CauseInvalidArgument,
			"a discard's time window is when the events were received: received_since, received_from, received_to")
	}
	sel := operations.DiscardSelection{ID: q.ID, Source: q.Source, Type: q.Type, Criteria: q.Criteria}
	sel.All = sel.IsZero() && form.Get("all") == "1"
	return sel, nil
}

// eventsDiscard is the events list's filter as the discard form's hidden
// fields, or nil where a discard would not select what the list shows: a
// state (a discard takes every unprocessed state, never the others) or a
// search by content.
func eventsDiscard(q operations.EventQuery, searching bool) url.Values {
	if q.State != "" || searching {
		return nil
	}
	sel := operations.DiscardSelection{Source: q.Source, Type: q.Type, Criteria: operations.Criteria{Received: q.Window}}
	sel.All = sel.Source == "" && sel.Type == "" && sel.Received.IsZero()
	return discardValues(sel)
}

// discardData is the discard's confirmation page.
type discardData struct {
	Now time.Time
	operations.DiscardSelection
	// Fields are the selection as the confirmation form's hidden fields.
	Fields url.Values
	// Reason is what the operator typed (else the console's --reason).
	Reason  string
	Count   int
	Changed bool
	// Back is the events list the discard was asked from.
	Back template.URL
}

func (d discardData) at() time.Time { return d.Now }

// discard is two POSTs (bulkAction): the first counts the unprocessed
// events the selection finishes and asks to confirm; the second, with
// confirm, the count seen and the reason, discards them.
func (s *Server) discard(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	form := r.PostForm
	sel, err := discardSelection(form)
	if err != nil {
		return err
	}
	reason := s.reasonOf(form)
	list := operatorapi.EventsValues(operations.EventQuery{Source: sel.Source, Type: sel.Type, Window: sel.Received})
	d := discardData{DiscardSelection: sel, Fields: discardValues(sel), Reason: reason,
		Back: template.URL("/events?" + list.Encode())} // url.Values encoded: a safe URL
	res, ran, err := bulkAction{
		what: "discard",
		call: func(dry bool, expect *int, cont *operations.ActionCursor) (bulkCall, error) {
			res, err := s.api.Discard(ctx, operations.DiscardRequest{Select: sel, DryRun: dry, Expect: expect, Reason: reason, Continue: cont})
			if err != nil {
				return bulkCall{}, err
			}
			return bulkCall{res.Matched, res.Discarded, res.ActionID, res.Next}, nil
		},
		ask: func(count int, changed error) error {
			d.Count, d.Changed = count, changed != nil
			return s.render(w, r, changed, "discard", "Discard events", d)
		},
	}.run(form)
	if err != nil || !ran {
		return err
	}
	s.log.Info("console: events discarded", "operator", s.who, "events", res.done, "action_id", res.actionID,
		"event", sel.ID, "source", sel.Source, "event_type", sel.Type, "cause", sel.Cause, "all", sel.All)
	list.Set("discarded", strconv.Itoa(res.done))
	return redirect(w, r, "/events", list)
}

// discardedNote is the notice after a discard (discarded=N), or "".
func discardedNote(qs url.Values) string {
	n, err := strconv.Atoi(qs.Get("discarded"))
	if err != nil || n < 0 {
		return ""
	}
	return "Discarded " + strconv.Itoa(n) + " " + plural(n, "event", "events") + ": they will never run."
}
