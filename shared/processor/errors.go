package processor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return "permanent: " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err to say that the event can never be handled (a payload
// that does not decode, a reference that cannot exist): the processor moves
// it to the dead letters at once instead of retrying. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, came from
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// panicError is a handler's panic, turned into a failure of its event.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// errNoHandler is the failure of an unhandled event under the retry and
// dead_letter policies.
var errNoHandler = errors.New("no handler is registered for this event's source, kind and type")

// causeOf classifies a failed attempt. handlerCtx is the handler's context,
// whose expiry tells a timeout from an error the handler chose.
func causeOf(err error, handlerCtx context.Context) inbox.Cause {
	var p *panicError
	switch {
	case errors.As(err, &p):
		return inbox.CauseHandlerPanic
	case IsPermanent(err):
		return inbox.CausePermanent
	case errors.Is(err, errNoHandler):
		return inbox.CauseNoHandler
	case errors.Is(handlerCtx.Err(), context.DeadlineExceeded):
		// Whatever the error's shape (pgx wraps a cancelled query in its
		// own types), the handler failed after its time was up.
		return inbox.CauseHandlerTimeout
	default:
		return inbox.CauseHandlerFailed
	}
}

// maxErrorBytes bounds an error's text in the history: a handler's error
// may quote a payload, and the history is kept for every attempt.
const maxErrorBytes = 2048

// errorText makes err's text storable: Postgres text cannot hold NUL or
// invalid UTF-8, and the history must not grow without bound.
func errorText(err error) string {
	s := err.Error()
	if len(s) > maxErrorBytes {
		s = s[:maxErrorBytes] + "…(truncated)"
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", `\x00`)
}
