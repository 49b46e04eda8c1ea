// Package readable writes slog records for a person at a terminal, as the
// dev stack and webhookdev log; the Lambdas log JSON (settings.Logger).
package readable

import (
	"bytes"
	"context"
	"encoding"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// NewHandler returns a handler whose lines are written for a
// person at a terminal (the dev stack): time, level, message, then
// key=value pairs, no JSON. A line reads
//
//	15:04:05.000 INFO  webhook accepted source=stripe event_id=evt_1 id=3
//
// Values with spaces, quotes, '=' or control characters are quoted (Go
// syntax), so a line is always one line and splits unambiguously; groups
// prefix their keys ("stats.claimed=2"); structs print as {Field:value}.
func NewHandler(w io.Writer, opts *slog.HandlerOptions) slog.Handler {
	if opts == nil {
		opts = &slog.HandlerOptions{}
	}
	return &readableHandler{mu: &sync.Mutex{}, w: w, opts: *opts}
}

type readableHandler struct {
	mu   *sync.Mutex // shared by the handlers derived with WithAttrs/WithGroup
	w    io.Writer
	opts slog.HandlerOptions
	// pre holds the WithAttrs pairs, already formatted; group is the
	// WithGroup prefix of the attributes added later.
	pre   string
	group string
}

func (h *readableHandler) Enabled(_ context.Context, l slog.Level) bool {
	min := slog.LevelInfo
	if h.opts.Level != nil {
		min = h.opts.Level.Level()
	}
	return l >= min
}

func (h *readableHandler) Handle(_ context.Context, r slog.Record) error {
	var b bytes.Buffer
	if !r.Time.IsZero() {
		b.WriteString(r.Time.Format("15:04:05.000"))
		b.WriteByte(' ')
	}
	fmt.Fprintf(&b, "%-5s %s", r.Level.String(), oneLine(r.Message))
	b.WriteString(h.pre)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, h.group, a)
		return true
	})
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(b.Bytes())
	return err
}

func (h *readableHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b bytes.Buffer
	for _, a := range as {
		appendAttr(&b, h.group, a)
	}
	c := *h
	c.pre += b.String()
	return &c
}

func (h *readableHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group = h.group + name + "."
	return &c
}

// appendAttr writes " key=value", or one pair per member of a group.
func appendAttr(b *bytes.Buffer, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, m := range a.Value.Group() {
			appendAttr(b, p, m)
		}
		return
	}
	b.WriteByte(' ')
	b.WriteString(prefix + a.Key)
	b.WriteByte('=')
	b.WriteString(quoteIfNeeded(valueText(a.Value)))
}

// valueText renders a value for a person: errors by their message, times
// in UTC to the millisecond, durations as Go writes them.
func valueText(v slog.Value) string {
	switch v.Kind() {
	case slog.KindString:
		return v.String()
	case slog.KindTime:
		return v.Time().UTC().Format("2006-01-02T15:04:05.000Z")
	case slog.KindDuration:
		return v.Duration().String()
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return x.Error()
		case fmt.Stringer:
			return x.String()
		case encoding.TextMarshaler:
			if t, err := x.MarshalText(); err == nil {
				return string(t)
			}
		case []byte:
			return strconv.Quote(string(x))
		}
		return fmt.Sprintf("%+v", v.Any())
	}
	return v.String()
}

// quoteIfNeeded quotes s when it would not read back as one value.
func quoteIfNeeded(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if unicode.IsSpace(r) || r == '"' || r == '=' || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// oneLine keeps a message on its line.
func oneLine(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		return strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
	}
	return s
}
