package console_test

import (
	"crypto/sha256"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/console"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// legendRE reads a chart's legend: each series' name and its total.
var legendRE = regexp.MustCompile(`<li><span class="swatch ([a-z0-9-]+)"></span>([^<]+) <span class="note">(\d+)</span></li>`)

// legend returns the totals of the chart whose svg has id, by series name.
func legend(t *testing.T, page, id string) map[string]string {
	t.Helper()
	i := strings.Index(page, `<svg class="chart" id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no chart %s in the page:\n%s", id, page)
	}
	rest := page[i:]
	end := strings.Index(rest, "</figure>")
	out := map[string]string{}
	for _, m := range legendRE.FindAllStringSubmatch(rest[:end], -1) {
		out[m[2]] = m[3]
	}
	return out
}

// TestOverviewCharts: the overview draws, over its window, the events
// accepted stacked with the refusals by cause (suppressed ones counted),
// and the attempts processed, failed and dead-lettered; nothing before
// the window counts; the SVG has axes, a legend, tooltips, and no style
// attribute (the CSP would block it).
func TestOverviewCharts(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *console.Config) { c.Window = operations.Span(time.Hour) })
	now := time.Now()
	factory.Events(f.ctx, f.t, f.store, 3, &factory.EventOpts{CreatedAt: now.Add(-10 * time.Minute)})
	factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{CreatedAt: now.Add(-20 * time.Minute), Now: now.Add(-15 * time.Minute), State: inbox.StateProcessed})
	factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{CreatedAt: now.Add(-5 * time.Minute), Now: now.Add(-4 * time.Minute), State: inbox.StateDead})
	// Before the window: counted nowhere.
	factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{CreatedAt: now.Add(-3 * time.Hour), Now: now.Add(-3 * time.Hour), State: inbox.StateProcessed})
	factory.Rejection(f.ctx, f.t, f.store, &factory.RejectionOpts{Cause: inbox.CauseSignatureMismatch, ReceivedAt: now.Add(-30 * time.Minute), Suppressed: 4})
	factory.Rejection(f.ctx, f.t, f.store, &factory.RejectionOpts{Cause: inbox.CauseUnknownSource, Source: "(unknown)", ReceivedAt: now.Add(-2 * time.Minute)})
	factory.Rejection(f.ctx, f.t, f.store, &factory.RejectionOpts{Cause: inbox.CauseUnknownSource, ReceivedAt: now.Add(-2 * time.Hour)})
	f.login()

	code, page := f.get("/")
	if code != http.StatusOK {
		t.Fatalf("overview = %d\n%s", code, page)
	}
	// A window of an hour is cut into 30 buckets of 2 minutes.
	if !strings.Contains(page, "<h2>Last 1h, by 2m (UTC)</h2>") {
		t.Errorf("the charts' heading does not say the window and the bucket width:\n%s", page)
	}
	got := legend(t, page, "chart-received")
	want := map[string]string{"accepted": "5", "refused: signature_mismatch": "5", "refused: unknown_source": "1"}
	if len(got) != len(want) {
		t.Errorf("received legend = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("received legend = %v, want %v", got, want)
		}
	}
	// The dead event's three failed attempts, the last one dead-lettering.
	got = legend(t, page, "chart-processing")
	want = map[string]string{"processed": "1", "failed": "3", "dead-lettered": "1"}
	for k, v := range want {
		if got[k] != v || len(got) != len(want) {
			t.Errorf("processing legend = %v, want %v", got, want)
		}
	}
	for _, needle := range []string{
		`<rect class="s-accepted"`, `<rect class="s-c0"`, `<polyline class="line s-processed"`, `<circle class="s-dead"`,
		`<text class="tick"`, `<title>accepted: 3, `, `<title>refused: signature_mismatch: 5, `,
	} {
		if !strings.Contains(page, needle) {
			t.Errorf("the charts lack %s", needle)
		}
	}
	if strings.Contains(page, "style=") {
		t.Error("the overview has a style attribute, which the CSP blocks")
	}
	// The overview's refusal table links to the refusals page.
	if !strings.Contains(page, `<a href="/refusals">`) || !strings.Contains(page, `href="/refusals#cause-unknown_source"`) {
		t.Errorf("the overview does not link to the refusals page:\n%s", page)
	}
}

// TestOverviewEmptyWindow: with nothing in the window, the charts still
// draw their axes (a top of 1), and the default window is a day (written
// "1d", as every front end writes it) in buckets of 30 minutes.
func TestOverviewEmptyWindow(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.login()
	code, page := f.get("/")
	if code != http.StatusOK || !strings.Contains(page, "<h2>Last 1d, by 30m (UTC)</h2>") ||
		!strings.Contains(page, `<svg class="chart" id="chart-received"`) || !strings.Contains(page, `<svg class="chart" id="chart-processing"`) {
		t.Fatalf("empty overview = %d\n%s", code, page)
	}
	if n := strings.Count(page, "<rect "); n != 0 {
		t.Errorf("%d bars in an empty window", n)
	}
	// Both charts have their axes: 0 and 1 on the y axis, six times on
	// the x axis.
	for want, n := range map[string]int{`text-anchor="end">0</text>`: 2, `text-anchor="end">1</text>`: 2, `text-anchor="middle">`: 12} {
		if got := strings.Count(page, want); got != n {
			t.Errorf("the empty charts have %d %s, want %d", got, want, n)
		}
	}
}

// TestOverviewArchiveProgress: the archive card counts the committed
// objects (events, bytes), the processed events not yet archived (those
// older than ARCHIVE_MIN_AGE due) with the oldest one's age, and the
// pending objects.
func TestOverviewArchiveProgress(t *testing.T) {
	t.Parallel()
	// The archive's settings say what is due; the overview never opens
	// the bucket.
	f := setupWith(t, backends[0], &testArchive{cfg: archive.Config{MinAge: time.Hour}}, nil)
	now := time.Now()
	factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{State: inbox.StateProcessed, ProcessedAt: new(now.Add(-3 * time.Hour))})
	factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{State: inbox.StateProcessed, ProcessedAt: new(now.Add(-time.Minute))})
	archived := factory.Events(f.ctx, f.t, f.store, 2, &factory.EventOpts{State: inbox.StateProcessed})
	sum := sha256.Sum256([]byte("object"))
	for _, key := range []string{"committed.gz", "pending.gz"} {
		if err := f.store.ArchiveObjectPrepare(f.ctx, key, "stripe"); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.store.ArchiveObjectCommit(f.ctx, inbox.ArchiveObject{Key: "committed.gz", EventCount: 2, Size: 3 << 20, SHA256: sum[:]}); err != nil {
		t.Fatal(err)
	}
	factory.MarkArchived(f.ctx, t, f.store, "committed.gz", archived[0].ID, archived[1].ID)
	f.login()
	_, page := f.get("/")
	for _, want := range []string{
		`<div class="card" id="archive"><h2>Archive</h2><p class="big">2</p>`,
		`events archived in 1 objects, 3.0 MiB`,
		`processed, not yet archived: 2 (1 older than 1h, due)`,
		`oldest not archived: processed 3h0m0s ago`,
		`pending objects: 1 (batches being written`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("overview lacks %q\n%s", want, page)
		}
	}
}

// TestRefusalsPage: the refusals of the window by source and cause
// (suppressed ones counted), each cause explained from the console's one
// table (an unknown one said to be unknown), the newest records, all
// escaped; nothing before the window.
func TestRefusalsPage(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *console.Config) { c.Window = operations.Span(time.Hour) })
	now := time.Now()
	factory.Rejection(f.ctx, f.t, f.store, &factory.RejectionOpts{Source: "stripe", Cause: inbox.CauseSignatureMismatch, Suppressed: 4})
	factory.Rejection(f.ctx, f.t, f.store, &factory.RejectionOpts{Source: "(unknown)", Cause: inbox.CauseUnknownSource,
		Message: "no such source; the name requested: <script>alert(1)</script>\u202eevil"})
	factory.Rejection(f.ctx, f.t, f.store, &factory.RejectionOpts{Source: "github", Cause: "brand_new_cause"})
	factory.Rejection(f.ctx, f.t, f.store, &factory.RejectionOpts{Source: "old", Cause: inbox.CausePayloadTooLarge, ReceivedAt: now.Add(-2 * time.Hour)})
	f.login()

	code, page := f.get("/refusals")
	if code != http.StatusOK {
		t.Fatalf("refusals = %d\n%s", code, page)
	}
	for _, want := range []string{
		`7 requests refused in the last 1h`,
		`<tr><td>stripe</td><td><a href="#cause-signature_mismatch"><code>signature_mismatch</code></a></td><td class="num">5</td></tr>`,
		`<tr><td>(unknown)</td><td><a href="#cause-unknown_source"><code>unknown_source</code></a></td><td class="num">1</td></tr>`,
		`<tr id="cause-signature_mismatch"><td><code>signature_mismatch</code></td><td class="num">5</td><td>No configured secret produced the signature sent`,
		`(docs/operations.md, A sender is refused after a secret roll)`,
		`<tr id="cause-brand_new_cause"><td><code>brand_new_cause</code></td><td class="num">1</td><td colspan="2" class="note">Not a cause this console knows`,
		`&lt;script&gt;alert(1)&lt;/script&gt;\u202eevil`,
		`<td class="num">4</td>`, // the record's suppressed count
		`<a href="/refusals" aria-current="page">Refusals</a>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("refusals page lacks %s\n%s", want, page)
		}
	}
	for _, bad := range []string{"<script>", "\u202e", "payload_too_large", "<td>old</td>"} {
		if strings.Contains(page, bad) {
			t.Errorf("refusals page contains %q", bad)
		}
	}
	// A page without refusals says so.
	f2 := setup(t, nil)
	f2.login()
	if _, page := f2.get("/refusals"); !strings.Contains(page, "No refusals in the window.") || !strings.Contains(page, "0 requests refused in the last 1d") {
		t.Errorf("empty refusals page:\n%s", page)
	}
}

// Every cause the receiver records is explained on the refusals page.
func TestRefusalsExplainEveryReceiverCause(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	causes := []inbox.Cause{
		inbox.CauseUnknownSource, inbox.CauseNotFound, inbox.CauseInvalidRequest, inbox.CauseMethodNotAllowed,
		inbox.CauseSignatureMissing, inbox.CauseSignatureMalformed, inbox.CauseSignatureMismatch, inbox.CauseTimestampOutOfTolerance,
		inbox.CausePayloadTooLarge, inbox.CauseUnreadableBody, inbox.CauseUnparsableBody, inbox.CauseMissingEventID,
		inbox.CauseInvalidEventType, inbox.CauseInvalidEvent, inbox.CauseDatabaseUnavailable, inbox.CauseInternal,
		inbox.CauseEndpointTokenMismatch, inbox.CauseUnauthenticated, inbox.CauseHandshake,
	}
	for _, c := range causes {
		factory.Rejection(f.ctx, f.t, f.store, &factory.RejectionOpts{Cause: c})
	}
	f.login()
	_, page := f.get("/refusals")
	for _, c := range causes {
		if !strings.Contains(page, `<tr id="cause-`+string(c)+`"><td><code>`+string(c)+`</code></td><td class="num">1</td><td>`) {
			t.Errorf("cause %s is not explained:\n%s", c, page)
		}
	}
}

// TestOverviewSources: the overview lists each source the receivers
// recorded, over each backend: its last delivery (or none since it was
// first seen), its silent_after, and whether it is silent, no longer
// configured, or fine; the heading counts the silent ones.
func TestOverviewSources(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f := setupWith(t, b, nil, nil)
			now := time.Now()
			factory.SourceActivity(f.ctx, t, f.store, now.Add(-3*time.Hour),
				storage.SourceRecord{Source: "github", SilentAfter: time.Hour},
				storage.SourceRecord{Source: "legacy", ReceivedAt: now.Add(-3 * time.Hour)})
			factory.SourceActivity(f.ctx, t, f.store, now.Add(-time.Minute),
				storage.SourceRecord{Source: "github", SilentAfter: time.Hour},
				storage.SourceRecord{Source: "stripe", SilentAfter: 6 * time.Hour, ReceivedAt: now.Add(-time.Minute)})
			f.login()
			code, page := f.get("/")
			if code != http.StatusOK {
				t.Fatalf("overview = %d\n%s", code, page)
			}
			for _, want := range []string{
				`<h2>Sources: last delivery, 1 silent</h2>`,
				`<tr class="silent"><td>github</td><td>none since first seen 3h0m0s ago</td><td>1h</td><td><strong>silent</strong> since 2h0m0s ago</td></tr>`,
				`<tr><td>legacy</td><td>3h0m0s ago</td><td>-</td><td>no longer configured</td></tr>`,
				`<td>stripe</td><td>1m0s ago</td><td>6h</td><td>ok</td></tr>`,
			} {
				if !strings.Contains(page, want) {
					t.Errorf("overview lacks %q\n%s", want, page)
				}
			}
		})
	}
}
