package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// Pause and resume (API.Pause, API.Resume): a form on the overview, one
// POST each, behind Server.action. Neither needs a confirmation page:
// both are undone by the other, and each is recorded as an operator
// action by the API; the overview then says what it held or released.

// pauseRequest reads a pause's or a resume's form: scope (source or
// handler), name (the source's name, or the route as `webhookctl
// handlers` prints it) and, for a pause, a reason (else the console's
// --reason).
func (s *Server) pauseRequest(form url.Values) operations.PauseRequest {
	reason := strings.TrimSpace(form.Get("reason"))
	if reason == "" {
		reason = s.cfg.Reason
	}
	return operations.PauseRequest{Scope: inbox.PauseScope(form.Get("scope")), Name: form.Get("name"), Reason: reason}
}

// pause pauses a source or a handler and goes back to the overview,
// which shows it paused.
func (s *Server) pause(w http.ResponseWriter, r *http.Request) error {
	return s.pauseOrResume(w, r, true)
}

// resume resumes a source or a handler and goes back to the overview.
func (s *Server) resume(w http.ResponseWriter, r *http.Request) error {
	return s.pauseOrResume(w, r, false)
}

func (s *Server) pauseOrResume(w http.ResponseWriter, r *http.Request, pause bool) error {
	req := s.pauseRequest(r.PostForm)
	call, done := s.api.Pause, "paused"
	if !pause {
		call, done = s.api.Resume, "resumed"
	}
	res, err := call(r.Context(), req)
	if err != nil {
		return err
	}
	s.log.Info("console: "+string(res.Scope)+" "+done, "operator", s.who, "scope", res.Scope, "name", res.Name, "events", res.Events, "action_id", res.ActionID)
	return redirect(w, r, "/", url.Values{"done": {done}, "scope": {string(res.Scope)}, "name": {res.Name}, "events": {strconv.Itoa(res.Events)}})
}

// pauseNote is the notice the overview shows after a pause or a resume
// redirected to it ("" for anything else).
func pauseNote(qs url.Values) string {
	n, err := strconv.Atoi(qs.Get("events"))
	scope, name := inbox.PauseScope(qs.Get("scope")), qs.Get("name")
	if err != nil || n < 0 || (scope != inbox.PauseSource && scope != inbox.PauseHandler) || name == "" {
		return ""
	}
	what := fmt.Sprintf("%s %s", scope, name)
	switch {
	case qs.Get("done") == "paused" && scope == inbox.PauseHandler:
		return fmt.Sprintf("Paused %s: its events are held as the processor meets them.", what)
	case qs.Get("done") == "paused":
		return fmt.Sprintf("Paused %s: %d waiting %s held; new ones are stored and wait.", what, n, plural(n, "event", "events"))
	case qs.Get("done") == "resumed":
		return fmt.Sprintf("Resumed %s: %d %s released, due at their time or at once.", what, n, plural(n, "event", "events"))
	}
	return ""
}
