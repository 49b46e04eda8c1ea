package devstack

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestQuietIdleDropsOnlyIdleRuns: of the archiver's lines, only the
// summary of a run that archived and swept nothing is dropped; a run that
// did work, a failed run and every other line are kept, with the
// attributes the logger carries.
func TestQuietIdleDropsOnlyIdleRuns(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	log := slog.New(quietIdle(slog.NewTextHandler(&out, nil))).With("component", "archiver")
	log.Info(archiveRunDone, "events", 0, "objects", 0, "swept", 0, "truncated", false)
	if out.Len() != 0 {
		t.Fatalf("an idle run's summary was logged: %s", out.String())
	}
	kept := []struct {
		name string
		log  func()
		want string
	}{
		{"a run that archived", func() { log.Info(archiveRunDone, "events", 3, "objects", 1, "swept", 0) }, "events=3"},
		{"a run that swept", func() { log.Info(archiveRunDone, "events", 0, "objects", 0, "swept", 2) }, "swept=2"},
		{"a failed run", func() {
			log.Error("archive: run failed", "events", 0, "swept", 0, "err", errors.New("s3 down"))
		}, "s3 down"},
		{"a summary without its counts", func() { log.Info(archiveRunDone) }, archiveRunDone},
		{"another line", func() { log.Info("archive: batch archived", "events", 0) }, "batch archived"},
	}
	for _, k := range kept {
		out.Reset()
		k.log()
		if !strings.Contains(out.String(), k.want) {
			t.Errorf("%s: logged %q, want a line with %q", k.name, out.String(), k.want)
		}
		if !strings.Contains(out.String(), "component=archiver") {
			t.Errorf("%s: the logger's attributes are lost: %q", k.name, out.String())
		}
	}
}
