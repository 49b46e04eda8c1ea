package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/console"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/operatortest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const testToken = "test-token-0123456789abcdef-0123456789"

// backend is an operations.API the console runs over. The console's
// action tests and its browser test run over each, so that the console
// behaves the same whether it reaches the database itself or through the
// operator function.
type backend struct {
	name string
	// api returns the API over store, with the archive (nil: none
	// given).
	api func(t *testing.T, store *storage.Store, arch *testArchive) operations.API
}

// testArchive is the archive a test's API works on: its settings and its
// bucket.
type testArchive struct {
	cfg   archive.Config
	blobs *blobstore.Store
}

// newTestArchive is an archive of events processed over a minute ago, in
// a new bucket (made by bucket) on srv.
func newTestArchive(t *testing.T, bucket func(testing.TB, *locals3.Server) blobstore.Config, srv *locals3.Server) *testArchive {
	t.Helper()
	return &testArchive{cfg: archive.Config{Prefix: "archive", MinAge: time.Minute}, blobs: s3test.Open(t, bucket(t, srv))}
}

// parts are what operations.New takes of a.
func (a *testArchive) parts() (*archive.Config, *blobstore.Store) {
	if a == nil {
		return nil, nil
	}
	return &a.cfg, a.blobs
}

// backends are the APIs the tests run the console over.
var backends = []backend{{name: "direct", api: direct}, {name: "remote", api: remote}}

// direct is an operations.Service on the test's database: the backend of
// `webhookctl console` with database settings.
func direct(t *testing.T, store *storage.Store, arch *testArchive) operations.API {
	t.Helper()
	cfg, blobs := arch.parts()
	api, err := operations.New(operations.Config{Access: operations.AccessAct, Archive: cfg}, operations.Deps{Store: store, Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// remote is the operator API over the test's database, reached as
// `webhookctl console --stack` reaches a deployed stack: the client, signing
// with SigV4 as the acting identity, through the stand-in for IAM, to the
// real handler over a Service.
func remote(t *testing.T, store *storage.Store, arch *testArchive) operations.API {
	t.Helper()
	cfg, blobs := arch.parts()
	r := operatortest.Start(t, store, cfg, blobs)
	return r.Client(t, r.Operator)
}

// fixture is a console over a database of its own, and a browser-like
// client (a cookie jar) that has not logged in yet.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	pool   *pgxpool.Pool
	store  *storage.Store
	srv    *httptest.Server
	client *http.Client
	// who is the name the API records the console's actions under (its
	// Whoami), which the pages show.
	who string
}

// setup is a console over the first backend, without archive settings.
func setup(t *testing.T, edit func(*console.Config)) *fixture {
	t.Helper()
	return setupWith(t, backends[0], nil, edit)
}

// setupWith is a console over b on a database of its own, with the
// archive's settings arch; edit changes its configuration.
func setupWith(t *testing.T, b backend, arch *testArchive, edit func(*console.Config)) *fixture {
	t.Helper()
	pool := pgtest.Pool(t)
	store := storage.New(pool)
	f := serve(t, store, b.api(t, store, arch), edit)
	f.pool = pool
	return f
}

// serve starts the console over api, its identity the API's Whoami as
// `webhookctl console` asks it, unless edit gives one.
func serve(t *testing.T, store *storage.Store, api operations.API, edit func(*console.Config)) *fixture {
	t.Helper()
	cfg := console.Config{API: api, Token: testToken, Operator: operations.Operator{Name: "alice@ops"}}
	if edit != nil {
		edit(&cfg)
	}
	if cfg.Identity == nil {
		id, err := api.Whoami(operations.WithOperator(t.Context(), cfg.Operator))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Identity = id
	}
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &fixture{t: t, ctx: t.Context(), store: store, srv: srv, client: &http.Client{Jar: jar}, who: cfg.Identity.Operator}
}

// do sends req and returns the status and body.
func (f *fixture) do(req *http.Request) (int, string) {
	f.t.Helper()
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (f *fixture) get(path string) (int, string) {
	f.t.Helper()
	req, _ := http.NewRequestWithContext(f.ctx, http.MethodGet, f.srv.URL+path, nil)
	return f.do(req)
}

// login opens the address webhookctl prints.
func (f *fixture) login() {
	f.t.Helper()
	if code, body := f.get("/?token=" + testToken); code != http.StatusOK {
		f.t.Fatalf("login = %d\n%s", code, body)
	}
}

// post sends a form as the console's own page does (same origin), with
// headers overriding.
func (f *fixture) post(path string, form url.Values, headers map[string]string) (int, string) {
	f.t.Helper()
	req, _ := http.NewRequestWithContext(f.ctx, http.MethodPost, f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", f.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return f.do(req)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token from a page with a form.
func (f *fixture) csrf(page string) string {
	f.t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		f.t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	return m[1]
}

// deadLetter stores a dead event and returns its open dead letter's id.
func (f *fixture) deadLetter(source, typ string) (eventPK, dlID int64) {
	f.t.Helper()
	e := factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{Source: source, Type: typ, State: inbox.StateDead, LastError: "the downstream API answered 503"})
	dls, err := f.store.DeadLetterListByEvent(f.ctx, e.ID)
	if err != nil || len(dls) != 1 {
		f.t.Fatalf("dead letters of %d: %v %v", e.ID, dls, err)
	}
	return e.ID, dls[0].ID
}

// TestEveryPageNeedsTheToken: without the session the token starts, every
// page, the style sheet and every action answer 401; a wrong token starts
// none; the right one starts a session (HttpOnly, SameSite=Strict) and
// leaves the address without it.
func TestEveryPageNeedsTheToken(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	for _, p := range []string{"/", "/events", "/events/1", "/dead-letters", "/actions", "/static/console.css", "/?token=wrong-token-0123456789"} {
		if code, _ := f.get(p); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a session = %d, want 401", p, code)
		}
	}
	for _, p := range []string{"/dead-letters/requeue", "/dead-letters/resolve", "/events/replay", "/events/1/expunge", "/events/discard", "/quarantine/purge"} {
		if code, _ := f.post(p, url.Values{"all": {"1"}, "confirm": {"yes"}}, nil); code != http.StatusUnauthorized {
			t.Errorf("POST %s without a session = %d, want 401", p, code)
		}
	}
	// A forged cookie is no session.
	u, _ := url.Parse(f.srv.URL)
	f.client.Jar.SetCookies(u, []*http.Cookie{{Name: "webhookctl_console_" + u.Port(), Value: "abc.def"}})
	if code, _ := f.get("/"); code != http.StatusUnauthorized {
		t.Errorf("GET with a forged cookie = %d, want 401", code)
	}

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(f.srv.URL + "/events?state=dead&token=" + testToken)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/events?state=dead" {
		t.Errorf("login = %d to %q, want 303 to the page without the token", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The redirect stays on the console, whatever the path.
	for _, p := range []string{"//evil.example/", "/\\evil.example/"} {
		resp, err := noRedirect.Get(f.srv.URL + p + "?token=" + testToken)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") || strings.HasPrefix(loc, "/\\") {
			t.Errorf("login at %q redirects to %q", p, loc)
		}
	}
	cookie := resp.Header.Get("Set-Cookie")
	if !strings.HasPrefix(cookie, "webhookctl_console_"+u.Port()+"=") || !strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Strict") {
		t.Errorf("session cookie %q: want HttpOnly and SameSite=Strict", cookie)
	}

	f.login()
	req, _ := http.NewRequestWithContext(f.ctx, http.MethodGet, f.srv.URL+"/", nil)
	resp, err = f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for h, want := range map[string]string{
		"Content-Security-Policy": "default-src 'self'", "X-Content-Type-Options": "nosniff",
		"Cache-Control": "no-store", "X-Frame-Options": "DENY",
	} {
		if got := resp.Header.Get(h); !strings.Contains(got, want) {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("CSP %q lets a page frame the console", resp.Header.Get("Content-Security-Policy"))
	}
}

// TestActionsRefusedCrossSiteOrWithoutCSRF: a requeue from another origin
// (Origin or Sec-Fetch-Site), or without the session's CSRF token, or on a
// read-only console, is refused and changes nothing.
func TestActionsRefusedCrossSiteOrWithoutCSRF(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testActionsRefusedCrossSiteOrWithoutCSRF(t, b)
		})
	}
}

func testActionsRefusedCrossSiteOrWithoutCSRF(t *testing.T, b backend) {
	f := setupWith(t, b, nil, nil)
	_, dl := f.deadLetter("stripe", "invoice.paid")
	f.login()
	_, page := f.get("/dead-letters")
	csrf := f.csrf(page)
	form := func(csrf string) url.Values {
		return url.Values{"csrf": {csrf}, "id": {itoa(dl)}, "confirm": {"yes"}, "count": {"1"}}
	}
	for name, c := range map[string]struct {
		form    url.Values
		headers map[string]string
	}{
		"another site's Origin":   {form(csrf), map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": ""}},
		"cross-site fetch":        {form(csrf), map[string]string{"Sec-Fetch-Site": "cross-site"}},
		"same-site, other origin": {form(csrf), map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:1"}},
		"no CSRF token":           {url.Values{"id": {itoa(dl)}, "confirm": {"yes"}, "count": {"1"}}, nil},
		"another session's token": {form("bm90LXRoaXMtc2Vzc2lvbg"), nil},
	} {
		if code, body := f.post("/dead-letters/requeue", c.form, c.headers); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403\n%s", name, code, body)
		}
	}
	if n, err := f.store.DeadLetterCountRequeueable(f.ctx, storage.DeadLetterFilter{All: true}); err != nil || n != 1 {
		t.Fatalf("open dead letters after the refused requeues = %d, %v; want 1", n, err)
	}

	// The same request with the token does it: the refusals above were
	// the checks, not a broken form.
	if code, body := f.post("/dead-letters/requeue", form(csrf), nil); code != http.StatusOK || !strings.Contains(body, "Requeued 1 events") {
		t.Fatalf("the requeue with its token = %d\n%s", code, body)
	}

	ro := setupWith(t, b, nil, func(c *console.Config) { c.ReadOnly = true; c.Operator = operations.Operator{} })
	ro.deadLetter("stripe", "invoice.paid")
	ro.login()
	_, page = ro.get("/dead-letters")
	if strings.Contains(page, "Requeue") || strings.Contains(page, `method="post"`) {
		t.Errorf("a read-only console shows actions:\n%s", page)
	}
	if code, body := ro.post("/dead-letters/requeue", url.Values{"all": {"1"}, "confirm": {"yes"}, "count": {"1"}}, nil); code != http.StatusForbidden ||
		!strings.Contains(body, "read-only") {
		t.Errorf("read-only requeue = %d %q, want 403 saying read-only", code, body)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestRequeueCountsThenConfirms: the first POST shows how many events the
// requeue touches and changes nothing; the second, with the count seen,
// requeues them, recorded as an operator action by the console's actor;
// a count that changed in between asks again.
func TestRequeueCountsThenConfirms(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testRequeueCountsThenConfirms(t, b)
		})
	}
}

func testRequeueCountsThenConfirms(t *testing.T, b backend) {
	f := setupWith(t, b, nil, func(c *console.Config) { c.Reason = "INC-7" })
	ev1, _ := f.deadLetter("stripe", "invoice.paid")
	ev2, _ := f.deadLetter("stripe", "invoice.paid")
	f.deadLetter("github", "push")
	f.login()
	_, page := f.get("/dead-letters?source=stripe")
	csrf := f.csrf(page)

	code, body := f.post("/dead-letters/requeue", url.Values{"csrf": {csrf}, "source": {"stripe"}}, nil)
	if code != http.StatusOK || !strings.Contains(body, "This requeues <strong>2</strong> events") {
		t.Fatalf("first POST = %d, want the count to confirm\n%s", code, body)
	}
	if n, _ := f.store.DeadLetterCountRequeueable(f.ctx, storage.DeadLetterFilter{All: true}); n != 3 {
		t.Fatalf("the first POST changed something: %d open, want 3", n)
	}

	// A third stripe dead letter since: the count the operator saw is stale.
	ev3, _ := f.deadLetter("stripe", "invoice.paid")
	confirm := url.Values{"csrf": {csrf}, "source": {"stripe"}, "confirm": {"yes"}, "count": {"2"}}
	if code, body := f.post("/dead-letters/requeue", confirm, nil); code != http.StatusConflict || !strings.Contains(body, "changed since you looked") ||
		!strings.Contains(body, "<strong>3</strong>") {
		t.Fatalf("stale confirmation = %d, want 409 asking again\n%s", code, body)
	}
	confirm.Set("count", "3")
	if code, body := f.post("/dead-letters/requeue", confirm, nil); code != http.StatusOK || !strings.Contains(body, "Requeued 3 events") {
		t.Fatalf("confirmed requeue = %d\n%s", code, body)
	}
	now, _ := f.store.PGNow(f.ctx)
	for _, id := range []int64{ev1, ev2, ev3} {
		e, err := f.store.EventGetByID(f.ctx, id)
		if err != nil || e.State(now) != inbox.StatePending {
			t.Errorf("event %d after the requeue: %v, %v; want pending (due)", id, e.State(now), err)
		}
	}
	if n, _ := f.store.DeadLetterCountRequeueable(f.ctx, storage.DeadLetterFilter{All: true}); n != 1 {
		t.Errorf("open dead letters = %d, want github's 1", n)
	}
	acts, err := f.store.OperatorActionList(f.ctx, time.Time{}, 10)
	if err != nil || len(acts) != 1 {
		t.Fatalf("operator actions = %+v, %v; want one", acts, err)
	}
	if !field.Check(t, "operator action",
		field.Eq("Actor", acts[0].Actor, f.who),
		field.Eq("Reason", acts[0].Reason, "INC-7"),
		field.Eq("Events", acts[0].Events, 3),
		field.Is("Filter", string(acts[0].Filter), strings.Contains(strings.ReplaceAll(string(acts[0].Filter), " ", ""), `"source":"stripe"`), "source stripe"),
	) {
		t.FailNow()
	}
	if _, page := f.get("/actions"); !strings.Contains(page, f.who) || !strings.Contains(page, "INC-7") {
		t.Errorf("the actions page does not show the requeue:\n%s", page)
	}
}

// TestDatabaseTextIsEscaped: what senders chose (event ids, types, bodies,
// errors) is shown as text, never as markup, and bidi overrides are
// escaped.
func TestDatabaseTextIsEscaped(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	body := []byte(`{"note":"<script>alert(1)</script>","rlo":"a` + "\u202e" + `b"}`)
	e := factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{EventID: `evt_<img src=x onerror=alert(1)>`, Type: `<b>bold</b>`, Body: body})
	f.login()
	for _, p := range []string{"/events", "/events/" + itoa(e.ID)} {
		_, page := f.get(p)
		for _, bad := range []string{"<script>", "<img", "<b>bold", "\u202e"} {
			if strings.Contains(page, bad) {
				t.Errorf("%s contains %q unescaped", p, bad)
			}
		}
		if !strings.Contains(page, "&lt;b&gt;bold&lt;/b&gt;") {
			t.Errorf("%s does not show the type as text", p)
		}
	}
	if _, page := f.get("/events/" + itoa(e.ID)); !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") || !strings.Contains(page, `\u202e`) {
		t.Errorf("the body is not shown escaped:\n%s", page)
	}
}

// TestEventsFilterFindAndPage: the list filters by source, type and state,
// pages by id (keyset), finds an event by id or by source and sender's id,
// and says what is wrong with a bad filter.
func TestEventsFilterFindAndPage(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	many := factory.Events(f.ctx, f.t, f.store, 55, &factory.EventOpts{Source: "stripe", Type: "invoice.paid"})
	gh := factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{Source: "github", SourceKind: "github", EventID: "delivery-1", Type: "push"})
	dead := factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{Source: "github", SourceKind: "github", Type: "push", State: inbox.StateDead})
	f.login()

	_, page := f.get("/events?source=github&state=dead")
	if !strings.Contains(page, `href="/events/`+itoa(dead.ID)+`"`) || strings.Contains(page, `href="/events/`+itoa(gh.ID)+`"`) {
		t.Errorf("source=github&state=dead does not list exactly the dead event:\n%s", page)
	}
	unhandled := factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{Source: "github", SourceKind: "github", Type: "star",
		State: inbox.StateProcessed, Outcome: inbox.OutcomeUnhandled})
	_, page = f.get("/events?state=unhandled")
	if !strings.Contains(page, `href="/events/`+itoa(unhandled.ID)+`"`) || strings.Count(page, `<tr><td class="num"><a href="/events/`) != 1 ||
		!strings.Contains(page, `<option selected>unhandled</option>`) {
		t.Errorf("state=unhandled does not list exactly the unhandled event:\n%s", page)
	}
	_, page = f.get("/events?source=stripe")
	if strings.Count(page, `<tr><td class="num"><a href="/events/`) != 50 || !strings.Contains(page, `id="next"`) {
		t.Fatalf("first page: want 50 rows and a next link\n%s", page)
	}
	next := regexp.MustCompile(`id="next" href="([^"]+)"`).FindStringSubmatch(page)[1]
	_, page = f.get(strings.ReplaceAll(next, "&amp;", "&"))
	if strings.Count(page, `<tr><td class="num"><a href="/events/`) != 5 || !strings.Contains(page, `href="/events/`+itoa(many[0].ID)+`"`) ||
		strings.Contains(page, `id="next"`) {
		t.Errorf("second page: want the 5 oldest and no next link\n%s", page)
	}

	noRedirect := &http.Client{Jar: f.client.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for q, want := range map[string]string{
		"find=delivery-1&source=github": itoa(gh.ID), "find=" + itoa(dead.ID): itoa(dead.ID),
		// Without a source, a sender's id that one source has.
		"find=delivery-1": itoa(gh.ID), "find=" + url.QueryEscape(many[3].EventID): itoa(many[3].ID),
	} {
		resp, err := noRedirect.Get(f.srv.URL + "/events?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/events/"+want {
			t.Errorf("find %s = %d %q, want /events/%s", q, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
	for q, want := range map[string]string{
		"find=nope&source=github": "no such event", "find=nope": "no such event",
		"state=due-ish": "state:", "since=-1h": "since:", "from=yesterday": "from:",
	} {
		if code, page := f.get("/events?" + q); code < 400 || !strings.Contains(page, want) {
			t.Errorf("events?%s = %d, want an error saying %q", q, code, want)
		}
	}
	// A sender's id two sources have: both are listed, to choose.
	other := factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{Source: "shopify", SourceKind: "shopify", EventID: "delivery-1", Type: "orders/create"})
	code, page := f.get("/events?find=delivery-1")
	if code != http.StatusOK || !strings.Contains(page, `id="found"`) || strings.Count(page, `<tr><td class="num"><a href="/events/`) != 2 ||
		!strings.Contains(page, `href="/events/`+itoa(gh.ID)+`"`) || !strings.Contains(page, `href="/events/`+itoa(other.ID)+`"`) {
		t.Errorf("find=delivery-1 of two sources = %d, want both listed\n%s", code, page)
	}
}

// TestOverviewAndBodies: the overview counts the backlog, the open dead
// letters and the refusals of the window by cause; an event's body is
// shown from Postgres (JSON indented), and an archived one without the
// archive's settings says how to give them, as an expunged one says it
// was erased.
func TestOverviewAndBodies(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *console.Config) { c.Window = operations.Span(time.Hour) })
	factory.Events(f.ctx, f.t, f.store, 2, nil)
	f.deadLetter("stripe", "invoice.paid")
	for range 3 {
		factory.Rejection(f.ctx, f.t, f.store, &factory.RejectionOpts{Source: "stripe", Cause: inbox.CauseSignatureMismatch})
	}
	factory.Rejection(f.ctx, f.t, f.store, &factory.RejectionOpts{Source: "stripe", Cause: inbox.CauseSignatureMismatch, ReceivedAt: time.Now().Add(-2 * time.Hour)})
	inPG := factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{Body: []byte(`{"a":{"b":1}}`), State: inbox.StateProcessed})
	archived := factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{State: inbox.StateArchived})
	expunged := factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{State: inbox.StateExpunged})
	f.login()

	_, page := f.get("/")
	for _, want := range []string{
		`<div class="card" id="backlog"><h2>Backlog</h2><p class="big">2</p>`,
		`<div class="card" id="dead-letters"><h2>Open dead letters</h2><p class="big">1</p>`,
		`<h2>Refused, last 1h</h2><p class="big">3</p>`,
		`<td><a href="/refusals#cause-signature_mismatch"><code>signature_mismatch</code></a></td><td class="num">3</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("overview lacks %s\n%s", want, page)
		}
	}
	for id, want := range map[int64]string{
		inPG.ID:     "<pre id=\"body\">{\n  &#34;a&#34;: {\n    &#34;b&#34;: 1\n  }\n}</pre>",
		archived.ID: "the console has no archive settings",
		expunged.ID: "the body was expunged",
	} {
		if code, page := f.get("/events/" + itoa(id)); code != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("event %d = %d, want %q\n%s", id, code, want, page)
		}
	}
	if code, _ := f.get("/events/999999"); code != http.StatusNotFound {
		t.Errorf("an unknown event = %d, want 404", code)
	}
}

// Every page reads the same through the operator API as directly: one
// database, a console over each backend, the same addresses, the same
// <main> (the layout's header says who acts, which differs on purpose: a
// name declared, or a principal IAM verified).
func TestEveryPageIsTheSameThroughTheOperatorAPI(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := storage.New(pool)
	ctx := t.Context()
	srv := s3test.ServerWith(t, locals3.Options{Versioning: true})
	arch := newTestArchive(t, s3test.VersionedBucket, srv)
	hourAgo := time.Now().Add(-time.Hour)
	archived := factory.Event(ctx, t, store, &factory.EventOpts{EventID: "evt_arch", Body: []byte(`{"id":"evt_arch","amount":42}`),
		State: inbox.StateProcessed, ProcessedAt: &hourAgo})
	if _, err := direct(t, store, arch).ArchiveRun(operations.WithOperator(ctx, operations.Operator{Name: "setup"}), operations.ArchiveRunRequest{}); err != nil {
		t.Fatal(err)
	}
	inPG := factory.Event(ctx, t, store, &factory.EventOpts{Source: "github", EventID: "gh-1", Body: []byte(`{"x":1}`), State: inbox.StateProcessed})
	dead := factory.Event(ctx, t, store, &factory.EventOpts{Source: "github", EventID: "gh-2", Type: "issues", State: inbox.StateDead, LastError: "tracker down"})
	factory.Events(ctx, t, store, 3, &factory.EventOpts{Type: "invoice.paid"})
	factory.Event(ctx, t, store, &factory.EventOpts{State: inbox.StateExpunged})
	factory.Rejection(ctx, t, store, &factory.RejectionOpts{Source: "stripe", Cause: inbox.CauseSignatureMismatch})
	held := factory.Quarantined(ctx, t, store, &factory.QuarantinedOpts{Source: "github", Kind: "github", Body: []byte("{\"forged\":\"\x1b[2J\"}")})
	var fs []*fixture
	for _, b := range backends {
		f := serve(t, store, b.api(t, store, arch), nil)
		f.login()
		fs = append(fs, f)
	}
	main := regexp.MustCompile(`(?s)<main>.*</main>`)
	volatile := regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?|\b(\d+(\.\d+)?(h|m|s|ms|µs))+\b|name="csrf" value="[^"]+"`)
	for _, path := range []string{
		"/", "/refusals", "/events", "/events?source=github", "/events?state=dead", "/events?type=invoice.paid&since=1d",
		"/events?find=gh-1", "/events?find=nothing", "/events/" + itoa(archived.ID), "/events/" + itoa(inPG.ID), "/events/" + itoa(dead.ID),
		"/events/999999", "/dead-letters", "/dead-letters?source=github", "/actions", "/events?state=sleeping",
		"/events?match=" + url.QueryEscape(`{"x":1}`), "/events?match=" + url.QueryEscape(`{"x":`), "/events?header=X-Nope%3D1",
		"/quarantine", "/quarantine?source=github", "/quarantine/" + itoa(held), "/quarantine/999999",
	} {
		var pages []string
		var codes []int
		for _, f := range fs {
			code, page := f.get(path)
			codes = append(codes, code)
			pages = append(pages, volatile.ReplaceAllString(main.FindString(page), "<volatile>"))
		}
		if codes[0] != codes[1] || pages[0] != pages[1] || pages[0] == "" {
			t.Errorf("%s differs through the operator API: %d and %d\n--- direct\n%s\n--- remote\n%s", path, codes[0], codes[1], pages[0], pages[1])
		}
	}
}
