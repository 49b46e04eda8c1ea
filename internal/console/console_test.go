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

	"github.com/webhook-inbox/webhook-inbox/internal/console"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const testToken = "test-token-0123456789abcdef"

// fixture is a console over a database of its own, and a browser-like
// client (a cookie jar) that has not logged in yet.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	store  *storage.Store
	srv    *httptest.Server
	client *http.Client
}

func setup(t *testing.T, edit func(*console.Config)) *fixture {
	t.Helper()
	pool := pgtest.Pool(t)
	store := storage.New(pool)
	cfg := console.Config{Store: store, Token: testToken, Actor: inbox.Actor{Name: "alice@ops"}}
	if edit != nil {
		edit(&cfg)
	}
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &fixture{t: t, ctx: t.Context(), store: store, srv: srv, client: &http.Client{Jar: jar}}
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
	if code, _ := f.post("/dead-letters/requeue", url.Values{"all": {"1"}}, nil); code != http.StatusUnauthorized {
		t.Errorf("POST without a session = %d, want 401", code)
	}
	// A forged cookie is no session.
	u, _ := url.Parse(f.srv.URL)
	f.client.Jar.SetCookies(u, []*http.Cookie{{Name: "webhookctl_console", Value: "abc.def"}})
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
	cookie := resp.Header.Get("Set-Cookie")
	if !strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Strict") {
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
	f := setup(t, nil)
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

	ro := setup(t, func(c *console.Config) { c.ReadOnly = true; c.Actor = inbox.Actor{} })
	ro.deadLetter("stripe", "invoice.paid")
	ro.login()
	_, page = ro.get("/dead-letters")
	if strings.Contains(page, "Requeue") || strings.Contains(page, `method="post"`) {
		t.Errorf("a read-only console shows actions:\n%s", page)
	}
	if code, _ := ro.post("/dead-letters/requeue", url.Values{"all": {"1"}, "confirm": {"yes"}, "count": {"1"}}, nil); code != http.StatusForbidden {
		t.Errorf("read-only requeue = %d, want 403", code)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
