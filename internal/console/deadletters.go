package console

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
)

// The open dead letters (API.DeadLetters) and their requeue
// (API.Requeue: counted, then confirmed); their resolve is in resolve.go.

type deadLettersData struct {
	Now time.Time
	// Form is the filter as the operator typed it, shown back in the form.
	Form        url.Values
	DeadLetters []operations.DeadLetter
	// Filtered: the list has a filter; Selection is it as the requeue
	// form's hidden fields (the same keys).
	Filtered  bool
	Selection url.Values
	// Next is the address of the next page (keyset: after the last dead
	// letter shown), "" on the last.
	Next     template.URL
	Requeued string
	// Resolved is how many events a resolve that redirected here closed.
	Resolved string
	Error    string
}

func (d deadLettersData) at() time.Time { return d.Now }

// deadLetters lists a page of the open dead letters, in the order they
// died.
func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) error {
	qs := r.URL.Query()
	d := deadLettersData{Form: qs, Requeued: qs.Get("requeued"), Resolved: qs.Get("resolved")}
	if _, err := strconv.Atoi(d.Requeued); err != nil {
		d.Requeued = ""
	}
	if _, err := strconv.Atoi(d.Resolved); err != nil {
		d.Resolved = ""
	}
	q, err := operatorapi.ParseDeadLetters(qs)
	var p *operations.DeadLetterPage
	if err == nil {
		p, err = s.api.DeadLetters(r.Context(), q)
	}
	if err != nil {
		if !inPlace(err) {
			return err
		}
		d.Error = messageOf(err)
		return s.render(w, r, err, "dead_letters", "Dead letters", d)
	}
	d.Now, d.DeadLetters = p.At, p.DeadLetters
	sel := operations.DeadLetterSelection{ID: q.ID, Source: q.Source, Type: q.Type, Window: q.Window, Criteria: q.Criteria}
	d.Filtered = sel.ID != 0 || sel.Source != "" || sel.Type != "" || !sel.Window.IsZero() || len(sel.IDs) > 0 ||
		sel.Cause != "" || sel.Error != "" || !sel.Received.IsZero()
	sel.All = !d.Filtered
	d.Selection = selectionValues(sel)
	if p.NextAfter != nil {
		q.After = *p.NextAfter
		d.Next = template.URL("/dead-letters?" + operatorapi.DeadLettersValues(q).Encode())
	}
	return s.render(w, r, nil, "dead_letters", "Dead letters", d)
}

// selectionValues writes a requeue's selection as its form's fields: the
// dead letters list's keys, and all=1.
func selectionValues(sel operations.DeadLetterSelection) url.Values {
	v := operatorapi.DeadLettersValues(operations.DeadLetterQuery{ID: sel.ID, Source: sel.Source, Type: sel.Type, Window: sel.Window, Criteria: sel.Criteria})
	if sel.All {
		v.Set("all", "1")
	}
	return v
}

// requeueSelection reads a requeue's selection from its form: a dead
// letter's id, or a filter of the list (the same keys), or all=1.
func requeueSelection(form url.Values) (operations.DeadLetterSelection, error) {
	q, err := operatorapi.ParseDeadLetters(form)
	sel := operations.DeadLetterSelection{ID: q.ID, Source: q.Source, Type: q.Type, Window: q.Window, Criteria: q.Criteria, All: form.Get("all") == "1"}
	return sel, err
}

// confirmData is the requeue's confirmation page.
type confirmData struct {
	Now time.Time
	operations.DeadLetterSelection
	// Fields are the selection as the confirmation form's hidden fields.
	Fields url.Values
	Count  int
	// Changed: the count differs from the one the operator confirmed.
	Changed bool
}

func (d confirmData) at() time.Time { return d.Now }

// requeue is two POSTs: the first (no confirm) counts what the selection
// touches (a dry run) and asks to confirm; the second, with confirm and
// the count the operator saw, requeues them, unless the count changed in
// between (count_changed: it asks again with the new count).
func (s *Server) requeue(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	form := r.PostForm
	sel, err := requeueSelection(form)
	if err != nil {
		return err
	}
	d := confirmData{DeadLetterSelection: sel, Fields: selectionValues(sel)}
	ask := func(changed error) error {
		res, err := s.api.Requeue(ctx, operations.RequeueRequest{Select: sel, DryRun: true})
		if err != nil {
			return err
		}
		d.Count, d.Changed = res.Events, changed != nil
		return s.render(w, r, changed, "confirm", "Requeue dead letters", d)
	}
	if form.Get("confirm") != "yes" {
		return ask(nil)
	}
	seen, err := confirmedCount(form)
	var res *operations.RequeueResult
	if err == nil {
		res, err = s.api.Requeue(ctx, operations.RequeueRequest{Select: sel, Expect: &seen, Reason: s.cfg.Reason})
	}
	if err != nil {
		if inbox.CauseOf(err) == inbox.CauseCountChanged {
			return ask(err)
		}
		return err
	}
	matched, requeued := res.Matched, res.Events
	for next := res.Next; next != nil; next = res.Next {
		if res, err = s.api.Requeue(ctx, operations.RequeueRequest{Continue: next, Reason: s.cfg.Reason}); err != nil {
			return inbox.WrapError(inbox.CauseOf(err), err, fmt.Sprintf(
				"the requeue stopped after %d of its %d events (recorded as operator action %d): %s",
				requeued, matched, next.ActionID, messageOf(err)))
		}
		requeued += res.Events
	}
	s.log.Info("console: dead letters requeued", "operator", s.who, "events", requeued, "action_id", res.ActionID, "dead_letter", sel.ID,
		"source", sel.Source, "event_type", sel.Type, "all", sel.All)
	v := url.Values{}
	if sel.ID == 0 {
		v = operatorapi.DeadLettersValues(operations.DeadLetterQuery{Source: sel.Source, Type: sel.Type, Window: sel.Window, Criteria: sel.Criteria})
	}
	v.Set("requeued", strconv.Itoa(requeued))
	return redirect(w, r, "/dead-letters", v)
}

// confirmedCount is the count the operator confirmed (the form's count);
// a form without one confirmed nothing, which is asked again.
func confirmedCount(form url.Values) (int, error) {
	n, err := strconv.Atoi(form.Get("count"))
	if err != nil {
		return 0, inbox.Errorf(inbox.CauseCountChanged, "the confirmation carries no count: count again")
	}
	return n, nil
}
