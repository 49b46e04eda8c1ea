package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// TestBodyRetention: with ARCHIVE_BODY_RETENTION_DAYS, an archive run
// says what the retention removed; the event is still shown, with when
// its body expired and no failure, and a replay of it is refused with
// cause body_expired.
func TestBodyRetention(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.withArchive()
	f.env["ARCHIVE_BODY_RETENTION_DAYS"] = "30"
	hourAgo := time.Now().Add(-time.Hour)
	old := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "stripe", EventID: "evt_old", Body: []byte(`{"id":"evt_old"}`),
		CreatedAt: time.Now().Add(-40 * 24 * time.Hour), State: inbox.StateProcessed, ProcessedAt: &hourAgo})

	if out := f.runOK("archive", "run", "--min-age", "1ms"); !strings.Contains(out, "body retention: removed the bodies of 1 events, deleting 1 objects past it") {
		t.Errorf("archive run says:\n%s", out)
	}
	if out := f.runOK("events", "show", "stripe", "evt_old"); !strings.Contains(out, "body expired") || !strings.Contains(out, "past the body retention") {
		t.Errorf("events show of the expired event:\n%s", out)
	}
	var e eventShowOut
	f.runJSON(&e, "events", "show", "stripe", "evt_old")
	if e.BodyExpiredAt == nil || e.Body != nil || !strings.Contains(e.BodyError, "past the body retention") {
		t.Errorf("events show --json: body_expired_at %v, body %v, body_error %q", e.BodyExpiredAt, e.Body, e.BodyError)
	}
	_, _, err := f.run("replay", "--id", strconv.FormatInt(old.ID, 10), "--yes")
	if inbox.CauseOf(err) != inbox.CauseBodyExpired {
		t.Errorf("replay of the expired event: %v, want cause body_expired", err)
	}
}
