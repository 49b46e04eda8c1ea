package readable_test

import (
	"bytes"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/readable"
)

// TestReadableHandler: a line is time, level, message and key=value pairs,
// readable and unambiguous, never JSON.
func TestReadableHandler(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(readable.NewHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	type stats struct{ Claimed, Handled int }
	log.With("component", "receiver").WithGroup("req").Info("webhook accepted",
		"source", "stripe", "event_id", "evt 1", "id", 3, "took", 1500*time.Millisecond,
		"err", errors.New(`boom "x"`), "stats", stats{2, 1}, "empty", "", slog.Group("g", "a", 1))
	log.Debug("hidden")
	log.Warn("two\nlines")

	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines (debug filtered, newline kept inside its line), got %d:\n%s", len(lines), buf.String())
	}
	want := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} INFO  webhook accepted component=receiver req\.source=stripe req\.event_id="evt 1" req\.id=3 req\.took=1\.5s req\.err="boom \\"x\\"" req\.stats="{Claimed:2 Handled:1}" req\.empty="" req\.g\.a=1$`)
	if !want.MatchString(lines[0]) {
		t.Errorf("line = %q", lines[0])
	}
	if !strings.HasSuffix(lines[1], `WARN  two lines`) {
		t.Errorf("line = %q", lines[1])
	}
	if strings.Contains(buf.String(), `{"`) {
		t.Errorf("JSON in a readable line:\n%s", buf.String())
	}
}
