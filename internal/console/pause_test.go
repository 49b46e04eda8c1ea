package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/webhook-inbox/webhook-inbox/internal/console"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// A source paused from the overview's form shows on the overview, with
// who and why, its events held; pausing it again is a conflict with its
// cause; its Resume button lets them go. Over each backend.
func TestPauseAndResumeFromTheOverview(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f := setupWith(t, b, nil, nil)
			factory.Events(f.ctx, t, f.store, 2, &factory.EventOpts{Source: "shop"})
			f.login()
			_, page := f.get("/")
			if !strings.Contains(page, "Nothing is paused") {
				t.Fatalf("the overview before the pause:\n%s", page)
			}
			csrf := f.csrf(page)
			pause := url.Values{"csrf": {csrf}, "scope": {"source"}, "name": {"shop"}, "reason": {"ERP migration"}}
			code, body := f.post("/pauses/pause", pause, nil)
			if code != http.StatusOK || !strings.Contains(body, "Paused source shop: 2 waiting events held") {
				t.Fatalf("pause = %d\n%s", code, body)
			}
			for _, want := range []string{`id="pauses"`, "<code>shop</code>", "ERP migration", f.who, "2 paused"} {
				if !strings.Contains(body, want) {
					t.Errorf("the overview after the pause lacks %q", want)
				}
			}
			if code, body := f.post("/pauses/pause", pause, nil); code != http.StatusConflict || !strings.Contains(body, "already paused") {
				t.Fatalf("a second pause = %d\n%s", code, body)
			}
			resume := url.Values{"csrf": {csrf}, "scope": {"source"}, "name": {"shop"}}
			if code, body := f.post("/pauses/resume", resume, nil); code != http.StatusOK || !strings.Contains(body, "Resumed source shop: 2 events released") ||
				!strings.Contains(body, "Nothing is paused") {
				t.Fatalf("resume = %d\n%s", code, body)
			}
			if code, body := f.post("/pauses/resume", resume, nil); code != http.StatusConflict || !strings.Contains(body, "not paused") {
				t.Fatalf("a second resume = %d\n%s", code, body)
			}
			if code, body := f.post("/pauses/pause", url.Values{"csrf": {csrf}, "scope": {"handler"}, "name": {"shop"}}, nil); code != http.StatusBadRequest {
				t.Fatalf("a handler's pause by no route = %d\n%s", code, body)
			}
		})
	}
}

// A read-only console shows the pauses but no form, and refuses a pause
// posted all the same.
func TestPauseRefusedReadOnly(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *console.Config) { c.ReadOnly = true })
	f.login()
	_, page := f.get("/")
	if strings.Contains(page, `id="pause-form"`) {
		t.Fatal("a read-only overview offers to pause")
	}
	// The refusal comes before the form is read: no page gave a token.
	code, body := f.post("/pauses/pause", url.Values{"csrf": {"none"}, "scope": {"source"}, "name": {"shop"}}, nil)
	if code != http.StatusForbidden || !strings.Contains(body, "read-only") {
		t.Fatalf("pause on a read-only console = %d\n%s", code, body)
	}
	if ps, err := f.store.PauseList(f.ctx); err != nil || len(ps) != 0 {
		t.Fatalf("pauses = %+v, %v", ps, err)
	}
}

// TestBrowserPause drives a pause in Chromium: github paused from the
// overview's form is shown paused there, a drain holds its events, the
// Resume button lets them go and the next drain handles them.
func TestBrowserPause(t *testing.T) {
	tier.Heavy(t, "starts Chromium")
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testBrowserPause(t, b)
		})
	}
}

func testBrowserPause(t *testing.T, b backend) {
	f := browserSetup(t, b)
	ctx := browser(t)
	run(t, ctx, "pause github from the overview",
		chromedp.Navigate(f.srv.URL+"/?token="+testToken),
		chromedp.WaitVisible("#pause-form"),
		chromedp.SetValue(`#pause-form input[name="name"]`, "github"),
		chromedp.SetValue(`#pause-form input[name="reason"]`, "tracker migration"),
		chromedp.Submit("#pause-form"),
		chromedp.WaitVisible("#pause-note"))
	note := value(t, ctx, "note", chromedp.Text("#pause-note"))
	pauses := value(t, ctx, "pauses", chromedp.Text("#pauses"))
	if !strings.Contains(note, "Paused source github") || !strings.Contains(pauses, "github") || !strings.Contains(pauses, "tracker migration") {
		t.Errorf("after the pause: %q\n%s", note, pauses)
	}
	screenshot(t, ctx, "paused")
	st, err := f.proc.Drain(f.ctx)
	if err != nil || st.Handled != 0 {
		t.Fatalf("drain while github is paused = %+v, %v; want nothing handled", st, err)
	}
	// The overview afresh, without the pause's notice.
	run(t, ctx, "reload", chromedp.Navigate(f.srv.URL+"/"), chromedp.WaitVisible("#paused"))
	if card := value(t, ctx, "paused card", chromedp.Text("#paused")); !strings.Contains(card, "events held") {
		t.Errorf("paused card: %q", card)
	}
	run(t, ctx, "resume github",
		chromedp.Click(`#pauses button.resume`),
		chromedp.WaitVisible("#pause-note"))
	if note := value(t, ctx, "note", chromedp.Text("#pause-note")); !strings.Contains(note, "Resumed source github") {
		t.Errorf("after the resume: %q", note)
	}
	if st, err := f.proc.Drain(context.WithoutCancel(f.ctx)); err != nil || st.Handled < 3 {
		t.Fatalf("drain after the resume = %+v, %v; want github's pending events handled", st, err)
	}
	if ev, err := f.store.EventGetByID(f.ctx, f.deadEvent); err != nil || ev.State(ev.NextAttemptAt) != inbox.StateDead {
		t.Fatalf("the dead event: %v, %v; a pause and resume leave dead events alone", ev, err)
	}
}
