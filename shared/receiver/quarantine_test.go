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
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/emftest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The receiver's sources, and the ones a sender holds after rolling its
// secret before the receiver did (quarantineSenderDoc).
const (
	quarantineDoc = `{"sources": {
  "github": {"kind": "github", "secrets": ["gh-secret-current-0123456789"]},
  "stripe": {"kind": "stripe", "secrets": ["whsec_test_new_0123456789abcde"]},
  "tokened": {"kind": "github", "secrets": ["gh-secret-current-0123456789"], "endpoint_token": "tok_0123456789abcdef0123456789abcdef"}
}}`
	quarantineSenderDoc = `{"sources": {
  "github": {"kind": "github", "secrets": ["gh-secret-rolled-0123456789x"]},
  "stripe": {"kind": "stripe", "secrets": ["whsec_test_new_0123456789abcde"]}
}}`
)

func quarantineSetup(t *testing.T, cfg receiver.Config, logs *syncBuffer) *fixture {
	t.Helper()
	set, err := source.Parse([]byte(quarantineDoc))
	if err != nil {
		t.Fatal(err)
	}
	deps := receiver.Deps{Sources: set, RequestID: func(r *http.Request) string { return r.Header.Get("X-Request-Id") }}
	if logs != nil {
		deps.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	}
	return setupOn(t, pgtest.Pool(t), cfg, deps)
}

// githubIssue is the source package's recorded GitHub delivery.
func githubIssue(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "source", "testdata", "github_issues_opened.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// senderRequest signs body as the sender of quarantineSenderDoc's source
// does, at at.
func senderRequest(t *testing.T, name string, body []byte, eventID, eventType string, at time.Time) *http.Request {
	t.Helper()
	set, err := source.Parse([]byte(quarantineSenderDoc))
	if err != nil {
		t.Fatal(err)
	}
	src, _ := set.Lookup(name)
	sr, err := sender.SignEvent(src, body, eventID, eventType, at)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/webhooks/"+name, bytes.NewReader(body))
	for k, v := range sr.Header {
		r.Header[k] = v
	}
	return r
}

// flushed closes the receiver, which writes what its background writers
// hold, and returns the quarantine as the operator reads it.
func (f *fixture) flushed() []inbox.Quarantined {
	f.t.Helper()
	if err := f.handler.Close(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	qs, err := f.store.QuarantineListPage(context.Background(), storage.QuarantineFilter{}, 0, 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	return qs
}

// A GitHub delivery signed with a secret the receiver does not hold yet is
// refused as before and kept: its body, the headers GitHub's verification
// and identity read (no other), the cause, the request id and when.
func TestSignatureMismatchIsQuarantined(t *testing.T) {
	t.Parallel()
	f := quarantineSetup(t, receiver.Config{}, nil)
	body := githubIssue(t)
	r := senderRequest(t, "github", body, "72d3162e-cc78-11e3-81ab-4c9367dc0958", "issues", now)
	r.Header.Set("Cookie", "session=secret")
	r.Header.Set("X-Request-Id", "req-gh-1")
	a := f.do(r)
	if a.Code != http.StatusUnauthorized || a.Cause != inbox.CauseUnauthenticated {
		t.Fatalf("answer %+v: a quarantined delivery is answered as every unauthenticated one", a)
	}
	qs := f.flushed()
	if len(qs) != 1 {
		t.Fatalf("quarantined %d deliveries, want 1", len(qs))
	}
	q, err := f.store.QuarantineGetByID(context.Background(), qs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	field.Must(t, "quarantined", field.Eq("Source", q.Source, "github"), field.Eq("SourceKind", q.SourceKind, "github"),
		field.Eq("Cause", q.Cause, inbox.CauseSignatureMismatch), field.Eq("RequestID", q.RequestID, "req-gh-1"),
		field.Eq("ReceivedAt", q.ReceivedAt.Equal(now), true), field.Eq("Body", string(q.Body), string(body)),
		field.Eq("BodySize", q.BodySize, len(body)),
		field.Eq("X-Github-Delivery", q.Header.Get("X-Github-Delivery"), "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
		field.Eq("X-Github-Event", q.Header.Get("X-Github-Event"), "issues"),
		field.Eq("signature kept", q.Header.Get("X-Hub-Signature-256") != "", true),
		field.Eq("Cookie", q.Header.Get("Cookie"), ""))
	if n := f.count(); n != 0 {
		t.Fatalf("%d events stored: a quarantined delivery is never stored as an event", n)
	}
}

// A Stripe delivery whose signed time is an hour old is kept with its
// cause and the receiver's time of receipt.
func TestStaleTimestampIsQuarantined(t *testing.T) {
	t.Parallel()
	f := quarantineSetup(t, receiver.Config{}, nil)
	a := f.do(senderRequest(t, "stripe", stripeEvent(t, "evt_stale"), "", "", now.Add(-time.Hour)))
	if a.Code != http.StatusUnauthorized {
		t.Fatalf("answer %+v", a)
	}
	qs := f.flushed()
	if len(qs) != 1 || qs[0].Cause != inbox.CauseTimestampOutOfTolerance || !qs[0].ReceivedAt.Equal(now) {
		t.Fatalf("quarantine %+v, want one timestamp_out_of_tolerance received at %s", qs, now)
	}
}

// Only those two causes are kept: an unknown source, a wrong endpoint
// token, a missing or malformed signature, a body over the limit, a GET
// and a refused method never are.
func TestOtherRefusalsAreNotQuarantined(t *testing.T) {
	t.Parallel()
	f := quarantineSetup(t, receiver.Config{MaxBodyBytes: 64 << 10}, nil)
	body := githubIssue(t)
	reqs := map[string]*http.Request{}
	unknown := senderRequest(t, "github", body, "id-2", "issues", now)
	unknown.URL.Path = "/webhooks/nosuch"
	reqs["unknown source"] = unknown
	tokened := senderRequest(t, "github", body, "id-3", "issues", now)
	tokened.URL.Path = "/webhooks/tokened/tok_wrong0123456789abcdef0123456789ab"
	reqs["endpoint token"] = tokened
	missing := senderRequest(t, "github", body, "id-4", "issues", now)
	missing.Header.Del("X-Hub-Signature-256")
	reqs["signature missing"] = missing
	malformed := senderRequest(t, "github", body, "id-5", "issues", now)
	malformed.Header.Set("X-Hub-Signature-256", "sha256=zz")
	reqs["signature malformed"] = malformed
	big := bytes.Repeat([]byte("x"), 65<<10)
	large := senderRequest(t, "github", big, "id-6", "issues", now)
	reqs["too large"] = large
	get := senderRequest(t, "github", body, "id-7", "issues", now)
	get.Method = http.MethodGet
	reqs["GET"] = get
	put := senderRequest(t, "github", body, "id-8", "issues", now)
	put.Method = http.MethodPut
	reqs["PUT"] = put
	for name, r := range reqs {
		if a := f.do(r); a.Code < 400 {
			t.Fatalf("%s: answer %+v", name, a)
		}
	}
	if qs := f.flushed(); len(qs) != 0 {
		t.Fatalf("quarantined %d deliveries refused for other causes: %+v", len(qs), qs)
	}
}

// Beyond its source's cap a refused delivery is not kept, and is logged
// with a cause and counted; the answer does not change.
func TestQuarantineCapPerSource(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	f := quarantineSetup(t, receiver.Config{QuarantineCap: 2, Metrics: metrics.Emitter{Namespace: "Test"}}, &logs)
	for i := range 3 {
		// One at a time, each written before the next is sent: the cap is
		// counted by the insert.
		if a := f.do(senderRequest(t, "github", githubIssue(t), "cap-"+string(rune('a'+i)), "issues", now)); a.Code != http.StatusUnauthorized {
			t.Fatalf("delivery %d: answer %+v", i, a)
		}
		waitQuarantine(t, min(i+1, 2), &logs, i)
	}
	qs := f.flushed()
	if len(qs) != 2 {
		t.Fatalf("quarantined %d, want the cap, 2", len(qs))
	}
	notKept := linesWith(t, &logs, string(inbox.CauseQuarantineFull))
	if len(notKept) != 1 || !strings.Contains(string(notKept[0]), `"QuarantineNotKept"`) {
		t.Fatalf("lines with cause quarantine_full: %q", notKept)
	}
	if err := emftest.Validate(notKept[0]); err != nil {
		t.Fatal(err)
	}
}

// waitQuarantine waits until the i-th delivery's outcome is logged (kept
// or not), and checks that want are kept.
func waitQuarantine(t *testing.T, want int, logs *syncBuffer, i int) {
	t.Helper()
	var kept, dropped int
	poll.Until(t, 10*time.Second, func() (bool, string) {
		kept = len(linesWith(t, logs, "refused delivery quarantined"))
		dropped = len(linesWith(t, logs, string(inbox.CauseQuarantineFull)))
		return kept+dropped > i, fmt.Sprintf("%d kept, %d not", kept, dropped)
	})
	if kept != want {
		t.Fatalf("after delivery %d: %d kept, want %d", i, kept, want)
	}
}

// linesWith returns the log lines holding s.
func linesWith(t *testing.T, logs *syncBuffer, s string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, l := range logs.lines() {
		if bytes.Contains(l, []byte(s)) {
			out = append(out, l)
		}
	}
	return out
}

// A container keeps at most its burst at once: a flood of forged
// deliveries beyond it is not kept, and counted.
func TestQuarantineRateIsBounded(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	f := quarantineSetup(t, receiver.Config{}, &logs)
	const sent = 40
	for i := range sent {
		if a := f.do(senderRequest(t, "github", githubIssue(t), "flood-"+string(rune('a'+i)), "issues", now)); a.Code != http.StatusUnauthorized {
			t.Fatalf("delivery %d: answer %+v", i, a)
		}
	}
	qs := f.flushed()
	notKept := len(linesWith(t, &logs, string(inbox.CauseQuarantineFull)))
	if len(qs) == 0 || len(qs) > 20 || len(qs)+notKept != sent {
		t.Fatalf("kept %d, not kept %d of %d sent at one instant: want at most the burst (20) kept and the rest counted", len(qs), notKept, sent)
	}
}

// A database that fails while a delivery is quarantined leaves the
// refusal a 401: the sender learns nothing, and is not told to retry.
func TestQuarantineFailureKeepsTheRefusal(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	set, err := source.Parse([]byte(quarantineDoc))
	if err != nil {
		t.Fatal(err)
	}
	pool := pgtest.Pool(t)
	pool.Close()
	h, err := receiver.New(receiver.Config{}, receiver.Deps{Sources: set, Store: storage.New(pool), Clock: fixedClock(now),
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, senderRequest(t, "github", githubIssue(t), "down-1", "issues", now))
	var a answer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || w.Code != http.StatusUnauthorized || a.Cause != inbox.CauseUnauthenticated {
		t.Fatalf("answer %d %s (%v)", w.Code, w.Body, err)
	}
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(linesWith(t, &logs, string(inbox.CauseQuarantineFailed))); n != 1 {
		t.Fatalf("%d lines with cause quarantine_failed, want 1", n)
	}
}
