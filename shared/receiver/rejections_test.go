package receiver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/emftest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// syncBuffer collects log lines from concurrent requests.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}
func (b *syncBuffer) lines() [][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	return out
}

func TestRejectionsAreRecordedAndSampled(t *testing.T) {
	t.Parallel()
	clk := &clock{t: now}
	f := setupOn(t, pgtest.Pool(t), receiver.Config{}, receiver.Deps{Clock: clk})
	ctx := context.Background()
	body := stripeEvent(t, "evt_rej")
	forged := func() {
		r := f.signed("stripe", body, "")
		r.Header.Set("Stripe-Signature", "t=1700000000,v1="+strings.Repeat("0", 64))
		r.RemoteAddr = "203.0.113.9:4711"
		r.Header.Set("X-Request-Id", "req-1")
		if a := f.do(r); a.Code != 401 || a.Cause != inbox.CauseUnauthenticated {
			t.Fatalf("forged request: %+v", a)
		}
	}
	for range 5 { // a flood within one second: one record
		forged()
	}
	list := f.rejections(1)
	if len(list) != 1 {
		t.Fatalf("records = %+v; want 1", list)
	}
	r := list[0]
	field.Must(t, "record", field.Printed("Source", r.Source, "stripe"), field.Printed("Cause", string(r.Cause), "signature_mismatch"), field.Printed("RemoteAddr", r.RemoteAddr, "203.0.113.9"),
		field.Printed("RequestID", r.RequestID, "req-1"), field.Printed("Message given", r.Message != "", true), field.Printed("Suppressed", r.Suppressed, int64(0)))
	clk.Advance(2 * time.Second)
	forged() // the next record carries the 4 held back
	list = f.rejections(2)
	if len(list) != 2 || list[0].Suppressed != 4 {
		t.Fatalf("records = %+v", list)
	}
	counts, err := f.store.RejectionCountByCause(ctx, time.Time{})
	if err != nil || len(counts) != 1 || counts[0].Count != 6 {
		t.Fatalf("counts = %+v, %v; want 6 signature_mismatch", counts, err)
	}

	// Another cause and an unknown source are recorded on their own.
	long := strings.Repeat("x", 300)
	f.do(httptest.NewRequest("POST", "/webhooks/"+long, strings.NewReader("{}")))
	f.do(httptest.NewRequest("POST", "/webhooks/stripe", strings.NewReader("{}")))
	list = f.rejections(4)
	causes := map[inbox.Cause]inbox.Rejection{}
	for _, r := range list {
		causes[r.Cause] = r
	}
	if u := causes["unknown_source"]; u.Source != "(unknown)" || !strings.HasSuffix(u.Message, "the name requested: "+long[:inbox.MaxSourceNameLen]) {
		t.Fatalf("unknown source recorded as %q %q; want (unknown), the name bounded to %d bytes in the message", u.Source, u.Message, inbox.MaxSourceNameLen)
	}
	if _, ok := causes["signature_missing"]; !ok {
		t.Fatalf("signature_missing not recorded: %+v", list)
	}
}

// rejections waits until the background writer has written at least n
// records, and returns them all, newest first.
func (f *fixture) rejections(n int) []inbox.Rejection {
	f.t.Helper()
	var list []inbox.Rejection
	poll.Until(f.t, 10*time.Second, func() (bool, string) {
		var err error
		list, err = f.store.RejectionList(context.Background(), time.Time{}, 10000)
		return err == nil && len(list) >= n, fmt.Sprintf("%d records, %v; want %d", len(list), err, n)
	})
	return list
}

func TestRingBufferIsBounded(t *testing.T) {
	t.Parallel()
	store := storage.New(pgtest.Pool(t))
	ctx := context.Background()
	for i := range 25 {
		if err := store.RejectionInsert(ctx, inbox.Rejection{Source: "p", Cause: "c", Message: "m", BodySize: int64(i)}, 10); err != nil {
			t.Fatal(err)
		}
	}
	list, err := store.RejectionList(ctx, time.Time{}, 100)
	if err != nil || len(list) != 10 {
		t.Fatalf("rows = %d, %v; want the capacity, 10", len(list), err)
	}
	seen := map[int64]bool{}
	for _, r := range list {
		seen[r.BodySize] = true
	}
	for i := int64(15); i < 25; i++ {
		if !seen[i] {
			t.Fatalf("the newest 10 must remain; have %v", seen)
		}
	}
}

// Every outcome's log line is a valid EMF record with bounded dimensions,
// and no line carries a secret, a signature or the body.
func TestLogLinesAreEMF(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	f := setupOn(t, pgtest.Pool(t), receiver.Config{}, receiver.Deps{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	body := stripeEvent(t, "evt_emf")
	accepted := f.signed("stripe", body, "")
	sig := accepted.Header.Get("Stripe-Signature")
	f.do(accepted)
	f.do(f.signed("stripe", body, ""))
	f.do(f.signed("stripe", bytes.Replace(body, []byte("2000"), []byte("2001"), 1), ""))
	f.do(httptest.NewRequest("POST", "/webhooks/nope", nil))
	f.do(httptest.NewRequest("POST", "/webhooks/stripe", bytes.NewReader(body)))

	want := map[string]string{"Accepted": "stripe", "Duplicate": "stripe", "PayloadMismatch": "stripe", "Rejected": "(unknown)"}
	for _, line := range logs.lines() {
		if err := emftest.Validate(line); err != nil {
			t.Fatalf("not EMF: %v\n%s", err, line)
		}
		for _, secret := range []string{"whsec_test_new_0123456789abcde", sig, `"amount_paid"`} {
			if bytes.Contains(line, []byte(secret)) {
				t.Fatalf("log line leaks %q: %s", secret, line)
			}
		}
		var doc map[string]any
		_ = json.Unmarshal(line, &doc)
		for m, src := range want {
			if _, ok := doc[m]; ok && (doc["source"] == src || m == "Rejected") {
				delete(want, m)
			}
		}
	}
	if len(want) != 0 {
		t.Fatalf("metrics never emitted: %v", want)
	}
}

// TestUnconfiguredNamesAreNotDimensions: a name no source has is the
// sender's text, whatever the refusal, so it never becomes a metric's
// dimension value (each one is billed).
func TestUnconfiguredNamesAreNotDimensions(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	f := setupOn(t, pgtest.Pool(t), receiver.Config{}, receiver.Deps{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	f.do(httptest.NewRequest("GET", "/webhooks/random-1234", nil))
	f.do(httptest.NewRequest("GET", "/webhooks/stripe", nil))
	var sources []string
	for _, line := range logs.lines() {
		var doc map[string]any
		if err := json.Unmarshal(line, &doc); err != nil {
			t.Fatal(err)
		}
		sources = append(sources, fmt.Sprint(doc["source"], " ", doc["requested_source"]))
	}
	if strings.Join(sources, "|") != "(unknown) random-1234|stripe <nil>" {
		t.Fatalf("source, requested_source per line: %q", sources)
	}
}
