package archive_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
)

// TestEveryRunLogsItsLine: a run logs its summary line whether or not it
// did anything (the line is its metrics, zeros included, which the alarms
// read), and the line's EMF timestamp is the archiver's clock.
func TestEveryRunLogsItsLine(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	stamp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	a := f.archiver(func(_ *archive.Config, d *archive.Deps) { d.Clock = at(stamp) })
	if _, err := a.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	lines := f.logs.records(t, "archive: run done")
	if len(lines) != 1 {
		t.Fatalf("an idle run logged %d summary lines, want 1", len(lines))
	}
	aws, ok := lines[0]["_aws"].(map[string]any)
	if !ok {
		t.Fatalf("the idle run's line has no EMF block: %v", lines[0])
	}
	if got, want := aws["Timestamp"], float64(stamp.UnixMilli()); got != want {
		t.Errorf("EMF timestamp = %v, want the clock's %v", got, want)
	}
	if got := lines[0][archive.MetricEvents]; got != float64(0) {
		t.Errorf("%s = %v on an idle run, want 0", archive.MetricEvents, got)
	}
}

// TestIdleRunWithMetricsOffIsADebugLine: with metrics off (make dev) a run
// that did nothing logs its line at debug, so an info logger drops it and
// no bloat estimate is made for it; a run that archived logs at info.
func TestIdleRunWithMetricsOffIsADebugLine(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	var debug, info bytes.Buffer
	quiet := func(out *bytes.Buffer, level slog.Level) *archive.Archiver {
		return f.archiver(func(c *archive.Config, d *archive.Deps) {
			c.Metrics.Off = true
			d.Logger = slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level}))
		})
	}
	if _, err := quiet(&info, slog.LevelInfo).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(info.String(), "archive: run done") || strings.Contains(info.String(), archive.MetricTableBloat) {
		t.Errorf("an idle run with metrics off logged at info: %s", info.String())
	}
	if _, err := quiet(&debug, slog.LevelDebug).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(debug.String(), `"level":"DEBUG","msg":"archive: run done"`) {
		t.Errorf("an idle run with metrics off, debug logger: %s; want its line at debug", debug.String())
	}
	f.insert("a", "e1", []byte(`{}`))
	f.process(2 * time.Hour)
	info.Reset()
	if res, err := quiet(&info, slog.LevelInfo).RunOnce(ctx); err != nil || res.Events != 1 {
		t.Fatalf("run = %+v, %v", res, err)
	}
	if !strings.Contains(info.String(), `"level":"INFO","msg":"archive: run done"`) {
		t.Errorf("a run that archived, metrics off: %s; want its line at info", info.String())
	}
}
