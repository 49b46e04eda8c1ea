package console

import (
	"fmt"
	"net/http"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// The expunge (API.Expunge) of one event's body, from its page: what it
// erases is shown first (a dry run), and it runs once the operator types
// the sender's event id again.

// expungeData is the expunge's confirmation page, and its report.
type expungeData struct {
	// Plan is what the expunge erases (a dry run), or, Done, what it
	// erased.
	Plan *operations.ExpungeResult
	Done bool
	// Mistyped: the event id typed does not name this event.
	Mistyped bool
}

// confirmField carries the event id the operator types to confirm.
const confirmField = "confirm_event_id"

// expunge erases one event's body everywhere: the first POST says what it
// erases and asks for the sender's event id to be typed; the second, with
// that id exactly, expunges it (Postgres, the archive object, the
// bucket's older versions and orphans) and shows the report. A mistyped
// id asks again and erases nothing. The API needs the archive's settings
// to expunge (archive_not_configured otherwise), even for an event never
// archived, since the bucket is searched for copies.
func (s *Server) expunge(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	id, err := pathEventID(r)
	if err != nil {
		return err
	}
	ref := operations.EventRef{ID: id}
	plan, err := s.api.Expunge(ctx, operations.ExpungeRequest{Event: ref, DryRun: true})
	if err != nil {
		return err
	}
	d := expungeData{Plan: plan}
	title := fmt.Sprintf("Expunge event %d", id)
	typed, asked := r.PostForm[confirmField]
	if !asked {
		return s.render(w, r, nil, "expunge", title, d)
	}
	if len(typed) != 1 || typed[0] != plan.EventID {
		d.Mistyped = true
		// Like a count that changed: what was confirmed is not what the
		// action would change, so nothing is.
		return s.render(w, r, inbox.Errorf(inbox.CauseConfirmationMismatch, "the event id typed is not this event's: nothing was erased"), "expunge", title, d)
	}
	done, err := s.api.Expunge(ctx, operations.ExpungeRequest{Event: ref, Reason: s.cfg.Reason})
	if err != nil {
		return err
	}
	s.log.Info("console: event expunged", "operator", s.who, "event", id, "source", done.Source, "event_id", done.EventID,
		"attempt_errors", done.AttemptErrors, "dead_letters", done.DeadLetterCopies, "orphans_deleted", len(done.OrphanObjects), "versions_deleted", done.ObjectVersions)
	d.Plan, d.Done = done, true
	return s.render(w, r, nil, "expunge", fmt.Sprintf("Event %d expunged", id), d)
}
