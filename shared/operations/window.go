package operations

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
)

// Span is a length of time as operators write it: a Go duration ("90m",
// "2h") or whole days ("7d"), the way ARCHIVE_MIN_AGE is written. It is
// written back the same way everywhere (String), so that the CLI, the
// console and the API say one thing.
type Span time.Duration

// ParseSpan reads a positive span: "30m", "24h", "7d".
func ParseSpan(s string) (Span, error) {
	d, err := settings.ParseAge(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		return 0, invalid("%q is not a positive duration (30m, 2h, 7d)", inbox.EscapeControls(s, ""))
	}
	return Span(d), nil
}

// Duration is the span as a time.Duration.
func (s Span) Duration() time.Duration { return time.Duration(s) }

// String writes whole days as days ("1d", "7d"), other spans as a Go
// duration without its zero tail ("90m" is "1h30m", "2h", "45s").
func (s Span) String() string {
	d := time.Duration(s)
	if day := 24 * time.Hour; d >= day && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// MarshalText writes the span as String does.
func (s Span) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a span as ParseSpan does.
func (s *Span) UnmarshalText(b []byte) error {
	v, err := ParseSpan(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Window is a time filter: the last Since before now, or From (inclusive)
// to To (exclusive); zero fields are open ends.
type Window struct {
	Since Span      `json:"since,omitzero"`
	From  time.Time `json:"from,omitzero"`
	To    time.Time `json:"to,omitzero"`
}

// ParseWindow reads a window as operators type it: since as a span, from
// and to as RFC 3339 times or dates; empty strings are not given.
func ParseWindow(since, from, to string) (Window, error) {
	var w Window
	var err error
	if since = strings.TrimSpace(since); since != "" {
		if w.Since, err = ParseSpan(since); err != nil {
			return w, invalid("since: %s", inbox.MessageOf(err))
		}
	}
	if from = strings.TrimSpace(from); from != "" {
		if w.From, err = ParseTime(from); err != nil {
			return w, invalid("from: %s", inbox.MessageOf(err))
		}
	}
	if to = strings.TrimSpace(to); to != "" {
		if w.To, err = ParseTime(to); err != nil {
			return w, invalid("to: %s", inbox.MessageOf(err))
		}
	}
	return w, w.check()
}

// check refuses a window that cannot hold anything or says two things.
func (w Window) check() error {
	switch {
	case w.Since < 0:
		return invalid("since must be positive")
	case w.Since > 0 && !w.From.IsZero():
		return invalid("give since or from, not both")
	case !w.From.IsZero() && !w.To.IsZero() && !w.From.Before(w.To):
		return invalid("the window is empty: from must be before to")
	}
	return nil
}

// IsZero reports a window that filters nothing.
func (w Window) IsZero() bool { return w.Since == 0 && w.From.IsZero() && w.To.IsZero() }

// Bounds are the window's ends at now (the database's clock); zero times
// are open ends.
func (w Window) Bounds(now time.Time) (from, to time.Time) {
	from, to = w.From, w.To
	if w.Since > 0 {
		from = now.Add(-w.Since.Duration())
	}
	return from, to
}

// ParseTime reads an RFC 3339 time (fractions allowed) or a date (UTC
// midnight).
func ParseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, invalid("%q is neither an RFC 3339 time (2026-12-01T02:00:00Z) nor a date (2026-12-01)", inbox.EscapeControls(s, ""))
}

// Ago says how long before now t was, coarsely ("3m12s ago", "2h5m ago"),
// or how long after ("in 3m").
func Ago(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + round(-d).String()
	}
	return round(d).String() + " ago"
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute)
	case d >= time.Minute:
		return d.Round(time.Second)
	default:
		return d.Round(100 * time.Millisecond)
	}
}

// Stamp writes a time for a table: UTC, to the second; "-" for none.
func Stamp(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// Bytes writes a size in binary units: "512 B", "3.2 MiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
