package receiver_test

import (
	"bytes"
	"crypto/rand"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// shiftSources has an hmac source signing "{id}.{body}".
const shiftSources = `{"sources": {
  "acme": {"kind": "hmac", "secrets": ["acme-shift-secret-0123456789"], "signature_header": "X-Acme-Signature",
           "signed_content": "{id}.{body}", "event_id": {"header": "X-Acme-Id"}, "event_type": {"header": "X-Acme-Type"}}
}}`

// The id/body shift, against the real receiver and Postgres: a
// captured delivery re-posted with bytes moved from its body into its id
// header (the same signature) was stored as a new event; it is refused,
// and only the captured one is stored.
func TestHMACIDBodyShiftIsNotStored(t *testing.T) {
	t.Parallel()
	set, err := source.Parse([]byte(shiftSources))
	if err != nil {
		t.Fatal(err)
	}
	f := setupOn(t, pgtest.Pool(t), receiver.Config{}, receiver.Deps{Sources: set})
	body := []byte(`one.two.{"amount":100}`)
	captured := f.signed("acme", body, "evt_1")
	captured.Header.Set("X-Acme-Type", "invoice.paid")
	if a := f.do(captured); a.Code != http.StatusOK || a.Status != receiver.StatusAccepted {
		t.Fatalf("the captured delivery: %+v", a)
	}
	for _, shift := range []struct{ id, body string }{
		{"evt_1.one", `two.{"amount":100}`},
		{"evt_1.one.two", `{"amount":100}`},
	} {
		r := httptest.NewRequest(http.MethodPost, "/webhooks/acme", strings.NewReader(shift.body))
		r.Header = captured.Header.Clone()
		r.Header.Set("X-Acme-Id", shift.id)
		r.Header.Set("X-Acme-Type", "refund.created") // the type is the attacker's
		if a := f.do(r); a.Code != http.StatusUnauthorized || a.Cause != inbox.CauseUnauthenticated {
			t.Errorf("shifted to id %q: %+v, want 401 unauthenticated", shift.id, a)
		}
	}
	if n := f.count(); n != 1 {
		t.Fatalf("%d events stored, want the captured one only", n)
	}
}

// The mux's 307 to a cleaned path echoes the path; it is
// nosniff and no-store like every other answer, and its HTML body (GET)
// is declared as such and escapes the path.
func TestRedirectIsNosniff(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(method, "/webhooks/x/../%3Cscript%3Ealert(1)%3C%2Fscript%3E", nil)
		f.handler.ServeHTTP(w, r)
		if w.Code != http.StatusTemporaryRedirect {
			t.Fatalf("%s: status %d, want the mux's 307 (did the routing change? then this test moves with it)", method, w.Code)
		}
		if got := w.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q, want nosniff", method, got)
		}
		if got := w.Header().Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s: Cache-Control %q, want no-store", method, got)
		}
		if ct := w.Header().Get("Content-Type"); method == http.MethodGet && ct != "text/html; charset=utf-8" {
			t.Errorf("%s: Content-Type %q", method, ct)
		}
		if strings.Contains(w.Body.String(), "<script>") {
			t.Errorf("%s: the body echoes the path unescaped: %q", method, w.Body.String())
		}
	}
}

// unauthenticatedRequests is a 1 MiB body and the requests the timing
// benchmark compares: a configured source with a wrong signature (its
// verifier hashes the body), an unknown source, and a configured source
// with no signature at all (both refused before any verifier hashes it).
func unauthenticatedRequests(tb testing.TB, body []byte) map[string]func() *http.Request {
	req := func(path string, sig bool) func() *http.Request {
		return func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
			if sig {
				r.Header.Set("Stripe-Signature", "t=1700000000,v1="+strings.Repeat("ab", 32))
			}
			return r
		}
	}
	return map[string]func() *http.Request{
		"known": req("/webhooks/stripe", true), "unknown": req("/webhooks/no-such-source", true), "unsigned": req("/webhooks/stripe", false),
	}
}

// BenchmarkUnauthenticatedAt1MiB measures the timing oracle on names:
// at 1 MiB, a known source's refused signature and the refusals that come
// before any verifier (an unknown name, a missing signature), interleaved,
// each one's time reported relative to the known source's. Before the
// decoy HMAC an unknown name took about half of a known one's time; the
// ratios should be close to 1. A benchmark, never a timed test:
// `go test -run '^$' -bench UnauthenticatedAt1MiB ./shared/receiver`.
func BenchmarkUnauthenticatedAt1MiB(b *testing.B) {
	f := setupBench(b)
	b.ReportAllocs()
	body := make([]byte, 1<<20)
	_, _ = rand.Read(body)
	reqs := unauthenticatedRequests(b, body)
	took := map[string]time.Duration{}
	for b.Loop() {
		for _, name := range []string{"known", "unknown", "unsigned"} {
			r := reqs[name]()
			w := httptest.NewRecorder()
			start := time.Now()
			f.ServeHTTP(w, r)
			took[name] += time.Since(start)
			if w.Code != http.StatusUnauthorized {
				b.Fatalf("%s: %d", name, w.Code)
			}
		}
	}
	b.ReportMetric(float64(took["unknown"])/float64(took["known"]), "unknown/known")
	b.ReportMetric(float64(took["unsigned"])/float64(took["known"]), "unsigned/known")
}

// setupBench is a receiver over a migrated database for a benchmark:
// nothing here reaches the database (every request is refused before).
func setupBench(b testing.TB) *receiver.Handler {
	// One secret, as outside a rotation: each secret is one more pass
	// over the body (docs/security.md).
	set, err := source.Parse([]byte(`{"sources": {"stripe": {"kind": "stripe", "secrets": ["whsec_solo_0123456789abcdefghij"]}}}`))
	if err != nil {
		b.Fatal(err)
	}
	h, err := receiver.New(receiver.Config{MaxBodyBytes: 8 << 20},
		receiver.Deps{Sources: set, Store: storage.New(pgtest.Pool(b)), Clock: fixedClock(now), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Close(b.Context()) })
	return h
}
