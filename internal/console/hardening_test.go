package console_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/console"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testclock"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// bare is a console over a database of its own, served in-process (no
// listener): each request is built by the test, Host and remote address
// included.
func bare(t *testing.T, edit func(*console.Config)) *console.Server {
	t.Helper()
	store := storage.New(pgtest.Pool(t))
	api := direct(t, store, nil)
	cfg := console.Config{API: api, Token: testToken, Operator: operations.Operator{Name: "alice@ops"}}
	if edit != nil {
		edit(&cfg)
	}
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// send serves a GET of target with the Host host from the remote address
// remote.
func send(c http.Handler, host, target, remote string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.Host, r.RemoteAddr = host, remote
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w
}

// TestConsoleRefusesForeignHosts: a page whose Host is not the console's
// own address (a DNS name rebound to 127.0.0.1, say) is refused before
// anything else, the right token included: 421 with what to do. Loopback
// addresses, localhost and the names configured (--host) are served.
func TestConsoleRefusesForeignHosts(t *testing.T) {
	t.Parallel()
	c := bare(t, func(cfg *console.Config) { cfg.Hosts = []string{"console.internal"} })
	for _, host := range []string{"attacker.example:8089", "attacker.example", "127.0.0.1.nip.io:8089", "localhost.attacker.example:8089", "", "console.internal.evil:8089"} {
		w := send(c, host, "/?token="+testToken, "127.0.0.1:5000")
		if w.Code != http.StatusMisdirectedRequest || !strings.Contains(w.Body.String(), "Host") {
			t.Errorf("Host %q = %d %q, want 421 naming the Host", host, w.Code, w.Body.String())
		}
		if w.Header().Get("Set-Cookie") != "" {
			t.Errorf("Host %q started a session", host)
		}
	}
	for _, host := range []string{"127.0.0.1:8089", "localhost:8089", "LOCALHOST:8089", "[::1]:8089", "127.0.0.1", "console.internal:8089", "10.0.0.5:8089"} {
		if w := send(c, host, "/?token="+testToken, "127.0.0.1:5000"); w.Code != http.StatusSeeOther {
			t.Errorf("Host %q = %d %q, want the login's 303", host, w.Code, w.Body.String())
		}
	}
	if _, err := console.New(console.Config{API: direct(t, storage.New(pgtest.Pool(t)), nil), Token: testToken, ReadOnly: true, Hosts: []string{"bad host/"}}); err == nil {
		t.Error("a host name that is none was accepted")
	}
}

// TestConsoleRateLimitsWrongTokens: wrong tokens from one address are
// answered 401 a few times, then 429 with Retry-After, the right token
// included (no oracle while limited), until the clock has given an attempt
// back; another address has attempts of its own, and a session is never
// limited.
func TestConsoleRateLimitsWrongTokens(t *testing.T) {
	t.Parallel()
	clk := testclock.At(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	c := bare(t, func(cfg *console.Config) { cfg.Now = clk.Now })
	const host, attacker = "127.0.0.1:8089", "127.0.0.1:40000"
	for i := range console.TokenAttempts {
		if w := send(c, host, "/?token=wrong-token-0123456789-0123456789", attacker); w.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d = %d, want 401", i+1, w.Code)
		}
	}
	for _, tok := range []string{"wrong-token-0123456789-0123456789", testToken} {
		w := send(c, host, "/?token="+tok, attacker)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || w.Header().Get("Set-Cookie") != "" {
			t.Errorf("past the limit = %d, Retry-After %q, cookie %q: want 429 with Retry-After and no session",
				w.Code, w.Header().Get("Retry-After"), w.Header().Get("Set-Cookie"))
		}
	}
	// Another address is not limited by the first's failures.
	if w := send(c, host, "/?token="+testToken, "127.0.0.2:40000"); w.Code != http.StatusSeeOther {
		t.Errorf("another address = %d, want the login's 303", w.Code)
	}
	// Time gives attempts back.
	clk.Advance(console.TokenAttemptEvery)
	w := send(c, host, "/?token="+testToken, attacker)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("after %s = %d, want the login's 303", console.TokenAttemptEvery, w.Code)
	}
	// A signed-in browser is never limited, however many wrong tokens
	// its address sent.
	cookie := w.Header().Get("Set-Cookie")
	for range console.TokenAttempts + 1 {
		send(c, host, "/?token=wrong-token-0123456789-0123456789", attacker)
	}
	r := httptest.NewRequest(http.MethodGet, "/actions", nil)
	r.Host, r.RemoteAddr = host, attacker
	r.Header.Set("Cookie", strings.Split(cookie, ";")[0])
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		t.Errorf("a session's page while its address is limited = %d", rec.Code)
	}
}

// TestConsoleTokenLength: a configured token shorter than 32 characters
// (128 bits of entropy at 4 bits a character, the least a hex token
// carries) is refused at start with what to do; a generated one is
// longer.
func TestConsoleTokenLength(t *testing.T) {
	t.Parallel()
	short := strings.Repeat("x", 31)
	env := func(string) string { return "" }
	if _, _, err := console.TokenFromEnv(short, env); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a 31-character token: %v, want refused", err)
	}
	if _, _, err := console.TokenFromEnv("", func(string) string { return short }); err == nil {
		t.Error("a 31-character $WEBHOOKCTL_CONSOLE_TOKEN was accepted")
	}
	if tok, _, err := console.TokenFromEnv(strings.Repeat("x", 32), env); err != nil || len(tok) != 32 {
		t.Errorf("a 32-character token: %q %v", tok, err)
	}
	if tok, generated, err := console.TokenFromEnv("", env); err != nil || !generated || len(tok) < console.MinTokenLength {
		t.Errorf("a generated token: %q %v %v", tok, generated, err)
	}
	if _, err := console.New(console.Config{API: direct(t, storage.New(pgtest.Pool(t)), nil), Token: short, ReadOnly: true}); err == nil {
		t.Error("console.New took a 31-character token")
	}
}

// TestConsoleSignInCodeIsOneTime: the address webhookctl console prints
// carries a one-time code, not the token: it signs one browser in (a
// session and a 303 to the page without it), then never again, nor after
// SignInCodeTTL; a code this console never minted is a wrong attempt.
// The address a browser keeps in its history is spent.
func TestConsoleSignInCodeIsOneTime(t *testing.T) {
	t.Parallel()
	clk := testclock.At(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	c := bare(t, func(cfg *console.Config) { cfg.Now = clk.Now })
	const host = "127.0.0.1:8089"
	code := c.SignInCode()
	w := send(c, host, "/events?code="+code, "127.0.0.1:40000")
	if w.Code != http.StatusSeeOther || w.Header().Get("Set-Cookie") == "" || strings.Contains(w.Header().Get("Location"), code) {
		t.Fatalf("first use = %d, cookie %q, Location %q: want a session and a 303 without the code", w.Code, w.Header().Get("Set-Cookie"), w.Header().Get("Location"))
	}
	if w := send(c, host, "/events?code="+code, "127.0.0.3:40000"); w.Code != http.StatusUnauthorized || w.Header().Get("Set-Cookie") != "" {
		t.Fatalf("second use = %d, cookie %q: want 401 and no session", w.Code, w.Header().Get("Set-Cookie"))
	}
	late := c.SignInCode()
	clk.Advance(console.SignInCodeTTL)
	if w := send(c, host, "/?code="+late, "127.0.0.4:40000"); w.Code != http.StatusUnauthorized {
		t.Fatalf("a code used after %s = %d, want 401", console.SignInCodeTTL, w.Code)
	}
	if w := send(c, host, "/?code="+console.NewToken(), "127.0.0.5:40000"); w.Code != http.StatusUnauthorized {
		t.Fatalf("a code never minted = %d, want 401", w.Code)
	}
}
