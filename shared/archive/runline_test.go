package archive_test

import (
	"context"
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
