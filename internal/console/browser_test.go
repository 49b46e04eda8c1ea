package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/console"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// EnvUpdateScreenshots=1 makes the browser test write its screenshots to
// docs/console/ (committed, shown in the README); ordinary runs leave them.
const EnvUpdateScreenshots = "UPDATE_SCREENSHOTS"

// chromium finds a Chromium or Chrome on PATH (chromium, chromium-browser
// or google-chrome; make setup installs Debian's chromium). Without one
// the browser tests skip, except in CI (CI set), where they must run.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("none of chromium, chromium-browser or google-chrome on PATH, and CI must run the browser tests: make setup installs chromium (apt-get install chromium)")
	}
	t.Skip("none of chromium, chromium-browser or google-chrome on PATH, so the browser tests are skipped: make setup installs chromium (apt-get install chromium)")
	return ""
}

// browser starts a headless Chromium and returns a context of a tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox refuses to start
		chromedp.WindowSize(1280, 860),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancel)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancelTimeout)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs the steps in the tab, failing the test with what was done.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs one step that reads something.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// screenshot saves the page as docs/console/<name>.png with
// UPDATE_SCREENSHOTS=1, from the first backend's run only (the pages are
// the same over each).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv(EnvUpdateScreenshots) != "1" || !strings.HasSuffix(t.Name(), "/"+backends[0].name) {
		return
	}
	png := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	dir := filepath.Join("..", "..", "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// browserFixture: a database with events in several states, an archived
// event whose body is in S3 (versitygw), a dead letter whose handler now
// works, refusals; the console over them through a backend; the processor
// that drains.
type browserFixture struct {
	ctx       context.Context
	store     *storage.Store
	srv       *httptest.Server
	who       string
	proc      *processor.Processor
	archived  *inbox.Event
	deadEvent int64
	deadID    int64
	archBody  string
}

func browserSetup(t *testing.T, b backend) *browserFixture {
	t.Helper()
	ctx := t.Context()
	pool := pgtest.Pool(t)
	store := storage.New(pool)
	f := &browserFixture{ctx: ctx, store: store}
	now := time.Now()
	hourAgo := now.Add(-time.Hour)

	f.archBody = `{"id":"evt_archived_1","type":"invoice.paid","data":{"object":{"amount_paid":4200,"currency":"eur","customer":"cus_42"}}}`
	old := factory.Event(ctx, t, store, &factory.EventOpts{EventID: "evt_archived_1", Type: "invoice.paid", Body: []byte(f.archBody),
		State: inbox.StateProcessed, Now: hourAgo, CreatedAt: hourAgo.Add(-time.Minute), ProcessedAt: &hourAgo})
	arch := newTestArchive(t, s3test.Bucket, s3test.Server(t))
	archiveNow(t, store, arch, 1)
	var err error
	if f.archived, err = store.EventGetByID(ctx, old.ID); err != nil || f.archived.ArchivedAt == nil || f.archived.Body != nil {
		t.Fatalf("archived event = %+v, %v", f.archived, err)
	}

	factory.Events(ctx, t, store, 6, &factory.EventOpts{Type: "invoice.paid", State: inbox.StateProcessed})
	factory.Events(ctx, t, store, 3, &factory.EventOpts{Source: "github", SourceKind: "github", Type: "push"})
	factory.Event(ctx, t, store, &factory.EventOpts{Source: "github", SourceKind: "github", Type: "pull_request", State: inbox.StateRetrying,
		LastError: "the downstream API answered 503"})
	dead := factory.Event(ctx, t, store, &factory.EventOpts{Source: "github", SourceKind: "github", Type: "issues", State: inbox.StateDead,
		LastError: "handler: issue tracker unreachable"})
	f.deadEvent = dead.ID
	dls, err := store.DeadLetterListByEvent(ctx, dead.ID)
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters = %v, %v", dls, err)
	}
	f.deadID = dls[0].ID
	for range 4 {
		factory.Rejection(ctx, t, store, &factory.RejectionOpts{Source: "stripe", Cause: inbox.CauseSignatureMismatch})
	}
	factory.Rejection(ctx, t, store, &factory.RejectionOpts{Source: "github", Cause: inbox.CauseUnknownSource})
	history(ctx, t, store)

	// The fix is deployed: github's events are handled now.
	reg := processor.NewRegistry()
	reg.HandleFunc(processor.Source("github"), processor.AnyType, func(context.Context, pgx.Tx, *processor.Event) error { return nil })
	if f.proc, err = processor.New(processor.Config{}, processor.Deps{Pool: pool, Registry: reg}); err != nil {
		t.Fatal(err)
	}

	cf := serve(t, store, b.api(t, store, arch), func(c *console.Config) { c.Reason = "INC-42" })
	f.srv, f.who = cf.srv, cf.who
	return f
}

// TestBrowser drives the console in Chromium as an operator does: the
// overview, a filtered events list, an archived event's body, a dead
// letter requeued after confirming (due, then processed by a drain), that
// event replayed after confirming (processed again), an expunge's
// confirmation, and the refusals: no token, a form posted from another origin, a form
// without its CSRF token.
func TestBrowser(t *testing.T) {
	tier.Heavy(t, "starts Chromium")
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testBrowser(t, b)
		})
	}
}

func testBrowser(t *testing.T, b backend) {
	f := browserSetup(t, b)
	ctx := browser(t)
	var text string

	// Overview, through the address webhookctl prints.
	run(t, ctx, "open the overview",
		chromedp.Navigate(f.srv.URL+"/?token="+testToken),
		chromedp.WaitVisible("#backlog"))
	text = value(t, ctx, "overview text", chromedp.Text("main"))
	for _, want := range []string{"backlog", "open dead letters", "signature_mismatch", "unknown_source"} {
		if !strings.Contains(strings.ToLower(text), want) {
			t.Errorf("overview lacks %q:\n%s", want, text)
		}
	}
	loc := value(t, ctx, "location", chromedp.Location())
	if strings.Contains(loc, "token") {
		t.Errorf("the token stays in the address bar: %s", loc)
	}
	checkOverviewCharts(t, ctx)
	checkOverviewSources(t, ctx)
	screenshot(t, ctx, "overview")
	checkRefusalsPage(t, ctx)

	// Events, filtered through the form.
	run(t, ctx, "filter the events",
		chromedp.Navigate(f.srv.URL+"/events"),
		chromedp.WaitVisible("#filters"),
		chromedp.SetValue(`#filters input[name="source"]`, "github"),
		chromedp.SetValue(`#filters select[name="state"]`, "pending"),
		chromedp.Submit(`#filters`),
		chromedp.WaitVisible("#events"))
	text = value(t, ctx, "events", chromedp.Text("#events tbody"))
	if n := strings.Count(text, "github"); n != 3 || strings.Contains(text, "stripe") || strings.Contains(text, "retrying") {
		t.Errorf("github pending events: %d rows\n%s", n, text)
	}
	screenshot(t, ctx, "events")

	// The archived event: its body comes back from S3, pretty-printed.
	run(t, ctx, "open the archived event",
		chromedp.Navigate(fmt.Sprintf("%s/events?find=%s&source=stripe", f.srv.URL, "evt_archived_1")),
		chromedp.WaitVisible("#body"))
	text = value(t, ctx, "body", chromedp.Text("#body"))
	from := value(t, ctx, "body from", chromedp.Text("#body-from"))
	if from != "from archive" || !strings.Contains(text, `"amount_paid": 4200`) || !strings.Contains(text, "\n") {
		t.Errorf("archived body (%s):\n%s", from, text)
	}
	screenshot(t, ctx, "event")

	// A dead letter, requeued after confirming.
	run(t, ctx, "open the dead letters", chromedp.Navigate(f.srv.URL+"/dead-letters"), chromedp.WaitVisible("#dead-letters"))
	screenshot(t, ctx, "dead-letters")
	run(t, ctx, "ask to requeue",
		chromedp.Click(fmt.Sprintf("#requeue-%d", f.deadID)),
		chromedp.WaitVisible("#confirm-count"))
	text = value(t, ctx, "confirmation", chromedp.Text("#confirm-count"))
	if !strings.Contains(text, "This requeues 1 event") {
		t.Errorf("confirmation: %q", text)
	}
	if n, _ := f.store.DeadLetterCountRequeueable(f.ctx, storage.DeadLetterFilter{All: true}); n != 1 {
		t.Fatalf("asking to confirm changed something: %d open dead letters", n)
	}
	screenshot(t, ctx, "confirm")
	run(t, ctx, "confirm",
		chromedp.Click(`#confirm button[type="submit"]`),
		chromedp.WaitVisible("#requeued"),
		chromedp.Navigate(fmt.Sprintf("%s/events/%d", f.srv.URL, f.deadEvent)),
		chromedp.WaitVisible("#state"))
	text = value(t, ctx, "state", chromedp.Text("#state"))
	if text != string(inbox.StatePending) {
		t.Errorf("the requeued event is %q, want pending (due)", text)
	}
	if st, err := f.proc.Drain(f.ctx); err != nil || st.Handled != 4 {
		t.Fatalf("drain = %+v, %v; want the requeued event and github's 3 pending handled", st, err)
	}
	run(t, ctx, "reload the event", chromedp.Reload(), chromedp.WaitVisible("#timeline"))
	text = value(t, ctx, "state", chromedp.Text("#state"))
	if text != string(inbox.StateProcessed) {
		t.Errorf("after the drain the event is %q, want processed", text)
	}
	screenshot(t, ctx, "event-requeued")

	// The processed event, replayed after confirming: due, then processed
	// again by the next drain.
	run(t, ctx, "ask to replay",
		chromedp.Click(`#replay button[type="submit"]`),
		chromedp.WaitVisible("#confirm-count"))
	text = value(t, ctx, "replay confirmation", chromedp.Text("#confirm-count"))
	if !strings.Contains(text, "This replays 1 event") {
		t.Errorf("replay confirmation: %q", text)
	}
	if e, _ := f.store.EventGetByID(f.ctx, f.deadEvent); e.ProcessedAt == nil {
		t.Fatal("asking to confirm the replay changed the event")
	}
	screenshot(t, ctx, "replay-confirm")
	run(t, ctx, "confirm the replay",
		chromedp.Click(`#confirm button[type="submit"]`),
		chromedp.WaitVisible("#replayed"))
	text = value(t, ctx, "replayed", chromedp.Text("#replayed"))
	state := value(t, ctx, "state", chromedp.Text("#state"))
	if !strings.Contains(text, "Replayed 1 event") || state != string(inbox.StatePending) {
		t.Errorf("after the replay: %q, state %q; want it said and the event pending", text, state)
	}
	if st, err := f.proc.Drain(f.ctx); err != nil || st.Handled != 1 {
		t.Fatalf("drain = %+v, %v; want the replayed event handled", st, err)
	}
	run(t, ctx, "reload the replayed event", chromedp.Navigate(fmt.Sprintf("%s/events/%d", f.srv.URL, f.deadEvent)), chromedp.WaitVisible("#timeline"))
	if text = value(t, ctx, "state", chromedp.Text("#state")); text != string(inbox.StateProcessed) {
		t.Errorf("after the replay's drain the event is %q, want processed", text)
	}

	// An expunge asks for the event's id typed again (not confirmed here).
	run(t, ctx, "ask to expunge",
		chromedp.Navigate(fmt.Sprintf("%s/events/%d", f.srv.URL, f.archived.ID)),
		chromedp.WaitVisible("#expunge"),
		chromedp.Click(`#expunge button[type="submit"]`),
		chromedp.WaitVisible(`#confirm input[name="confirm_event_id"]`))
	screenshot(t, ctx, "expunge-confirm")
	run(t, ctx, "open the actions", chromedp.Navigate(f.srv.URL+"/actions"), chromedp.WaitVisible("#actions"))
	text = value(t, ctx, "actions", chromedp.Text("#actions"))
	if !strings.Contains(text, f.who) || !strings.Contains(text, "INC-42") || !strings.Contains(text, "requeue") || !strings.Contains(text, "replay") {
		t.Errorf("actions page:\n%s", text)
	}
	screenshot(t, ctx, "actions")

	// A form without its CSRF token is refused, same origin or not.
	run(t, ctx, "a requeue without its CSRF token",
		chromedp.Navigate(f.srv.URL+"/dead-letters"),
		chromedp.WaitReady("body"))
	f.deadLetter(t, ctx)
	run(t, ctx, "strip the CSRF token and submit",
		chromedp.Reload(),
		chromedp.WaitVisible("#requeue-all"),
		chromedp.SetAttributeValue(`#requeue-all input[name="csrf"]`, "value", ""),
		chromedp.Submit("#requeue-all"))
	bodySays(t, ctx, "a form without its CSRF token", "missing or wrong CSRF token")

	// A page of another origin posting to the console is refused.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form id="f" method="post" action="%s/dead-letters/requeue"><input name="all" value="1"><input name="confirm" value="yes"><input name="count" value="1"></form>`, f.srv.URL)
	}))
	t.Cleanup(evil.Close)
	run(t, ctx, "post from another origin",
		chromedp.Navigate(strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)),
		chromedp.WaitReady("#f"),
		chromedp.Submit("#f"))
	bodySays(t, ctx, "a post from another origin", "cross-origin request refused")
	if n, _ := f.store.DeadLetterCountRequeueable(f.ctx, storage.DeadLetterFilter{All: true}); n != 1 {
		t.Errorf("the refused posts changed something: %d open dead letters, want 1", n)
	}

	// Without the token: a browser that never opened the printed address.
	other, cancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	defer cancel()
	run(t, other, "open without the token",
		chromedp.Navigate(f.srv.URL+"/dead-letters"),
		chromedp.WaitReady("body"))
	text = value(t, other, "refusal", chromedp.Text("body"))
	if !strings.Contains(text, "open the address `webhookctl console` printed at start") {
		t.Errorf("without the token: %q", text)
	}
}

// bodySays waits until the page (the answer to a form just submitted)
// says want.
func bodySays(t *testing.T, ctx context.Context, what, want string) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		text, err := chromedp.Run(ctx, chromedp.Text("body"))
		return err == nil && strings.Contains(text, want), fmt.Sprintf("%s: the page says %q (%v), want %q", what, text, err, want)
	})
}

// deadLetter adds an open dead letter for the refusal checks.
func (f *browserFixture) deadLetter(t *testing.T, _ context.Context) {
	t.Helper()
	factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "stripe", Type: "invoice.failed", State: inbox.StateDead, LastError: "boom"})
}

// TestBrowserBulkResolve: the dead letters filtered by their error text,
// resolved in bulk with a reason: the count is shown first and nothing
// changes until it is confirmed; then the filtered list is empty, the
// other dead letter stays open, and the action is on record.
func TestBrowserBulkResolve(t *testing.T) {
	tier.Heavy(t, "starts Chromium")
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testBrowserBulkResolve(t, b)
		})
	}
}

func testBrowserBulkResolve(t *testing.T, b backend) {
	f := browserSetup(t, b)
	for range 2 {
		factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "stripe", Type: "invoice.failed", State: inbox.StateDead, DeadError: "stripe: card declined"})
	}
	open := func() int64 {
		t.Helper()
		st, err := f.store.DeadLetterGetOpenStats(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Open
	}
	ctx := browser(t)
	run(t, ctx, "sign in", chromedp.Navigate(f.srv.URL+"/?token="+testToken), chromedp.WaitVisible("#backlog"))
	run(t, ctx, "filter the dead letters by their error",
		chromedp.Navigate(f.srv.URL+"/dead-letters"),
		chromedp.WaitVisible("#dead-letters"),
		chromedp.SetValue(`form.filters input[name="error"]`, "DECLINED"),
		chromedp.Submit(`form.filters`),
		chromedp.WaitVisible("#resolve-all"))
	if text := value(t, ctx, "filtered list", chromedp.Text("#dead-letters tbody")); strings.Count(text, "card declined") != 2 || strings.Contains(text, "tracker") {
		t.Fatalf("dead letters filtered by error text:\n%s", text)
	}
	run(t, ctx, "ask to resolve",
		chromedp.SetValue(`#resolve-all input[name="reason"]`, "declined cards are final"),
		chromedp.Submit("#resolve-all"),
		chromedp.WaitVisible("#confirm-count"))
	text := value(t, ctx, "confirmation", chromedp.Text("#confirm-count"))
	if !strings.Contains(text, "This resolves 2 events") || !strings.Contains(text, "declined cards are final") {
		t.Errorf("confirmation: %q", text)
	}
	if n := open(); n != 3 {
		t.Fatalf("asking to confirm changed something: %d open dead letters, want 3", n)
	}
	screenshot(t, ctx, "resolve-confirm")
	run(t, ctx, "confirm",
		chromedp.Click(`#confirm button[type="submit"]`),
		chromedp.WaitVisible("#resolved"))
	text = value(t, ctx, "after the resolve", chromedp.Text("main"))
	if !strings.Contains(text, "Resolved 2 events") || !strings.Contains(text, "No open dead letters match") {
		t.Errorf("the list after the resolve:\n%s", text)
	}
	if n := open(); n != 1 {
		t.Fatalf("%d open dead letters after the resolve, want 1 (github's)", n)
	}
	acts, err := f.store.OperatorActionList(f.ctx, time.Time{}, 1)
	if err != nil || len(acts) != 1 || acts[0].Action != inbox.ActionResolve || acts[0].Events != 2 || acts[0].Reason != "declined cards are final" {
		t.Fatalf("the last action = %+v, %v", acts, err)
	}
}
