package console

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// The two POSTs the bulk actions that lose something for good share (the
// dead letters' resolve, the events' discard, the quarantine's purge):
// count and ask, then act on the count the operator saw. Each action says
// how one call of it is made and how its confirmation page is drawn; the
// order of the steps, the stale count and the calls that continue a large
// action are written here once.

// bulkCall is one call of a bulk action, reduced to what the two POSTs
// need: the selection's count (a first call's), what the call changed,
// its record, and where the next call goes on (nil: done).
type bulkCall struct {
	matched, done int
	actionID      int64
	next          *operations.ActionCursor
}

// bulkAction is a bulk action as its two POSTs run it.
type bulkAction struct {
	// what names the action in the error of one stopped half-way
	// ("resolve").
	what string
	// call is one call of the action: a dry run (dry: count only), the
	// first call with the count the operator confirmed (expect), or one
	// that continues the action (cont).
	call func(dry bool, expect *int, cont *operations.ActionCursor) (bulkCall, error)
	// ask draws the confirmation with the selection's count; changed is
	// the count_changed refusal when the selection moved since the
	// operator looked (the page then says so), else nil.
	ask func(count int, changed error) error
}

// run answers the form: without confirm=yes it counts what the selection
// takes (a dry run, nothing changes) and asks to confirm; with it and the
// count the operator saw, it acts, call after call under one record for a
// large action, unless the count changed in between (count_changed: it
// counts again and asks again, having changed nothing). ran is false when
// it only asked; total is then zero.
func (b bulkAction) run(form url.Values) (total bulkCall, ran bool, err error) {
	ask := func(changed error) error {
		c, err := b.call(true, nil, nil)
		if err != nil {
			return err
		}
		return b.ask(c.matched, changed)
	}
	if form.Get("confirm") != "yes" {
		return total, false, ask(nil)
	}
	seen, err := confirmedCount(form)
	if err == nil {
		total, err = b.call(false, &seen, nil)
	}
	if err != nil {
		if inbox.CauseOf(err) == inbox.CauseCountChanged {
			return bulkCall{}, false, ask(err)
		}
		return bulkCall{}, false, err
	}
	for next := total.next; next != nil; {
		more, err := b.call(false, nil, next)
		if err != nil {
			// What was done is done and on record: say how far it got.
			return total, false, inbox.WrapError(inbox.CauseOf(err), err, fmt.Sprintf(
				"the %s stopped after %d of its %d events (recorded as operator action %d): %s",
				b.what, total.done, total.matched, next.ActionID, messageOf(err)))
		}
		total.done += more.done
		next = more.next
	}
	total.next = nil
	return total, true, nil
}

// reasonOf is the reason an action's form gives, else the console's
// (webhookctl's --reason).
func (s *Server) reasonOf(form url.Values) string {
	if reason := strings.TrimSpace(form.Get("reason")); reason != "" {
		return reason
	}
	return s.cfg.Reason
}
