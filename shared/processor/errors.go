package processor

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

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
	case errors.As(err, new(*privilegeErr)):
		return inbox.CauseHandlerPrivilege
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

// privilegeErr is a handler's error caused by a privilege the processor's
// role lacks (SQLSTATE 42501), with what to declare to fix it. It keeps
// the handler's error whole (Unwrap), and the text of both.
type privilegeErr struct {
	err  error
	hint string
}

func (e *privilegeErr) Error() string { return e.err.Error() + ": " + e.hint }
func (e *privilegeErr) Unwrap() error { return e.err }

// deniedRe reads the object PostgreSQL names in an insufficient_privilege
// message: "permission denied for table paid_invoices".
var deniedRe = regexp.MustCompile(`^permission denied for (table|sequence|view|materialized view|relation) "?([^"\s]+)"?`)

// privilegeError returns err wrapped with what the processor's role lacks
// and the HandlerSchema entry that grants it, when err is a statement refused
// with SQLSTATE 42501; else nil. stmt is the handler's latest statement
// ("" when unknown), whose verb names the privilege: a deployed processor
// would retry the event until its retry window ends, so the error must say
// what to deploy.
func privilegeError(err error, stmt string) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" || errors.As(err, new(*privilegeErr)) {
		return nil
	}
	m := deniedRe.FindStringSubmatch(pgErr.Message)
	if m == nil {
		return &privilegeErr{err: err, hint: "the processor's database role lacks a privilege; declare what your handler's statements use in your handler package's processor.HandlerSchema Grants and deploy (make dev applies it at start)"}
	}
	kind, name := m[1], m[2]
	if kind == "sequence" {
		return &privilegeErr{err: err, hint: "the processor's database role lacks USAGE on it; declare the table that owns it in your handler package's processor.HandlerSchema Grants, with INSERT (the sequences a table owns are granted with it), and deploy (make dev applies it at start)"}
	}
	privs := statementPrivileges(stmt)
	lacks, entry := "a privilege on it", fmt.Sprintf("%q: {\"SELECT\", \"INSERT\", ...}", name)
	if len(privs) > 0 {
		quoted := make([]string, len(privs))
		for i, p := range privs {
			quoted[i] = fmt.Sprintf("%q", p)
		}
		lacks = fmt.Sprintf("%s on it, which its failing %s statement needs", strings.Join(privs, " or "), privs[0])
		entry = fmt.Sprintf("%q: {%s, ...}", name, strings.Join(quoted, ", "))
	}
	return &privilegeErr{err: err, hint: fmt.Sprintf("the processor's database role lacks %s; declare it in your handler package's processor.HandlerSchema Grants (%s) and deploy (make dev applies it at start)", lacks, entry)}
}

// statementPrivileges are the privileges a statement on its table takes,
// from its verb (SELECT, INSERT, UPDATE, DELETE, after its comments, such
// as sqlc's "-- name:" line): the verb's own, then SELECT where it reads
// the table's columns (a WHERE, a RETURNING, an upsert) and UPDATE for an
// upsert's DO UPDATE or a SELECT's row lock. None for anything else (a
// WITH, a MERGE, an unknown statement), whose needs the verb does not
// tell.
func statementPrivileges(stmt string) []string {
	// Leading comments (a line's, a block's) go first.
	s := stmt
	for skipped := true; skipped; {
		s, skipped = strings.TrimSpace(s), false
		for _, c := range [...]struct{ open, close string }{{"--", "\n"}, {"/*", "*/"}} {
			if strings.HasPrefix(s, c.open) {
				_, rest, ok := strings.Cut(s, c.close)
				if !ok {
					return nil
				}
				s, skipped = rest, true
				break
			}
		}
	}
	words := strings.FieldsFunc(strings.ToUpper(s), func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '(' || r == ')' || r == ',' || r == ';'
	})
	if len(words) == 0 {
		return nil
	}
	has := func(w string) bool { return slices.Contains(words[1:], w) }
	switch verb := words[0]; verb {
	case "SELECT":
		if has("FOR") && (has("UPDATE") || has("SHARE")) {
			return []string{"SELECT", "UPDATE"}
		}
		return []string{"SELECT"}
	case "INSERT":
		out := []string{"INSERT"}
		if has("RETURNING") || has("CONFLICT") {
			out = append(out, "SELECT")
		}
		if has("CONFLICT") && has("UPDATE") {
			out = append(out, "UPDATE")
		}
		return out
	case "UPDATE", "DELETE":
		if has("WHERE") || has("RETURNING") {
			return []string{verb, "SELECT"}
		}
		return []string{verb}
	}
	return nil
}
