package console

import (
	"fmt"
	"net/http"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
)

// How errors become answers: a page returns its error, and one adapter
// (serve, fail) answers it with the status of the operator API's one
// table, operatorapi.StatusOf, so that the console, the operator function
// and its client say the same thing for the same cause. No page picks a
// status: a page that shows a refusal in place (a bad filter above its
// form, a confirmation asked again) renders with the error, and render
// takes the status from the same table.

// page is one of the console's pages: it writes its answer, or returns
// the error that keeps it from doing so.
type page func(w http.ResponseWriter, r *http.Request) error

// serve adapts a page to net/http: its error is answered by fail.
func (s *Server) serve(p page) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := p(w, r); err != nil {
			s.fail(w, r, err)
		}
	}
}

// fail answers err: with the table's status, as the message page to a
// signed-in operator, as one line of text before a session exists (a
// refusal then shows nothing of the console).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := s.logError(r, err)
	msg := messageOf(err)
	if !signedIn(r) {
		plain(w, status, msg)
		return
	}
	if rerr := s.write(w, r, status, "message", http.StatusText(status), messageData{Text: msg}); rerr != nil {
		s.log.Error("console: the error page failed", "err", rerr)
		plain(w, status, msg)
	}
}

// logError logs an error answered to r, and returns its status: a 5xx
// (the console's or the API's failure) with the error, for whoever
// investigates; anything else (a refusal) as a warning with its cause.
func (s *Server) logError(r *http.Request, err error) int {
	status := operatorapi.StatusOf(err)
	attrs := []any{"method", r.Method, "path", r.URL.Path, "status", status, "cause", inbox.CauseOf(err)}
	if status >= http.StatusInternalServerError {
		s.log.Error("console: request failed", append(attrs, "err", err)...)
	} else {
		s.log.Warn("console: request refused", append(attrs, "message", inbox.MessageOf(err), "err", err)...)
	}
	return status
}

// messageOf is what an operator is shown of err: its cause's message,
// never the wrapped error's text (which may quote a statement); a bug's
// (cause internal) is a pointer to the log.
func messageOf(err error) string {
	if inbox.CauseOf(err) == inbox.CauseInternal {
		return "internal error: the console's log has the details"
	}
	return inbox.MessageOf(err)
}

// messageData is the message page's: one text.
type messageData struct{ Text string }

// plain answers a line of text.
func plain(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintln(w, inbox.EscapeControls(msg, ""))
}
