package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// TestBodyExpiredEventPage: the page of an event whose body the archive's
// retention removed says when, offers no replay, and still stands; over
// each backend.
func TestBodyExpiredEventPage(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			srv := s3test.ServerWith(t, locals3.Options{Versioning: true})
			arch := &testArchive{cfg: archive.Config{Prefix: "archive", MinAge: time.Minute, BodyRetention: 30 * 24 * time.Hour},
				blobs: s3test.Open(t, s3test.VersionedBucket(t, srv))}
			f := setupWith(t, b, arch, nil)
			hourAgo := time.Now().Add(-time.Hour)
			old := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "stripe", EventID: "evt_old", Body: []byte(`{"id":"evt_old"}`),
				CreatedAt: time.Now().Add(-40 * 24 * time.Hour), State: inbox.StateProcessed, ProcessedAt: &hourAgo})
			a, err := archive.New(arch.cfg, archive.Deps{Store: f.store, Blobs: arch.blobs})
			if err != nil {
				t.Fatal(err)
			}
			if res, err := a.RunOnce(f.ctx); err != nil || res.ExpiredEvents != 1 {
				t.Fatalf("archive run: %+v, %v", res, err)
			}
			f.login()
			code, page := f.get("/events/" + itoa(old.ID))
			if code != http.StatusOK || !strings.Contains(page, `id="body-expired"`) || !strings.Contains(page, "past the body retention") {
				t.Errorf("page = %d, want the body's expiry shown\n%s", code, page)
			}
			if strings.Contains(page, `id="replay"`) {
				t.Errorf("the page offers a replay of an event without a body\n%s", page)
			}
		})
	}
}
