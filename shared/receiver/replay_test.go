package receiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/emftest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// replaySources are senders that sign no timestamp: github and shopify
// sign no id either (guarded), square signs its id in the body, and the
// hmac source reads its id from a header it does not sign, by opt-in.
const replaySources = `{"sources": {
  "gh":   {"kind": "github",  "secrets": ["gh-replay-test-secret"]},
  "shop": {"kind": "shopify", "secrets": ["shopify-replay-test-secret"]},
  "sq":   {"kind": "square",  "secrets": ["sq-replay-test-key"], "notification_url": "https://example.com/webhooks/sq"},
  "acme": {"kind": "hmac",    "secrets": ["acme-replay-test-secret"], "signature_header": "X-Sig",
           "event_id": {"header": "X-Event-Id"}, "event_type": {"header": "X-Event-Type"}, "allow_unsigned_event_id": true}
}}`

type replayFixture struct {
	*fixture
	logs *syncBuffer
}

func setupReplay(t *testing.T) *replayFixture {
	t.Helper()
	sources, err := source.Parse([]byte(replaySources))
	if err != nil {
		t.Fatal(err)
	}
	pool := pgtest.Pool(t)
	store := storage.New(pool)
	logs := &syncBuffer{}
	h, err := receiver.New(receiver.Config{},
		receiver.Deps{Sources: sources, Store: store, Logger: slog.New(slog.NewJSONHandler(logs, nil)), Clock: fixedClock(now)})
	if err != nil {
		t.Fatal(err)
	}
	return &replayFixture{fixture: &fixture{t: t, pool: pool, store: store, sources: sources, handler: h}, logs: logs}
}

// post signs body as srcName's sender would, with an event id and type
// (headers for github, shopify and acme; square reads them from the body).
func (f *replayFixture) post(srcName string, body []byte, eventID, eventType string) answer {
	f.t.Helper()
	src, _ := f.sources.Lookup(srcName)
	h, err := src.SignEvent(body, eventID, eventType, now)
	if err != nil {
		f.t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/webhooks/"+srcName, bytes.NewReader(body))
	r.Header = h
	return f.do(r)
}

// The attack: a captured signed GitHub "issues" body re-sent under
// a fresh delivery id with X-GitHub-Event: push. It is answered 200 (a
// duplicate with cause suspected_replay), never stored or processed,
// counted in SuspectedReplay, and recorded for the stored event; GitHub's
// own redelivery (same X-GitHub-Delivery) stays a plain duplicate.
func TestSuspectedReplayIsNeverStored(t *testing.T) {
	t.Parallel()
	f := setupReplay(t)
	ctx := context.Background()
	body := []byte(`{"action":"opened","issue":{"id":1347,"number":1}}`)
	if a := f.post("gh", body, "d-original", "issues"); a.Status != receiver.StatusAccepted {
		t.Fatalf("first delivery: %+v", a)
	}
	redelivery := f.post("gh", body, "d-original", "issues")
	if redelivery.Code != 200 || redelivery.Status != receiver.StatusDuplicate || redelivery.Cause != "" {
		t.Fatalf("GitHub's redelivery: %+v, want a plain duplicate", redelivery)
	}
	for i, typ := range []string{"push", "issues", "push"} {
		a := f.post("gh", body, fmt.Sprintf("d-replay-%d", i), typ)
		if a.Code != 200 || a.Status != receiver.StatusDuplicate || a.Cause != inbox.CauseSuspectedReplay {
			t.Fatalf("replay %d as %s: %+v, want 200 duplicate suspected_replay", i, typ, a)
		}
	}
	if n := f.count(); n != 1 {
		t.Fatalf("%d events stored, want 1", n)
	}
	ev, err := f.store.EventGetByKey(ctx, "gh", "d-original")
	if err != nil || ev.Type != "issues" {
		t.Fatalf("stored event: %+v, %v", ev, err)
	}
	recs, err := f.store.PayloadMismatchListByEvent(ctx, "gh", "d-original")
	if err != nil || len(recs) != 3 {
		t.Fatalf("records: %+v, %v; want the 3 replays", recs, err)
	}
	if r := recs[0]; r.Cause != inbox.CauseSuspectedReplay || r.ReceivedEventID != "d-replay-0" || r.ReceivedEventType != "push" {
		t.Fatalf("record = %+v", r)
	}
	var replays int
	for _, line := range f.logs.lines() {
		if !bytes.Contains(line, []byte(`"suspected_replay"`)) {
			continue
		}
		replays++
		if err := emftest.Validate(line); err != nil {
			t.Fatalf("replay line is not EMF: %v\n%s", err, line)
		}
		var doc map[string]any
		_ = json.Unmarshal(line, &doc)
		field.Must(t, "replay line", field.Printed("SuspectedReplay", doc["SuspectedReplay"], 1.0), field.Printed("source", doc["source"], "gh"),
			field.Printed("stored_event_id", doc["stored_event_id"], "d-original"), field.Printed("carries the body's 1347", bytes.Contains(line, []byte("1347")), false))
	}
	if replays != 3 {
		t.Fatalf("%d suspected_replay lines, want 3", replays)
	}
}

// Each guarded kind, and the kinds that need no guard: square signs its
// id in the body, so the same body is the same event.
func TestSuspectedReplayByKind(t *testing.T) {
	t.Parallel()
	f := setupReplay(t)
	shopBody := []byte(`{"id":820982911946154508,"total_price":"20.00"}`)
	if a := f.post("shop", shopBody, "ev-1", "orders/create"); a.Status != receiver.StatusAccepted {
		t.Fatalf("shopify: %+v", a)
	}
	if a := f.post("shop", shopBody, "ev-2", "orders/paid"); a.Cause != inbox.CauseSuspectedReplay {
		t.Fatalf("shopify replay: %+v", a)
	}
	acmeBody := []byte(`{"invoice":"in_1","amount":2000}`)
	if a := f.post("acme", acmeBody, "a-1", "invoice.paid"); a.Status != receiver.StatusAccepted {
		t.Fatalf("hmac: %+v", a)
	}
	if a := f.post("acme", acmeBody, "a-2", "invoice.paid"); a.Cause != inbox.CauseSuspectedReplay {
		t.Fatalf("hmac replay: %+v", a)
	}
	sqBody := []byte(`{"merchant_id":"M1","type":"order.created","event_id":"sq-1","data":{}}`)
	if a := f.post("sq", sqBody, "", ""); a.Status != receiver.StatusAccepted {
		t.Fatalf("square: %+v", a)
	}
	if a := f.post("sq", sqBody, "", ""); a.Status != receiver.StatusDuplicate || a.Cause != "" {
		t.Fatalf("square replay: %+v, want a plain duplicate (its id is signed)", a)
	}
	if n := f.count(); n != 3 {
		t.Fatalf("%d events stored, want 3", n)
	}
}

// Concurrent posts of one captured body under many ids, through a real
// HTTP server: exactly one is accepted and stored.
func TestConcurrentReplaysStoreOne(t *testing.T) {
	t.Parallel()
	f := setupReplay(t)
	srv := httptest.NewServer(f.handler)
	defer srv.Close()
	src, _ := f.sources.Lookup("gh")
	body := []byte(`{"action":"opened","issue":{"id":7}}`)
	const n = 24
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[string]int{}
	)
	for i := range n {
		wg.Go(func() {
			req, err := sender.SignEvent(src, body, fmt.Sprintf("d-%d", i), "issues", now)
			if err != nil {
				t.Error(err)
				return
			}
			code, resp, err := req.Post(context.Background(), srv.Client(), srv.URL)
			if err != nil {
				t.Error(err)
				return
			}
			var a answer
			if err := json.Unmarshal(resp, &a); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			statuses[fmt.Sprintf("%d %s %s", code, a.Status, a.Cause)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	want := map[string]int{"200 accepted ": 1, "200 duplicate suspected_replay": n - 1}
	if fmt.Sprint(statuses) != fmt.Sprint(want) {
		t.Fatalf("answers %v, want %v", statuses, want)
	}
	if c := f.count(); c != 1 {
		t.Fatalf("%d events stored, want 1", c)
	}
}

// The opt-in of an unsigned hmac id is logged at start-up, naming the
// source and what it risks.
func TestStartupWarnsOfAcceptedRisk(t *testing.T) {
	t.Parallel()
	f := setupReplay(t)
	var found bool
	for _, b := range f.logs.lines() {
		line := string(b)
		if strings.Contains(line, `"source":"acme"`) && strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "X-Event-Id") {
			found = true
		}
		if strings.Contains(line, "acme-replay-test-secret") {
			t.Fatalf("a secret in the log: %s", line)
		}
	}
	if !found {
		t.Fatalf("no start-up warning for acme in %q", f.logs.lines())
	}
}
