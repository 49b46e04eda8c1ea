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

// The bulk resolve of the dead letters (API.Resolve): two POSTs behind
// Server.action, as the requeue; the first counts (a dry run) and asks to
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

// resolve is two POSTs: the first counts what the selection closes and
// asks to confirm; the second, with confirm, the count seen and the
// reason, resolves them, call after call for a large one, unless the count
// changed in between (count_changed: it asks again).
func (s *Server) resolve(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	form := r.PostForm
	sel, err := requeueSelection(form)
	if err != nil {
		return err
	}
	reason := strings.TrimSpace(form.Get("reason"))
	if reason == "" {
		reason = s.cfg.Reason
	}
	d := resolveData{DeadLetterSelection: sel, Fields: selectionValues(sel), Reason: reason}
	ask := func(changed error) error {
		res, err := s.api.Resolve(ctx, operations.ResolveRequest{Select: sel, DryRun: true})
		if err != nil {
			return err
		}
		d.Count, d.Changed = res.Matched, changed != nil
		return s.render(w, r, changed, "resolve", "Resolve dead letters", d)
	}
	if form.Get("confirm") != "yes" {
		return ask(nil)
	}
	seen, err := confirmedCount(form)
	var res *operations.ResolveResult
	if err == nil {
		res, err = s.api.Resolve(ctx, operations.ResolveRequest{Select: sel, Expect: &seen, Reason: reason})
	}
	if err != nil {
		if inbox.CauseOf(err) == inbox.CauseCountChanged {
			return ask(err)
		}
		return err
	}
	matched, resolved := res.Matched, res.Resolved
	for next := res.Next; next != nil; next = res.Next {
		if res, err = s.api.Resolve(ctx, operations.ResolveRequest{Continue: next, Reason: reason}); err != nil {
			return inbox.WrapError(inbox.CauseOf(err), err, fmt.Sprintf(
				"the resolve stopped after %d of its %d events (recorded as operator action %d): %s",
				resolved, matched, next.ActionID, messageOf(err)))
		}
		resolved += res.Resolved
	}
	s.log.Info("console: dead letters resolved", "operator", s.who, "events", resolved, "action_id", res.ActionID,
		"dead_letter", sel.ID, "source", sel.Source, "event_type", sel.Type, "cause", sel.Cause, "all", sel.All)
	v := url.Values{}
	if sel.ID == 0 {
		v = operatorapi.DeadLettersValues(operations.DeadLetterQuery{Source: sel.Source, Type: sel.Type, Window: sel.Window, Criteria: sel.Criteria})
	}
	v.Set("resolved", strconv.Itoa(resolved))
	return redirect(w, r, "/dead-letters", v)
}
