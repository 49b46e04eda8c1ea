package console

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
)

// The bulk resolve of the dead letters (API.Resolve): two POSTs behind
// Server.action (bulk.go); the first counts (a dry run) and asks to
// confirm, the second, with the count seen and the reason, closes them.

// resolveData is the resolve's confirmation page.
type resolveData struct {
	Now time.Time
	operations.DeadLetterSelection
	// Fields are the selection as the confirmation form's hidden fields.
	Fields url.Values
	// Reason is what the operator typed (else the console's --reason),
	// carried to the confirmation.
	Reason  string
	Count   int
	Changed bool
}

func (d resolveData) at() time.Time { return d.Now }

// resolve is two POSTs (bulkAction): the first counts what the selection
// closes and asks to confirm; the second, with confirm, the count seen and
// the reason, resolves them.
func (s *Server) resolve(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	form := r.PostForm
	sel, err := requeueSelection(form)
	if err != nil {
		return err
	}
	reason := s.reasonOf(form)
	d := resolveData{DeadLetterSelection: sel, Fields: selectionValues(sel), Reason: reason}
	res, ran, err := bulkAction{
		what: "resolve",
		call: func(dry bool, expect *int, cont *operations.ActionCursor) (bulkCall, error) {
			res, err := s.api.Resolve(ctx, operations.ResolveRequest{Select: sel, DryRun: dry, Expect: expect, Reason: reason, Continue: cont})
			if err != nil {
				return bulkCall{}, err
			}
			return bulkCall{res.Matched, res.Resolved, res.ActionID, res.Next}, nil
		},
		ask: func(count int, changed error) error {
			d.Count, d.Changed = count, changed != nil
			return s.render(w, r, changed, "resolve", "Resolve dead letters", d)
		},
	}.run(form)
	if err != nil || !ran {
		return err
	}
	s.log.Info("console: dead letters resolved", "operator", s.who, "events", res.done, "action_id", res.actionID,
		"dead_letter", sel.ID, "source", sel.Source, "event_type", sel.Type, "cause", sel.Cause, "all", sel.All)
	v := url.Values{}
	if sel.ID == 0 {
		v = operatorapi.DeadLettersValues(operations.DeadLetterQuery{Source: sel.Source, Type: sel.Type, Window: sel.Window, Criteria: sel.Criteria})
	}
	v.Set("resolved", strconv.Itoa(res.done))
	return redirect(w, r, "/dead-letters", v)
}
