package destination

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testclock"
)

// The Standard Webhooks specification's test vector.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = "1614265330"
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// Secrets of the tests' consumers: a current one, the one it replaces, and
// one the consumer does not hold.
const (
	secretNew   = "whsec_c2VjcmV0LWtleS1mb3ItdGhlLW5ldy1jb25zdW1lcg=="
	secretOld   = "whsec_b2xkLXNlY3JldC1rZXktb2YtdGhlLWNvbnN1bWVy"
	secretWrong = "whsec_d3Jvbmctc2VjcmV0LW5vYm9keS1ob2xkcy1pdA=="
)

var t0 = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

// received is one request a test consumer got.
type received struct {
	method string
	path   string
	header http.Header
	body   []byte
}

// consumer is a local HTTPS server standing for a route's endpoint: it
// records each request and answers with its handler (200 when nil).
type consumer struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	answer http.HandlerFunc
}

func newConsumer(t *testing.T, answer http.HandlerFunc) *consumer {
	t.Helper()
	c := &consumer{answer: answer}
	c.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.got = append(c.got, received{method: r.Method, path: r.URL.RequestURI(), header: r.Header.Clone(), body: body})
		c.mu.Unlock()
		if c.answer != nil {
			c.answer(w, r)
		}
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *consumer) requests() []received {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]received(nil), c.got...)
}

// port is the consumer's port, for URLs naming it by another host.
func (c *consumer) port() string {
	_, p, _ := net.SplitHostPort(c.srv.Listener.Addr().String())
	return p
}

type fixture struct {
	sender *Sender
	clock  *testclock.Clock
	// hosts is the sender's resolver: a name resolves to these addresses
	// and nothing else does.
	hosts map[string][]netip.Addr
}

// setup returns a Sender trusting the test servers' certificate, on a test
// clock at t0, resolving names through f.hosts.
func setup(t *testing.T, cfg Config) *fixture {
	t.Helper()
	f := &fixture{clock: testclock.At(t0), hosts: map[string][]netip.Addr{}}
	f.sender = New(cfg, Deps{Clock: f.clock})
	f.sender.dialer.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := f.hosts[host]; ok {
			return a, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	// httptest's TLS servers share one certificate (127.0.0.1, ::1,
	// example.com, *.example.com), so one server's pool trusts them all.
	pool := httptest.NewTLSServer(http.NotFoundHandler())
	roots := pool.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	pool.Close()
	f.sender.transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	return f
}

func forwardTo(url string, secrets ...string) Target {
	fw := &Forward{URL: url}
	if len(secrets) == 1 {
		fw.Secret = secrets[0]
	} else {
		fw.Secrets = secrets
	}
	return Target{Forward: fw}
}

func delivery(body string) Delivery {
	return Delivery{
		Source: "billing", Kind: "stripe", Type: "invoice.paid", EventID: "evt_1",
		ID: 42, ReceivedAt: t0.Add(-time.Minute), Body: []byte(body), Attempt: 2,
	}
}

func TestSignMatchesTheSpecificationsVector(t *testing.T) {
	t.Parallel()
	key, err := decodeSecret(specSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got := sign([][]byte{key}, specID, specTimestamp, []byte(specBody)); got != specSignature {
		t.Fatalf("signature = %s, want %s", got, specSignature)
	}
}

func TestForwardPostsTheBodyByteForByteSignedAndDescribed(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{AllowPrivate: true})
	c := newConsumer(t, nil)
	body := "{\"amount\": 1200,  \"note\":\"caf\u00e9 <b>\\u00e9</b>\"}\n"
	d := delivery(body)
	d.Metadata = map[string]string{"github_hook_id": "12345", "content_type": "application/json; charset=utf-8"}
	target := forwardTo(c.srv.URL+"/hooks/in", secretNew)
	target.Forward.Headers = map[string]string{"X-Api-Key": "k-123456789"}

	r := f.sender.Deliver(t.Context(), target, d)
	if r.Outcome != Delivered || r.Status != 200 || r.Message != "" {
		t.Fatalf("result = %+v, want delivered with 200", r)
	}
	got := c.requests()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	req := got[0]
	if req.method != http.MethodPost || req.path != "/hooks/in" || string(req.body) != body {
		t.Fatalf("got %s %s %q, want POST /hooks/in with the body as stored", req.method, req.path, req.body)
	}
	want := map[string]string{
		"Webhook-Id":                        MessageID("billing", "evt_1"),
		"Webhook-Timestamp":                 strconv.FormatInt(t0.Unix(), 10),
		"Content-Type":                      "application/json; charset=utf-8",
		"Webhook-Inbox-Source":              "billing",
		"Webhook-Inbox-Event-Type":          "invoice.paid",
		"Webhook-Inbox-Event-Id":            "evt_1",
		"Webhook-Inbox-Attempt":             "2",
		"Webhook-Inbox-Received-At":         "2026-05-04T11:59:00Z",
		"Webhook-Inbox-Meta-Github-Hook-Id": "12345",
		"Webhook-Inbox-Meta-Content-Type":   "application/json; charset=utf-8",
		"X-Api-Key":                         "k-123456789",
	}
	for name, v := range want {
		if g := req.header.Get(name); g != v {
			t.Errorf("%s = %q, want %q", name, g, v)
		}
	}

	wh, err := standardwebhooks.NewWebhook(secretNew)
	if err != nil {
		t.Fatal(err)
	}
	// The test clock is years from the library's wall clock: the
	// timestamp is checked above, the signature here.
	if err := wh.VerifyIgnoringTimestamp(req.body, req.header); err != nil {
		t.Fatalf("the standard-webhooks library refuses the delivery: %v", err)
	}
	other, _ := standardwebhooks.NewWebhook(secretWrong)
	if err := other.VerifyIgnoringTimestamp(req.body, req.header); err == nil {
		t.Fatal("the library verified the delivery with a secret that did not sign it")
	}
	tampered := append([]byte(nil), req.body...)
	tampered[1] = '\''
	if err := wh.VerifyIgnoringTimestamp(tampered, req.header); err == nil {
		t.Fatal("the library verified a body that was not sent")
	}
}

func TestForwardContentTypeFollowsTheBody(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{AllowPrivate: true})
	c := newConsumer(t, nil)
	for _, body := range []string{`[1,2]`, "a=1&b=2", "\xff\xfe"} {
		if r := f.sender.Deliver(t.Context(), forwardTo(c.srv.URL, secretNew), delivery(body)); r.Outcome != Delivered {
			t.Fatalf("%q: %+v", body, r)
		}
	}
	var types []string
	for _, req := range c.requests() {
		types = append(types, req.header.Get("Content-Type"))
	}
	if want := "application/json,application/octet-stream,application/octet-stream"; strings.Join(types, ",") != want {
		t.Fatalf("content types %v, want %s", types, want)
	}
	if got := c.requests()[2].body; string(got) != "\xff\xfe" {
		t.Fatalf("binary body arrived as %q", got)
	}
}

func TestForwardSignsWithEverySecretDuringARotation(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{AllowPrivate: true})
	c := newConsumer(t, nil)
	if r := f.sender.Deliver(t.Context(), forwardTo(c.srv.URL, secretNew, secretOld), delivery(`{}`)); r.Outcome != Delivered {
		t.Fatalf("%+v", r)
	}
	req := c.requests()[0]
	if n := len(strings.Fields(req.header.Get("Webhook-Signature"))); n != 2 {
		t.Fatalf("%d signatures, want one per secret", n)
	}
	for _, s := range []string{secretNew, secretOld} {
		wh, _ := standardwebhooks.NewWebhook(s)
		if err := wh.VerifyIgnoringTimestamp(req.body, req.header); err != nil {
			t.Errorf("a consumer holding %s refuses the delivery: %v", s[:10], err)
		}
	}
}

func TestMessageIDIsTheDeduplicationKeys(t *testing.T) {
	t.Parallel()
	id := MessageID("billing", "evt_1")
	if id != MessageID("billing", "evt_1") {
		t.Fatal("the same event got two ids")
	}
	if len(id) != len("whin_")+32 || !strings.HasPrefix(id, "whin_") || strings.Trim(id[5:], "0123456789abcdef") != "" {
		t.Fatalf("id %q is not whin_ and 32 hex digits", id)
	}
	for _, other := range [][2]string{{"billing", "evt_2"}, {"billin", "gevt_1"}, {"shop", "evt_1"}} {
		if MessageID(other[0], other[1]) == id {
			t.Fatalf("%v shares billing/evt_1's id", other)
		}
	}
}

func TestForwardClassifiesTheAnswer(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{AllowPrivate: true})
	date := t0.Add(90 * time.Second).Format(http.TimeFormat)
	cases := []struct {
		status     int
		retryAfter string
		want       Outcome
		wantWait   time.Duration
	}{
		{200, "", Delivered, 0},
		{204, "", Delivered, 0},
		{299, "", Delivered, 0},
		{400, "", Permanent, 0},
		{401, "", Permanent, 0},
		{404, "", Permanent, 0},
		{410, "", Permanent, 0},
		{422, "", Permanent, 0},
		{408, "", Retry, 0},
		{409, "", Retry, 0},
		{429, "", Retry, 0},
		{429, "120", Retry, 2 * time.Minute},
		{429, "999999", Retry, MaxRetryAfter},
		{429, "-5", Retry, 0},
		{429, "soon", Retry, 0},
		{503, date, Retry, 90 * time.Second},
		{503, t0.Add(-time.Hour).Format(http.TimeFormat), Retry, 0},
		{503, t0.Add(48 * time.Hour).Format(http.TimeFormat), Retry, MaxRetryAfter},
		{500, "30", Retry, 0}, // Retry-After is read on 429 and 503 only
		{502, "", Retry, 0},
		{504, "", Retry, 0},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d_%s", tc.status, tc.retryAfter), func(t *testing.T) {
			t.Parallel()
			c := newConsumer(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
				fmt.Fprint(w, "line one\nline two \x1b[31m")
			})
			r := f.sender.Deliver(t.Context(), forwardTo(c.srv.URL, secretNew), delivery(`{}`))
			if r.Outcome != tc.want || r.Status != tc.status || r.RetryAfter != tc.wantWait {
				t.Fatalf("result %+v, want %s, status %d, retry after %s", r, tc.want, tc.status, tc.wantWait)
			}
			if tc.want == Delivered {
				return
			}
			if !strings.Contains(r.Message, strconv.Itoa(tc.status)) || !strings.Contains(r.Message, `"line one\nline two \x1b[31m"`) {
				t.Fatalf("message %q does not say the status and the escaped answer", r.Message)
			}
			if strings.ContainsAny(r.Message, "\n\x1b") {
				t.Fatalf("message %q carries the answer's control characters", r.Message)
			}
		})
	}
}

func TestForwardReadsOnlyTheStartOfALongAnswer(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{AllowPrivate: true})
	c := newConsumer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		fmt.Fprint(w, strings.Repeat("x", 1<<20))
	})
	r := f.sender.Deliver(t.Context(), forwardTo(c.srv.URL, secretNew), delivery(`{}`))
	if r.Outcome != Retry || len(r.Message) > 400 || !strings.HasSuffix(r.Message, `"...`) {
		t.Fatalf("result %+v (message %d bytes), want retry with a short message", r, len(r.Message))
	}
}

func TestForwardRetriesWhatGotNoAnswer(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{AllowPrivate: true})

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		c := newConsumer(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		defer close(release)
		target := forwardTo(c.srv.URL, secretNew)
		target.Forward.Timeout = "100ms"
		r := f.sender.Deliver(t.Context(), target, delivery(`{}`))
		if r.Outcome != Retry || r.Status != 0 || !strings.Contains(r.Message, "no answer within 100ms") {
			t.Fatalf("result %+v, want a retry saying it timed out", r)
		}
	})

	t.Run("caller gave up", func(t *testing.T) {
		t.Parallel()
		c := newConsumer(t, nil)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		r := f.sender.Deliver(ctx, forwardTo(c.srv.URL, secretNew), delivery(`{}`))
		if r.Outcome != Retry || !strings.Contains(r.Message, "the caller gave up") || len(c.requests()) != 0 {
			t.Fatalf("result %+v, want a retry saying the caller gave up", r)
		}
	})

	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		r := f.sender.Deliver(t.Context(), forwardTo("https://"+addr, secretNew), delivery(`{}`))
		if r.Outcome != Retry || r.Status != 0 || !strings.Contains(r.Message, "refused") {
			t.Fatalf("result %+v, want a retry saying the connection was refused", r)
		}
	})

	t.Run("unknown host", func(t *testing.T) {
		t.Parallel()
		r := f.sender.Deliver(t.Context(), forwardTo("https://nowhere.example.com", secretNew), delivery(`{}`))
		if r.Outcome != Retry || !strings.Contains(r.Message, "no such host") {
			t.Fatalf("result %+v, want a retry saying the host is unknown", r)
		}
	})

	t.Run("untrusted certificate", func(t *testing.T) {
		t.Parallel()
		g := setup(t, Config{AllowPrivate: true})
		g.sender.transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		c := newConsumer(t, nil)
		r := g.sender.Deliver(t.Context(), forwardTo(c.srv.URL, secretNew), delivery(`{}`))
		if r.Outcome != Retry || !strings.Contains(r.Message, "TLS") || len(c.requests()) != 0 {
			t.Fatalf("result %+v, want a retry naming TLS and nothing delivered", r)
		}
	})
}

func TestForwardFollowsRedirectsOnlyWithinItsHost(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{AllowPrivate: true})
	f.hosts["other.example.com"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	other := newConsumer(t, nil)

	redirector := func(hops int, code int, to func(r *http.Request) string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hop"))
			if n < hops {
				w.Header().Set("Location", to(r)+"/hop"+strconv.Itoa(n+1))
				w.WriteHeader(code)
			}
		}
	}
	same := func(*http.Request) string { return "" }

	t.Run("same host, 307 and 308, three hops", func(t *testing.T) {
		t.Parallel()
		for _, code := range []int{307, 308} {
			c := newConsumer(t, redirector(3, code, same))
			r := f.sender.Deliver(t.Context(), forwardTo(c.srv.URL+"/hop0", secretNew), delivery(`{"a":1}`))
			got := c.requests()
			if r.Outcome != Delivered || len(got) != 4 {
				t.Fatalf("%d: result %+v after %d requests, want delivered after 4", code, r, len(got))
			}
			last := got[3]
			if last.method != http.MethodPost || string(last.body) != `{"a":1}` || last.header.Get("Webhook-Signature") == "" {
				t.Fatalf("%d: the last hop got %s %q without its signature", code, last.method, last.body)
			}
		}
	})

	t.Run("same host, four hops", func(t *testing.T) {
		t.Parallel()
		c := newConsumer(t, redirector(4, 307, same))
		r := f.sender.Deliver(t.Context(), forwardTo(c.srv.URL+"/hop0", secretNew), delivery(`{}`))
		if r.Outcome != Permanent || !strings.Contains(r.Message, "more than 3 redirects") {
			t.Fatalf("result %+v, want permanent naming the limit", r)
		}
	})

	t.Run("302 would drop the body", func(t *testing.T) {
		t.Parallel()
		c := newConsumer(t, redirector(1, 302, same))
		r := f.sender.Deliver(t.Context(), forwardTo(c.srv.URL+"/hop0", secretNew), delivery(`{}`))
		if r.Outcome != Permanent || !strings.Contains(r.Message, "302") || len(c.requests()) != 1 {
			t.Fatalf("result %+v after %d requests, want permanent naming the 302 and no GET", r, len(c.requests()))
		}
	})

	t.Run("another host", func(t *testing.T) {
		t.Parallel()
		c := newConsumer(t, redirector(1, 307, func(*http.Request) string { return "https://other.example.com:" + other.port() }))
		r := f.sender.Deliver(t.Context(), forwardTo(c.srv.URL+"/hop0", secretNew), delivery(`{}`))
		if r.Outcome != Permanent || !strings.Contains(r.Message, "another host (https://other.example.com:"+other.port()+")") {
			t.Fatalf("result %+v, want permanent naming the other host", r)
		}
		if n := len(other.requests()); n != 0 {
			t.Fatalf("the other host got %d requests", n)
		}
	})

	t.Run("another port", func(t *testing.T) {
		t.Parallel()
		c := newConsumer(t, redirector(1, 308, func(*http.Request) string { return other.srv.URL }))
		r := f.sender.Deliver(t.Context(), forwardTo(c.srv.URL+"/hop0", secretNew), delivery(`{}`))
		if r.Outcome != Permanent || !strings.Contains(r.Message, "another host") || len(other.requests()) != 0 {
			t.Fatalf("result %+v, want permanent and the other port untouched", r)
		}
	})
}

func TestForwardRefusesAddressesNoConsumerHas(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{})
	cases := []struct{ addr, class string }{
		{"127.0.0.1", "loopback"},
		{"127.9.9.9", "loopback"},
		{"::1", "loopback"},
		{"10.1.2.3", "private, RFC 1918"},
		{"172.16.0.1", "private, RFC 1918"},
		{"172.31.255.254", "private, RFC 1918"},
		{"192.168.1.1", "private, RFC 1918"},
		{"fd00::1", "private, unique local"},
		{"fd00:ec2::254", "private, unique local"}, // the metadata service over IPv6
		{"169.254.169.254", "link-local"},
		{"169.254.0.1", "link-local"},
		{"fe80::1", "link-local"},
		{"100.64.0.1", "CGNAT"},
		{"100.127.255.254", "CGNAT"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"::ffff:10.0.0.1", "private, RFC 1918"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:169.254.169.254", "link-local"},
		{"64:ff9b::a9fe:a9fe", "link-local"}, // NAT64 of 169.254.169.254
	}
	hostOf := func(addr string) string {
		return "h" + strings.NewReplacer(":", "-", ".", "-").Replace(addr) + ".example.com"
	}
	for _, tc := range cases {
		f.hosts[hostOf(tc.addr)] = []netip.Addr{netip.MustParseAddr(tc.addr)}
	}
	for _, tc := range cases {
		t.Run(tc.addr, func(t *testing.T) {
			t.Parallel()
			a := netip.MustParseAddr(tc.addr)
			name := hostOf(tc.addr)
			for _, url := range []string{"https://" + net.JoinHostPort(tc.addr, "443") + "/in", "https://" + name + "/in"} {
				r := f.sender.Deliver(t.Context(), forwardTo(url, secretNew), delivery(`{}`))
				if r.Outcome != Permanent || !strings.Contains(r.Message, "refused to connect to "+a.Unmap().String()) || !strings.Contains(r.Message, tc.class) {
					t.Fatalf("%s: result %+v, want permanent naming %s and %q", url, r, a.Unmap(), tc.class)
				}
			}
		})
	}
}
