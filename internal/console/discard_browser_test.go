package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// TestBrowserDiscard: the dead letters filtered by their last attempt's
// cause; then a due github event whose handler timed out, discarded from
// the events list's filter narrowed by that cause: the count is shown and
// nothing changes until it is confirmed; then it is finished as
// discarded, and a drain runs github's other due events but never it.
func TestBrowserDiscard(t *testing.T) {
	tier.Heavy(t, "starts Chromium")
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testBrowserDiscard(t, b)
		})
	}
}

func testBrowserDiscard(t *testing.T, b backend) {
	f := browserSetup(t, b)
	timedOut := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "github", SourceKind: "github", Type: "pull_request",
		State: inbox.StateRetrying, Cause: inbox.CauseHandlerTimeout, LastError: "handler: context deadline exceeded",
		NextAttemptAt: time.Now().Add(-time.Minute)})
	ctx := browser(t)
	run(t, ctx, "sign in", chromedp.Navigate(f.srv.URL+"/?token="+testToken), chromedp.WaitVisible("#backlog"))

	// The dead letters by cause: none failed permanently; the one that
	// died of handler failures is listed.
	run(t, ctx, "filter the dead letters by a cause none has",
		chromedp.Navigate(f.srv.URL+"/dead-letters"),
		chromedp.WaitVisible("#dead-letters"),
		chromedp.SetValue(`form.filters input[name="cause"]`, string(inbox.CausePermanent)),
		chromedp.Submit(`form.filters`),
		chromedp.WaitVisible(".empty"))
	bodySays(t, ctx, "dead letters by permanent_error", "No open dead letters match")
	run(t, ctx, "filter the dead letters by their cause",
		chromedp.SetValue(`form.filters input[name="cause"]`, string(inbox.CauseHandlerFailed)),
		chromedp.Submit(`form.filters`),
		chromedp.WaitVisible("#dead-letters"))
	if text := value(t, ctx, "dead letters by handler_failed", chromedp.Text("#dead-letters tbody")); !strings.Contains(text, "issues") {
		t.Errorf("dead letters by cause:\n%s", text)
	}

	run(t, ctx, "filter the events by source",
		chromedp.Navigate(f.srv.URL+"/events"),
		chromedp.WaitVisible("#filters"),
		chromedp.SetValue(`#filters input[name="source"]`, "github"),
		chromedp.Submit(`#filters`),
		chromedp.WaitVisible("#discard-filter"))
	run(t, ctx, "ask to discard the timed-out ones",
		chromedp.SetValue(`#discard-filter input[name="cause"]`, string(inbox.CauseHandlerTimeout)),
		chromedp.SetValue(`#discard-filter input[name="error"]`, "DEADLINE"),
		chromedp.SetValue(`#discard-filter input[name="reason"]`, "the pull request hook is retired"),
		chromedp.Submit("#discard-filter"),
		chromedp.WaitVisible("#confirm-count"))
	text := value(t, ctx, "confirmation", chromedp.Text("#confirm-count"))
	if !strings.Contains(text, "This discards 1 event:") || !strings.Contains(text, "of source github") ||
		!strings.Contains(text, "failed with handler_timeout") || !strings.Contains(text, "the pull request hook is retired") {
		t.Errorf("confirmation: %q", text)
	}
	if e, err := f.store.EventGetByID(f.ctx, timedOut.ID); err != nil || e.ProcessedAt != nil {
		t.Fatalf("asking to confirm changed the event: %+v, %v", e, err)
	}
	screenshot(t, ctx, "discard-confirm")
	run(t, ctx, "confirm",
		chromedp.Click(`#confirm button[type="submit"]`),
		chromedp.WaitVisible("#discarded"))
	if text := value(t, ctx, "after the discard", chromedp.Text("#discarded")); !strings.Contains(text, "Discarded 1 event: they will never run") {
		t.Errorf("the list after the discard: %q", text)
	}
	if st, err := f.proc.Drain(f.ctx); err != nil || st.Handled != 3 {
		t.Fatalf("drain = %+v, %v; want github's 3 pending handled, not the discarded one", st, err)
	}
	e, err := f.store.EventGetByID(f.ctx, timedOut.ID)
	if err != nil || e.Outcome != inbox.OutcomeDiscarded || e.Attempts != timedOut.Attempts {
		t.Fatalf("the discarded event: outcome %q, %d attempts (had %d), %v", e.Outcome, e.Attempts, timedOut.Attempts, err)
	}
	acts, err := f.store.OperatorActionList(f.ctx, time.Time{}, 1)
	if err != nil || len(acts) != 1 || acts[0].Action != inbox.ActionDiscard || acts[0].Events != 1 || acts[0].Reason != "the pull request hook is retired" {
		t.Fatalf("the last action = %+v, %v", acts, err)
	}
}

// TestBrowserPurge: the quarantine filtered by a source, purged with a
// reason: the count is shown and nothing is deleted until it is
// confirmed; then the source's delivery is gone and the other stays.
func TestBrowserPurge(t *testing.T) {
	tier.Heavy(t, "starts Chromium")
	t.Parallel()
	for _, b := range quarantineAPIs {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f, _, _ := quarantineSetup(t, b.api)
			count := func(source string) int {
				t.Helper()
				n, err := f.store.QuarantineCount(f.ctx, storage.QuarantineFilter{Source: source})
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			ctx := browser(t)
			run(t, ctx, "filter the quarantine by source",
				chromedp.Navigate(f.srv.URL+"/quarantine?token="+testToken),
				chromedp.WaitVisible("#purge-note"),
				chromedp.SetValue(`form.filters input[name="source"]`, "stripe"),
				chromedp.Submit(`form.filters`),
				chromedp.WaitVisible("#purge-filter"))
			run(t, ctx, "ask to purge",
				chromedp.SetValue(`#purge-filter input[name="reason"]`, "forged deliveries"),
				chromedp.Submit("#purge-filter"),
				chromedp.WaitVisible("#confirm-count"))
			text := value(t, ctx, "confirmation", chromedp.Text("#confirm-count"))
			if !strings.Contains(text, "This purges (deletes) 1 quarantined delivery") || !strings.Contains(text, "of source stripe") ||
				!strings.Contains(text, "forged deliveries") {
				t.Errorf("confirmation: %q", text)
			}
			if n := count(""); n != 2 {
				t.Fatalf("asking to confirm deleted something: %d left", n)
			}
			screenshot(t, ctx, "purge-confirm")
			run(t, ctx, "confirm",
				chromedp.Click(`#confirm button[type="submit"]`),
				chromedp.WaitVisible("#purged"))
			if text := value(t, ctx, "after the purge", chromedp.Text("main")); !strings.Contains(text, "Purged 1 quarantined delivery") ||
				!strings.Contains(text, "No quarantined deliveries match") {
				t.Errorf("the quarantine after the purge:\n%s", text)
			}
			if s, g := count("stripe"), count("github"); s != 0 || g != 1 {
				t.Fatalf("after the purge: %d stripe, %d github; want 0 and 1", s, g)
			}
		})
	}
}
