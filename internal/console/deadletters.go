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

// The open dead letters (API.DeadLetters) and their requeue
// (API.Requeue: counted, then confirmed, bulk.go); their resolve is in
// resolve.go.

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
	// Causes are the causes the cause filter suggests.
	Causes []string
	Error  string
}

func (d deadLettersData) at() time.Time { return d.Now }

// deadLetters lists a page of the open dead letters, in the order they
// died.
func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) error {
	qs := r.URL.Query()
	d := deadLettersData{Form: qs, Requeued: qs.Get("requeued"), Resolved: qs.Get("resolved"), Causes: attemptCauses}
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

// requeue is two POSTs (bulkAction): the first (no confirm) counts what
// the selection touches (a dry run) and asks to confirm; the second, with
// confirm and the count the operator saw, requeues them.
func (s *Server) requeue(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	form := r.PostForm
	sel, err := requeueSelection(form)
	if err != nil {
		return err
	}
	d := confirmData{DeadLetterSelection: sel, Fields: selectionValues(sel)}
	res, ran, err := bulkAction{
		what: "requeue",
		call: func(dry bool, expect *int, cont *operations.ActionCursor) (bulkCall, error) {
			res, err := s.api.Requeue(ctx, operations.RequeueRequest{Select: sel, DryRun: dry, Expect: expect, Reason: s.cfg.Reason, Continue: cont})
			if err != nil {
				return bulkCall{}, err
			}
			return bulkCall{res.Matched, res.Events, res.ActionID, res.Next}, nil
		},
		ask: func(count int, changed error) error {
			d.Count, d.Changed = count, changed != nil
			return s.render(w, r, changed, "confirm", "Requeue dead letters", d)
		},
	}.run(form)
	if err != nil || !ran {
		return err
	}
	s.log.Info("console: dead letters requeued", "operator", s.who, "events", res.done, "action_id", res.actionID, "dead_letter", sel.ID,
		"source", sel.Source, "event_type", sel.Type, "all", sel.All)
	v := url.Values{}
	if sel.ID == 0 {
		v = operatorapi.DeadLettersValues(operations.DeadLetterQuery{Source: sel.Source, Type: sel.Type, Window: sel.Window, Criteria: sel.Criteria})
	}
	v.Set("requeued", strconv.Itoa(res.done))
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
