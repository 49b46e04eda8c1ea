package operations_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// A span is written one way everywhere: whole days as days, the rest as a
// Go duration without its zero tail; what it writes, it reads.
func TestSpan(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"24h": "1d", "1d": "1d", "7d": "7d", "168h": "7d", "90m": "1h30m", "2h": "2h", "30m": "30m", "45s": "45s", "36h": "36h",
	} {
		s, err := operations.ParseSpan(in)
		if err != nil || s.String() != want {
			t.Errorf("ParseSpan(%q) = %s, %v; want %s", in, s, err, want)
			continue
		}
		again, err := operations.ParseSpan(s.String())
		if err != nil || again != s {
			t.Errorf("%s does not read back: %s %v", s, again, err)
		}
	}
	for _, bad := range []string{"", "0", "-1h", "soon", "1.5d", "d", "\x1b[2J"} {
		if _, err := operations.ParseSpan(bad); inbox.CauseOf(err) != inbox.CauseInvalidArgument {
			t.Errorf("ParseSpan(%q) = %v", bad, err)
		}
	}
	b, _ := json.Marshal(struct{ W operations.Span }{operations.Span(48 * time.Hour)})
	if string(b) != `{"W":"2d"}` {
		t.Errorf("JSON = %s", b)
	}
	var back struct{ W operations.Span }
	if err := json.Unmarshal(b, &back); err != nil || back.W != operations.Span(48*time.Hour) {
		t.Errorf("from JSON = %v %v", back, err)
	}
}

func TestParseWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	w, err := operations.ParseWindow("2h", "", "")
	if from, to := w.Bounds(now); err != nil || !from.Equal(now.Add(-2*time.Hour)) || !to.IsZero() {
		t.Errorf("since 2h = %v %v %v", from, to, err)
	}
	w, err = operations.ParseWindow("", "2026-12-01", "2026-12-02T06:00:00.5Z")
	if from, to := w.Bounds(now); err != nil || from.Day() != 1 || to.Nanosecond() != 5e8 {
		t.Errorf("from/to = %v %v %v", from, to, err)
	}
	for name, in := range map[string][3]string{
		"since and from": {"1h", "2026-12-01", ""},
		"empty window":   {"", "2026-12-02", "2026-12-01"},
		"bad time":       {"", "yesterday", ""},
		"bad since":      {"soon", "", ""},
	} {
		if _, err := operations.ParseWindow(in[0], in[1], in[2]); inbox.CauseOf(err) != inbox.CauseInvalidArgument {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestAgoAndBytes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		3*time.Minute + 12*time.Second: "3m12s ago", 2*time.Hour + 5*time.Minute + 20*time.Second: "2h5m0s ago",
		-3 * time.Minute: "in 3m0s", 1500 * time.Millisecond: "1.5s ago",
	} {
		if got := operations.Ago(now, now.Add(-d)); got != want {
			t.Errorf("Ago(%s) = %q, want %q", d, got, want)
		}
	}
	for n, want := range map[int64]string{512: "512 B", 1536: "1.5 KiB", 3 << 20: "3.0 MiB"} {
		if got := operations.Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
	if operations.Stamp(nil) != "-" || operations.Stamp(&now) != "2026-12-03 12:00:00" {
		t.Error("Stamp")
	}
}
