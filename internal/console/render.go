package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var embedded embed.FS

// staticFS serves static/console.css as /static/console.css.
var staticFS fs.FS = embedded

// pages are the parsed templates, one per page, each with the layout.
type pages struct{ byName map[string]*template.Template }

// funcs format what the pages show. Times, ages, sizes are written by
// package operations, as webhookctl writes them.
var funcs = template.FuncMap{
	"clean": clean,
	"stamp": stamp,
	"ago":   operations.Ago,
	"deref": func(t *time.Time) time.Time { return *t },
	"bytes": operations.Bytes,
	"int64": func(n int) int64 { return int64(n) },
	"took":  took,
	// deadLettersHref links to the open dead letters of a source and
	// type, with the operator API's query keys.
	"deadLettersHref": func(source, typ string) template.URL {
		v := operatorapi.DeadLettersValues(operations.DeadLetterQuery{Source: source, Type: typ})
		return template.URL("/dead-letters?" + v.Encode()) // url.Values encoded: a safe URL
	},
}

func parsePages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}}
	for _, name := range []string{"overview", "refusals", "events", "event", "dead_letters", "confirm", "actions", "message", "replay", "expunge", "resolve", "quarantine", "quarantined", "reingest", "discard", "purge"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		p.byName[name] = t
	}
	return p, nil
}

// clean writes text from senders and handlers (a string, or a nullable
// one: nil is empty) with its control characters and bidi overrides
// escaped; html/template escapes the HTML.
func clean(v any) string {
	var s string
	switch x := v.(type) {
	case nil:
	case string:
		s = x
	case *string:
		if x != nil {
			s = *x
		}
	default:
		s = fmt.Sprint(x)
	}
	return inbox.EscapeControls(s, "\n\t")
}

// stamp writes a time (or a nullable one) as operations.Stamp does.
func stamp(t any) string {
	switch v := t.(type) {
	case time.Time:
		return operations.Stamp(&v)
	case *time.Time:
		return operations.Stamp(v)
	}
	return operations.Stamp(nil)
}

// took is how long an attempt ran ("-" while it has not finished).
func took(a operations.Attempt) string {
	if a.FinishedAt == nil {
		return "-"
	}
	return a.FinishedAt.Sub(a.StartedAt).Round(time.Millisecond).String()
}

// view is what every page's layout needs beside the page's own data.
type view struct {
	Title    string
	Nav      string
	CSRF     string
	ReadOnly bool
	// Operator is who actions are recorded as; Verified: AWS IAM
	// established it.
	Operator string
	Verified bool
	Now      time.Time
	Data     any
}

// render answers a page: 200, or, when the page shows err in place (a
// bad filter above its form, a confirmation asked again), err's status
// from the operator API's table, logged as fail logs it.
func (s *Server) render(w http.ResponseWriter, r *http.Request, err error, name, title string, data any) error {
	status := http.StatusOK
	if err != nil {
		status = s.logError(r, err)
	}
	return s.write(w, r, status, name, title, data)
}

// write executes the page into a buffer and sends it with status; an
// error before a byte is sent is returned.
func (s *Server) write(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) error {
	v := view{Title: title, Nav: name, CSRF: s.csrfToken(r), ReadOnly: s.readOnly != "", Operator: s.who, Verified: s.verified, Data: data}
	if now, ok := data.(interface{ at() time.Time }); ok {
		v.Now = now.at()
	}
	var buf bytes.Buffer
	if err := s.pages.byName[name].Execute(&buf, v); err != nil {
		return fmt.Errorf("console: render %s: %w", name, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
	return nil
}

// redirect sends the browser to path with query q (a page after an
// action: reloading it does not act again).
func redirect(w http.ResponseWriter, r *http.Request, path string, q url.Values) error {
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
	return nil
}

// inPlace reports whether a page shows err in place of its content (above
// its form) rather than as the message page: a refusal of what the
// operator typed.
func inPlace(err error) bool {
	switch inbox.CauseOf(err) {
	case inbox.CauseInvalidArgument, inbox.CauseEventNotFound:
		return true
	}
	return false
}
