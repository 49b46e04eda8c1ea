package receiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdahttp"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// handshakeDoc has a source of each kind that handshakes (meta also on a
// tokened path only), and one that does not.
const handshakeDoc = `{"sources": {
  "slack":  {"kind": "slack", "secrets": ["8f742231b10e8888abcd99yyyzzz85a5"]},
  "zoom":   {"kind": "zoom",  "secrets": ["zoom-secret-token-0123"]},
  "meta":   {"kind": "meta",  "secrets": ["meta-app-secret-0123456789"], "verify_tokens": ["meta-verify-token-0123456789"]},
  "metatok": {"kind": "meta", "secrets": ["meta-app-secret-0123456789"], "verify_tokens": ["meta-verify-token-0123456789"],
              "endpoint_token": "` + endpointToken + `", "untokened_path": false},
  "stripe": {"kind": "stripe", "secrets": ["whsec_test_new_0123456789abcde"]}
}}`

const metaVerify = "hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meta-verify-token-0123456789"

// handshakeFixture is setup over handshakeDoc.
func handshakeFixture(t *testing.T) *fixture {
	t.Helper()
	set, err := source.Parse([]byte(handshakeDoc))
	if err != nil {
		t.Fatal(err)
	}
	return setupOn(t, pgtest.Pool(t), receiver.Config{}, receiver.Deps{Sources: set, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
}

// signedRaw is a POST of body to srcName signed by its sender at now.
func (f *fixture) signedRaw(srcName, body string) *http.Request {
	f.t.Helper()
	src, _ := f.sources.Lookup(srcName)
	sr, err := sender.Sign(src, []byte(body), "", now)
	if err != nil {
		f.t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/webhooks/"+srcName, strings.NewReader(body))
	for k, v := range sr.Header {
		r.Header[k] = v
	}
	return r
}

// TestHandshakesAreAnsweredNotStored: each sender's endpoint verification,
// authenticated, gets exactly the answer the sender requires, through the
// handler and through the Lambda adapter; nothing is stored; each is
// recorded in webhook_rejections with the cause handshake. Deliveries of
// the same sources are stored as usual.
func TestHandshakesAreAnsweredNotStored(t *testing.T) {
	t.Parallel()
	f := handshakeFixture(t)
	tests := []struct {
		name        string
		req         func() *http.Request
		contentType string
		want        func(t *testing.T, body []byte)
	}{
		{"slack url_verification", func() *http.Request {
			return f.signedRaw("slack", `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
		}, "application/json", func(t *testing.T, body []byte) {
			var got map[string]string
			if json.Unmarshal(body, &got) != nil || got["challenge"] != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
				t.Fatalf("answer %s", body)
			}
		}},
		{"zoom endpoint.url_validation", func() *http.Request {
			return f.signedRaw("zoom", `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`)
		}, "application/json", func(t *testing.T, body []byte) {
			var got map[string]string
			if json.Unmarshal(body, &got) != nil || got["plainToken"] != "qgg8vlvZRS6UYooatFL8Aw" || len(got["encryptedToken"]) != 64 {
				t.Fatalf("answer %s", body)
			}
		}},
		{"meta hub.challenge", func() *http.Request {
			return httptest.NewRequest(http.MethodGet, "/webhooks/meta?"+metaVerify, nil)
		}, "text/plain; charset=utf-8", func(t *testing.T, body []byte) {
			if string(body) != "1158201444" {
				t.Fatalf("answer %q", body)
			}
		}},
		{"meta hub.challenge at the tokened path", func() *http.Request {
			return httptest.NewRequest(http.MethodGet, "/webhooks/metatok/"+endpointToken+"?"+metaVerify, nil)
		}, "text/plain; charset=utf-8", func(t *testing.T, body []byte) {
			if string(body) != "1158201444" {
				t.Fatalf("answer %q", body)
			}
		}},
	}
	adapter := lambdahttp.Handler(f.handler, f.handler)
	for _, tt := range tests {
		w := f.raw(tt.req())
		field.Must(t, tt.name, field.Printed("status", w.Code, 200), field.Printed("Content-Type", w.Header().Get("Content-Type"), tt.contentType),
			field.Printed("X-Content-Type-Options", w.Header().Get("X-Content-Type-Options"), "nosniff"), field.Printed("Cache-Control", w.Header().Get("Cache-Control"), "no-store"))
		tt.want(t, w.Body.Bytes())
		// Through API Gateway's event, as the Lambda sees it.
		r := tt.req()
		b, _ := io.ReadAll(r.Body)
		ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: r.URL.Path, RawQueryString: r.URL.RawQuery, Headers: map[string]string{}, Body: string(b)}
		for k := range r.Header {
			ev.Headers[strings.ToLower(k)] = r.Header.Get(k)
		}
		ev.RequestContext.HTTP.Method = r.Method
		resp, err := adapter(context.Background(), ev)
		if err != nil || resp.StatusCode != 200 || resp.Headers["Content-Type"] != tt.contentType {
			t.Fatalf("%s through the adapter: %+v %v", tt.name, resp, err)
		}
		tt.want(t, []byte(resp.Body))
	}
	if n := f.count(); n != 0 {
		t.Fatalf("handshakes stored %d events", n)
	}
	recorded := map[string]bool{}
	for _, rj := range f.rejections(3) {
		if rj.Cause == inbox.CauseHandshake {
			recorded[rj.Source] = true
		}
	}
	for _, s := range []string{"slack", "zoom", "meta"} {
		if !recorded[s] {
			t.Errorf("no handshake record for %s: %v", s, recorded)
		}
	}
	// Deliveries of the same sources are stored.
	for _, name := range []string{"slack", "zoom", "meta"} {
		src, _ := f.sources.Lookup(name)
		sm, err := src.Sample(now)
		if err != nil {
			t.Fatal(err)
		}
		r := f.signedRaw(name, string(sm.Body))
		if a := f.do(r); a.Code != 200 || a.Status != receiver.StatusAccepted {
			t.Fatalf("%s delivery: %+v", name, a)
		}
		if a := f.do(f.signedRaw(name, string(sm.Body))); a.Code != 200 || a.Status != receiver.StatusDuplicate {
			t.Fatalf("%s redelivery: %+v", name, a)
		}
	}
	if n := f.count(); n != 3 {
		t.Fatalf("%d events stored, want 3", n)
	}
}

// TestUnauthenticatedHandshakeIsOneAnswer: a forged, stale or unsigned
// handshake, a wrong verify token, a GET to a kind without handshakes, to
// an unknown name or to a tokened source without its token all get the
// receiver's one answer to unauthenticated requests, byte for byte, and
// store nothing.
func TestUnauthenticatedHandshakeIsOneAnswer(t *testing.T) {
	t.Parallel()
	f := handshakeFixture(t)
	ref := f.raw(httptest.NewRequest(http.MethodPost, "/webhooks/nosuchsource", strings.NewReader("{}")))
	if ref.Code != 401 {
		t.Fatalf("reference answer %d %s", ref.Code, ref.Body)
	}
	forgedSlack := f.signedRaw("slack", `{"type":"url_verification","challenge":"abc"}`)
	forgedSlack.Header.Set("X-Slack-Signature", "v0="+strings.Repeat("0", 64))
	staleZoom := f.signedRaw("zoom", `{"payload":{"plainToken":"abc"},"event":"endpoint.url_validation"}`)
	staleZoom.Header.Set("X-Zm-Request-Timestamp", "1600000000")
	unsignedZoom := httptest.NewRequest(http.MethodPost, "/webhooks/zoom", strings.NewReader(`{"payload":{"plainToken":"abc"},"event":"endpoint.url_validation"}`))
	tests := map[string]*http.Request{
		"forged slack challenge":           forgedSlack,
		"stale zoom validation":            staleZoom,
		"unsigned zoom validation":         unsignedZoom,
		"wrong verify token":               httptest.NewRequest(http.MethodGet, "/webhooks/meta?hub.mode=subscribe&hub.challenge=1&hub.verify_token=guess-guess-guess-guess", nil),
		"no verify token":                  httptest.NewRequest(http.MethodGet, "/webhooks/meta?hub.mode=subscribe&hub.challenge=1", nil),
		"meta GET that is no handshake":    httptest.NewRequest(http.MethodGet, "/webhooks/meta", nil),
		"GET a kind without handshakes":    httptest.NewRequest(http.MethodGet, "/webhooks/stripe?"+metaVerify, nil),
		"GET an unknown name":              httptest.NewRequest(http.MethodGet, "/webhooks/nosuchsource?"+metaVerify, nil),
		"GET a tokened source untokened":   httptest.NewRequest(http.MethodGet, "/webhooks/metatok?"+metaVerify, nil),
		"GET a tokened source wrong token": httptest.NewRequest(http.MethodGet, "/webhooks/metatok/tok_wrong_0123456789abcdefghijklmnop?"+metaVerify, nil),
	}
	for name, r := range tests {
		w := f.raw(r)
		if w.Code != ref.Code || !bytes.Equal(w.Body.Bytes(), ref.Body.Bytes()) || w.Header().Get("Content-Type") != ref.Header().Get("Content-Type") {
			t.Errorf("%s: %d %s, want the one answer %d %s", name, w.Code, w.Body, ref.Code, ref.Body)
		}
	}
	// Authenticated but malformed: a 400 with its cause, never the challenge.
	hostile := f.signedRaw("slack", `{"type":"url_verification","challenge":"<script>zqx</script>"}`)
	if a := f.do(hostile); a.Code != 400 || a.Cause != inbox.CauseUnparsableBody {
		t.Errorf("hostile challenge: %+v", a)
	}
	if a := f.do(httptest.NewRequest(http.MethodGet, "/webhooks/meta?hub.mode=subscribe&hub.challenge=%3Cb%3Ezqx&hub.verify_token=meta-verify-token-0123456789", nil)); a.Code != 400 || a.Cause != inbox.CauseInvalidRequest {
		t.Errorf("hostile hub.challenge: %+v", a)
	}
	// Other methods are still refused by method, whatever the name.
	for _, m := range []string{http.MethodPut, http.MethodDelete, http.MethodHead} {
		w := f.raw(httptest.NewRequest(m, "/webhooks/meta?"+metaVerify, nil))
		if w.Code != 405 || w.Header().Get("Allow") != "GET, POST" {
			t.Errorf("%s: %d %v", m, w.Code, w.Header())
		}
	}
	if n := f.count(); n != 0 {
		t.Fatalf("refused handshakes stored %d events", n)
	}
}

// TestHandshakeRecordsAreSampled: a flood of authenticated handshakes is
// answered every time but recorded once per sampling interval, like
// refusals.
func TestHandshakeRecordsAreSampled(t *testing.T) {
	t.Parallel()
	f := handshakeFixture(t)
	for range 50 {
		if w := f.raw(httptest.NewRequest(http.MethodGet, "/webhooks/meta?"+metaVerify, nil)); w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	// Then a refusal, recorded as the first of its kind: records are
	// written in order, so once it is there every handshake record before
	// it is too.
	if w := f.raw(httptest.NewRequest(http.MethodPost, "/webhooks/meta", strings.NewReader(`{}`))); w.Code < 400 {
		t.Fatalf("an unsigned POST answered %d", w.Code)
	}
	var list []inbox.Rejection
	poll.Until(t, 10*time.Second, func() (bool, string) {
		var err error
		list, err = f.store.RejectionList(t.Context(), time.Time{}, 10000)
		return err == nil && slices.ContainsFunc(list, func(rj inbox.Rejection) bool { return rj.Cause != inbox.CauseHandshake }),
			fmt.Sprintf("%d records, %v; want the refusal's", len(list), err)
	})
	var n int
	for _, rj := range list {
		if rj.Cause == inbox.CauseHandshake {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d handshake records for 50 handshakes within one interval, want 1", n)
	}
}
