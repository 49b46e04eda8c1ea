package archive_test

import (
	"context"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
)

// TestQuietIdleSkipsOnlyIdleRuns: the Lambda logs every run (its line is
// its metrics); with QuietIdle (the dev stack) a run that did nothing
// logs nothing, and a run that archived still logs its line.
func TestQuietIdleSkipsOnlyIdleRuns(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	runs := func() int { return len(f.logs.records(t, "archive: run done")) }
	if _, err := f.archiver(nil).RunOnce(ctx); err != nil || runs() != 1 {
		t.Fatalf("the Lambda's idle run: %v, %d lines", err, runs())
	}
	quiet := f.archiver(func(c *archive.Config) { c.QuietIdle = true })
	if _, err := quiet.RunOnce(ctx); err != nil || runs() != 1 {
		t.Fatalf("an idle quiet run: %v, %d lines", err, runs())
	}
	f.insert("a", "e1", []byte(`{}`))
	f.process(2 * time.Hour)
	if res, err := quiet.RunOnce(ctx); err != nil || res.Events != 1 || runs() != 2 {
		t.Fatalf("a quiet run that archived: %+v, %v, %d lines", res, err, runs())
	}
}
