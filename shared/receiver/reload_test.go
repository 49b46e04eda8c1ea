package receiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/emftest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testclock"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// The sources documents of these tests: "stripe" and "stripe-us" from the
// start; "stripe-eu" added later; "stripe" rolled to a new secret, then
// to another.
const (
	secretOne    = "whsec_reload_one_0123456789abcdef"
	secretUS     = "whsec_reload_us_0123456789abcdefg"
	secretEU     = "whsec_reload_eu_0123456789abcdefg"
	secretRolled = "whsec_reload_rolled_0123456789abc"
	secretAgain  = "whsec_reload_again_0123456789abcd"
)

func sourcesWith(stripeSecret string, more string) string {
	return fmt.Sprintf(`{"sources":{"stripe":{"kind":"stripe","secrets":[%q]},"stripe-us":{"kind":"stripe","secrets":[%q]}%s}}`, stripeSecret, secretUS, more)
}

var (
	docStart  = sourcesWith(secretOne, "")
	docEU     = sourcesWith(secretOne, fmt.Sprintf(`,"stripe-eu":{"kind":"stripe","secrets":[%q]}`, secretEU))
	docRolled = sourcesWith(secretRolled, "")
	docAgain  = sourcesWith(secretAgain, "")
)

// reloading is a receiver whose sources document is a file it reads
// again through the path the Lambda reads it through
// (secrets.SourcesReader), on a clock the test moves.
type reloading struct {
	*fixture
	file  string
	clock *testclock.Clock
	reads atomic.Int64
	logs  *syncBuffer
}

// setupReload starts a receiver on doc, read again every interval (0:
// only after a burst of mismatches), with its metrics on.
func setupReload(t *testing.T, interval time.Duration, doc string) *reloading {
	t.Helper()
	r := &reloading{file: filepath.Join(t.TempDir(), "sources.json"), clock: testclock.At(now), logs: &syncBuffer{}}
	r.write(t, doc)
	read, err := secrets.SourcesReader(t.Context(), func(k string) string {
		if k == source.EnvSourcesFile {
			return r.file
		}
		return ""
	})
	if err != nil || read == nil {
		t.Fatalf("SourcesReader over a file: %v", err)
	}
	set, err := source.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	r.fixture = setupOn(t, pgtest.Pool(t), receiver.Config{SourcesRefresh: interval}, receiver.Deps{
		Sources: set, Clock: r.clock, Logger: slog.New(slog.NewJSONHandler(r.logs, nil)),
		ReadSources: func(ctx context.Context) ([]byte, error) { r.reads.Add(1); return read(ctx) },
	})
	return r
}

// write replaces the sources file, as an editor or a deploy does.
func (r *reloading) write(t *testing.T, doc string) {
	t.Helper()
	tmp := r.file + ".new"
	if err := os.WriteFile(tmp, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, r.file); err != nil {
		t.Fatal(err)
	}
}

// deliver posts a Stripe event to name, signed now as doc's source of
// that name signs it (a sender that knows the secrets of doc), and
// returns the answer; safe from several goroutines.
func (r *reloading) deliver(t *testing.T, doc, name, eventID string) answer {
	t.Helper()
	set, err := source.Parse([]byte(doc))
	if err != nil {
		t.Error(err)
		return answer{}
	}
	src, ok := set.Lookup(name)
	if !ok {
		t.Errorf("no source %s in the document", name)
		return answer{}
	}
	body := stripeEvent(t, eventID)
	sr, err := sender.Sign(src, body, eventID, r.clock.Now())
	if err != nil {
		t.Error(err)
		return answer{}
	}
	req := httptest.NewRequest(http.MethodPost, "/webhooks/"+name, bytes.NewReader(body))
	for k, v := range sr.Header {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	r.handler.ServeHTTP(w, req)
	a := answer{Code: w.Code}
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Errorf("response is not JSON: %q", w.Body.String())
	}
	return a
}

// linesWith returns the log lines whose cause is cause, decoded, with
// their raw text.
func (r *reloading) linesWith(t *testing.T, cause inbox.Cause) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range r.logs.lines() {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		if m["cause"] == string(cause) {
			if err := emftest.Validate(l); err != nil {
				t.Errorf("%s line is not EMF: %v\n%s", cause, err, l)
			}
			out = append(out, m)
		}
	}
	return out
}

// TestNewSourceServedAfterTheInterval: a source added to the document is
// unknown until the interval has passed since the receiver started, and
// served from the first request after it, which reads the document once.
func TestNewSourceServedAfterTheInterval(t *testing.T) {
	t.Parallel()
	r := setupReload(t, time.Minute, docStart)
	r.write(t, docEU)
	if a := r.deliver(t, docEU, "stripe-eu", "evt_eu_early"); a.Code != http.StatusUnauthorized {
		t.Fatalf("a source added a moment ago: %+v, want 401 until the interval passes", a)
	}
	r.clock.Advance(time.Minute - time.Second)
	if a := r.deliver(t, docEU, "stripe-eu", "evt_eu_still_early"); a.Code != http.StatusUnauthorized || r.reads.Load() != 0 {
		t.Fatalf("a second before the interval: %+v, %d reads; want 401 and none", a, r.reads.Load())
	}
	r.clock.Advance(time.Second)
	if a := r.deliver(t, docEU, "stripe-eu", "evt_eu_served"); a.Code != http.StatusOK || a.Status != receiver.StatusAccepted {
		t.Fatalf("after the interval: %+v, want accepted", a)
	}
	// The sources it had are served as before, without another read.
	if a := r.deliver(t, docStart, "stripe", "evt_stripe_after"); a.Status != receiver.StatusAccepted || r.reads.Load() != 1 {
		t.Fatalf("stripe after the re-read: %+v, %d reads; want accepted and 1", a, r.reads.Load())
	}
	var changed bool
	for _, l := range r.logs.lines() {
		changed = changed || (bytes.Contains(l, []byte(`"sources: the document changed; new requests are served with it"`)) &&
			bytes.Contains(l, []byte(`"added":["stripe-eu"]`)) && bytes.Contains(l, []byte(`"level":"INFO"`)))
		if bytes.Contains(l, []byte("whsec_")) {
			t.Errorf("a log line shows a secret: %s", l)
		}
	}
	if !changed {
		t.Errorf("no line says the sources changed:\n%s", r.logs.lines())
	}
}

// TestRequestsFlowThroughReloads: while the document changes and is read
// again and again, every request of a source present throughout is
// verified and stored, none dropped or refused (run with -race: a request
// finishes on the set it started with).
func TestRequestsFlowThroughReloads(t *testing.T) {
	t.Parallel()
	r := setupReload(t, time.Minute, docStart)
	const senders, each, swaps = 4, 20, 8
	var wg sync.WaitGroup
	var refused atomic.Int64
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				if a := r.deliver(t, docStart, "stripe", fmt.Sprintf("evt_flow_%d_%d", s, i)); a.Status != receiver.StatusAccepted {
					refused.Add(1)
					t.Errorf("sender %d, event %d: %+v", s, i, a)
				}
			}
		})
	}
	for i := range swaps {
		doc := docEU
		if i%2 == 1 {
			doc = docStart
		}
		r.write(t, doc)
		r.clock.Advance(time.Minute)
		if a := r.deliver(t, docStart, "stripe", fmt.Sprintf("evt_swap_%d", i)); a.Status != receiver.StatusAccepted {
			t.Errorf("swap %d: %+v", i, a)
		}
	}
	wg.Wait()
	if n := r.count(); n != senders*each+swaps || refused.Load() != 0 {
		t.Fatalf("%d events stored, %d refused; want %d stored", n, refused.Load(), senders*each+swaps)
	}
	if r.reads.Load() == 0 {
		t.Fatal("the document was never read again")
	}
	// Once the traffic is over, the last document written is served.
	r.write(t, docEU)
	r.clock.Advance(time.Minute)
	if a := r.deliver(t, docEU, "stripe-eu", "evt_eu_last"); a.Status != receiver.StatusAccepted {
		t.Fatalf("the last document: %+v", a)
	}
}

// TestBadDocumentIsRefused: a document that does not parse leaves the
// sources as they were, and every re-read says so in an error line whose
// metric the alarm watches, without a secret; one that cannot be read
// does too, with its own cause; a fixed document is then served.
func TestBadDocumentIsRefused(t *testing.T) {
	t.Parallel()
	r := setupReload(t, time.Minute, docStart)
	// A valid source beside an invalid one: the whole document is refused,
	// so stripe's secret stays the one it was.
	r.write(t, sourcesWith(secretRolled, `,"broken":{"kind":"nope","secrets":["whsec_reload_leak_0123456789abc"]}`))
	for i := range 2 {
		r.clock.Advance(time.Minute)
		if a := r.deliver(t, docStart, "stripe", fmt.Sprintf("evt_kept_%d", i)); a.Status != receiver.StatusAccepted {
			t.Fatalf("re-read %d of a bad document: %+v, want the old sources kept", i, a)
		}
	}
	refusals := r.linesWith(t, inbox.CauseSourcesReloadRefused)
	if len(refusals) != 2 {
		t.Fatalf("%d refusal lines, want one per re-read (2):\n%s", len(refusals), r.logs.lines())
	}
	m := refusals[0]
	if m["level"] != "ERROR" || m["SourcesReloadRefused"] != 1.0 || m["trigger"] != "interval" || !strings.Contains(fmt.Sprint(m["err"]), `"broken"`) {
		t.Errorf("refusal line = %v", m)
	}
	for _, l := range r.logs.lines() {
		if bytes.Contains(l, []byte("whsec_")) {
			t.Errorf("a log line shows a secret: %s", l)
		}
	}

	// A document that cannot be read: the same sources, another cause.
	if err := os.Remove(r.file); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Minute)
	if a := r.deliver(t, docStart, "stripe", "evt_unreadable"); a.Status != receiver.StatusAccepted {
		t.Fatalf("with the document gone: %+v", a)
	}
	failed := r.linesWith(t, inbox.CauseSourcesReloadFailed)
	if len(failed) != 1 || failed[0]["level"] != "WARN" || failed[0]["SourcesReloadFailed"] != 1.0 {
		t.Fatalf("unreadable document's lines = %v", failed)
	}

	// Fixed: the next re-read serves it.
	r.write(t, docEU)
	r.clock.Advance(time.Minute)
	if a := r.deliver(t, docEU, "stripe-eu", "evt_eu_fixed"); a.Status != receiver.StatusAccepted {
		t.Fatalf("the fixed document: %+v", a)
	}
	if got := r.reads.Load(); got != 4 {
		t.Errorf("%d reads, want 4 (one per interval passed)", got)
	}
}

// TestRefusalBurstRereadsAtOnce: with no interval, a secret rolled in the
// document is picked up by the third signature mismatch of one source,
// whose request is verified again and accepted; the next burst within
// 10 s of that read waits for the gap, and refusals of two sources do
// not add up.
func TestRefusalBurstRereadsAtOnce(t *testing.T) {
	t.Parallel()
	r := setupReload(t, 0, docStart)
	r.write(t, docRolled)
	for i := range 2 {
		if a := r.deliver(t, docRolled, "stripe", fmt.Sprintf("evt_rolled_%d", i)); a.Code != http.StatusUnauthorized {
			t.Fatalf("mismatch %d: %+v, want 401", i+1, a)
		}
	}
	if n := r.reads.Load(); n != 0 {
		t.Fatalf("%d reads after two mismatches, want none", n)
	}
	if a := r.deliver(t, docRolled, "stripe", "evt_rolled_2"); a.Status != receiver.StatusAccepted || r.reads.Load() != 1 {
		t.Fatalf("the third mismatch: %+v, %d reads; want it read at once and accepted", a, r.reads.Load())
	}
	if a := r.deliver(t, docStart, "stripe", "evt_old_secret"); a.Code != http.StatusUnauthorized {
		t.Fatalf("the secret rolled away: %+v, want 401", a)
	}

	// Rolled again at once: a burst within 10 s of the last read does not
	// read, however long it goes on.
	r.write(t, docAgain)
	r.clock.Advance(9 * time.Second)
	for i := range 5 {
		if a := r.deliver(t, docAgain, "stripe", fmt.Sprintf("evt_again_%d", i)); a.Code != http.StatusUnauthorized {
			t.Fatalf("mismatch %d within the gap: %+v", i+1, a)
		}
	}
	// The old-secret mismatch above and these five: counted, not read.
	if n := r.reads.Load(); n != 1 {
		t.Fatalf("%d reads within 10 s of the last, want 1", n)
	}
	// The gap passed: the burst still under way reads at its next mismatch.
	r.clock.Advance(time.Second)
	if a := r.deliver(t, docAgain, "stripe", "evt_again_after"); a.Status != receiver.StatusAccepted || r.reads.Load() != 2 {
		t.Fatalf("after the gap: %+v, %d reads; want accepted after a second read", a, r.reads.Load())
	}

	// Two mismatches of each of two sources: no burst.
	r.clock.Advance(time.Minute)
	forged := `{"sources":{"stripe":{"kind":"stripe","secrets":["whsec_reload_forged_0123456789ab"]},"stripe-us":{"kind":"stripe","secrets":["whsec_reload_forged_0123456789ab"]}}}`
	for i, name := range []string{"stripe", "stripe-us", "stripe", "stripe-us"} {
		if a := r.deliver(t, forged, name, fmt.Sprintf("evt_mixed_%d", i)); a.Code != http.StatusUnauthorized {
			t.Fatalf("%s with a wrong secret: %+v", name, a)
		}
	}
	if n := r.reads.Load(); n != 2 {
		t.Fatalf("%d reads after mismatches spread over two sources, want 2", n)
	}
}

// TestNewSourceServedAfterABurst: a source just added is unknown to the
// running receiver; the third delivery to it within 30 s reads the
// document at once and is stored. Names that are not configured count
// together: the third refusal reads whatever names they asked for.
func TestNewSourceServedAfterABurst(t *testing.T) {
	t.Parallel()
	r := setupReload(t, time.Hour, docStart)
	r.write(t, docEU)
	if a := r.deliver(t, docEU, "stripe-eu", "evt_eu_0"); a.Code != http.StatusUnauthorized {
		t.Fatalf("first delivery to the added source: %+v", a)
	}
	// Another name nobody configured counts with it.
	req := httptest.NewRequest(http.MethodPost, "/webhooks/nobody", strings.NewReader(`{}`))
	if a := r.do(req); a.Code != http.StatusUnauthorized || r.reads.Load() != 0 {
		t.Fatalf("an unknown name: %+v, %d reads", a, r.reads.Load())
	}
	if a := r.deliver(t, docEU, "stripe-eu", "evt_eu_2"); a.Status != receiver.StatusAccepted || r.reads.Load() != 1 {
		t.Fatalf("the third refusal of an unknown name: %+v, %d reads; want it read at once and accepted", a, r.reads.Load())
	}
}
