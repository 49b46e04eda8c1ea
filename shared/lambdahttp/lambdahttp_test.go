package lambdahttp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/emftest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The fixtures in testdata are payload 2.0 events in the exact shape API
// Gateway HTTP APIs deliver, so the tests exercise the JSON the Lambda
// really receives rather than structs we filled in ourselves.
func loadEvent(t testing.TB, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ev
}

func TestMain(m *testing.M) { pgtest.Main(m) }

// logEntry decodes the one log line in logs, which must be a valid EMF
// record.
func logEntry(t *testing.T, logs *bytes.Buffer) map[string]any {
	t.Helper()
	line := bytes.TrimSpace(logs.Bytes())
	if err := emftest.Validate(line); err != nil {
		t.Fatalf("log line is not EMF: %v\n%s", err, line)
	}
	var entry map[string]any
	if err := json.Unmarshal(line, &entry); err != nil {
		t.Fatalf("log %q: %v", line, err)
	}
	return entry
}

// errorWriter is the receiver the Lambda main builds, as Handler's error
// writer, logging JSON to logs (nil: discarded), over a database of its
// own: its refusals are recorded as in production.
func errorWriter(t testing.TB, logs io.Writer) (*receiver.Handler, *storage.Store) {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	set, err := source.Parse([]byte(`{"sources":{"stripe":{"kind":"stripe","secrets":["whsec_adapter_test_0123456789a"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	store := storage.New(pgtest.Pool(t))
	h, err := receiver.New(receiver.Config{}, receiver.Deps{
		Sources: set, Store: store, Logger: slog.New(slog.NewJSONHandler(logs, nil)), RequestID: RequestID,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h, store
}

// seen is what the route handler observed.
type seen struct {
	req    *http.Request
	body   []byte
	source string
}

// invoke runs ev through Handler in front of a ServeMux carrying the
// receiver's route, and reports what the route saw (nil if it never ran).
func invoke(t *testing.T, ev events.APIGatewayV2HTTPRequest) (*seen, events.APIGatewayV2HTTPResponse) {
	t.Helper()
	var s *seen
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhooks/{source}", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read body: %v", err)
		}
		s = &seen{req: r, body: body, source: r.PathValue("source")}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"accepted"}`)
	})
	ew, _ := errorWriter(t, nil)
	resp, err := Handler(mux, ew)(context.Background(), ev)
	if err != nil {
		t.Fatalf("Handler returned a Lambda error: %v", err)
	}
	return s, resp
}

// run invokes Handler(h) on ev and fails on a Lambda error, which Handler
// must never return.
func run(t *testing.T, h http.Handler, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	ew, _ := errorWriter(t, nil)
	resp, err := Handler(h, ew)(context.Background(), ev)
	if err != nil {
		t.Fatalf("Handler returned a Lambda error: %v", err)
	}
	return resp
}

func decodeOutcome(t *testing.T, resp events.APIGatewayV2HTTPResponse) map[string]string {
	t.Helper()
	if resp.IsBase64Encoded {
		t.Fatalf("outcome body is base64: %q", resp.Body)
	}
	if ct := resp.Headers["Content-Type"]; ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var o map[string]string
	if err := json.Unmarshal([]byte(resp.Body), &o); err != nil {
		t.Fatalf("body %q is not a JSON object of strings: %v", resp.Body, err)
	}
	return o
}

func TestPlainBody(t *testing.T) {
	t.Parallel()
	ev := loadEvent(t, "post_plain.json")
	s, resp := invoke(t, ev)
	if s == nil {
		t.Fatalf("route not reached; response %d %q", resp.StatusCode, resp.Body)
	}
	r := s.req
	if string(s.body) != ev.Body {
		t.Errorf("body = %q, want %q", s.body, ev.Body)
	}
	checks := []struct{ name, got, want string }{
		{"Method", r.Method, "POST"},
		{"URL.Path", r.URL.Path, "/webhooks/stripe"},
		{"RequestURI", r.RequestURI, "/webhooks/stripe?attempt=2&tag=a&tag=b%20c"},
		{"Proto", r.Proto, "HTTP/1.1"},
		{"Host", r.Host, "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com"},
		{"RemoteAddr", r.RemoteAddr, "203.0.113.7:0"},
		{"RequestID", RequestID(r), "Yx3kQhS1DoEEJ8g="},
		{"Content-Length header", r.Header.Get("Content-Length"), "107"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if r.ContentLength != 107 {
		t.Errorf("ContentLength = %d, want 107", r.ContentLength)
	}
	if _, ok := r.Header["Host"]; ok {
		t.Error("Host left in the header map; net/http promotes it to r.Host")
	}
	if r.URL.Host != "" || r.URL.Scheme != "" {
		t.Errorf("URL = %q, want a server-side URL without scheme or host", r.URL)
	}

	if resp.StatusCode != http.StatusOK || resp.IsBase64Encoded || resp.Body != `{"status":"accepted"}` {
		t.Errorf("response = %d base64=%v %q", resp.StatusCode, resp.IsBase64Encoded, resp.Body)
	}
	if resp.Headers["Content-Type"] != "application/json" {
		t.Errorf("response headers = %v", resp.Headers)
	}
}

func TestBase64BinaryBodyArrivesByteIdentical(t *testing.T) {
	t.Parallel()
	// NUL bytes, a lone continuation byte, an overlong-ish sequence and an
	// encoded surrogate: everything a string-based conversion would mangle.
	want := []byte("\x00\x01\x02PK\x03\x04\xff\xfe\xc3\x28binary\x00tail\x80\xed\xa0\x80")
	if utf8.Valid(want) || !bytes.Contains(want, []byte{0}) {
		t.Fatal("fixture payload must contain NUL and invalid UTF-8")
	}
	s, resp := invoke(t, loadEvent(t, "post_base64_binary.json"))
	if s == nil {
		t.Fatalf("route not reached; response %d %q", resp.StatusCode, resp.Body)
	}
	if !bytes.Equal(s.body, want) {
		t.Errorf("body = %q, want %q", s.body, want)
	}
	if s.req.ContentLength != int64(len(want)) || s.req.Header.Get("Content-Length") != "26" {
		t.Errorf("ContentLength = %d, header %q, want %d", s.req.ContentLength, s.req.Header.Get("Content-Length"), len(want))
	}
	if s.req.RemoteAddr != "[2001:db8::7]:0" {
		t.Errorf("RemoteAddr = %q, want [2001:db8::7]:0", s.req.RemoteAddr)
	}
}

func TestNamedStagePrefixIsStripped(t *testing.T) {
	t.Parallel()
	s, resp := invoke(t, loadEvent(t, "post_named_stage.json"))
	if s == nil {
		t.Fatalf("route not reached; response %d %q", resp.StatusCode, resp.Body)
	}
	if s.req.URL.Path != "/webhooks/github" || s.source != "github" {
		t.Errorf("path = %q, source = %q, want /webhooks/github and github", s.req.URL.Path, s.source)
	}
	if got := s.req.Header.Get("X-Hub-Signature-256"); !strings.HasPrefix(got, "sha256=") {
		t.Errorf("X-Hub-Signature-256 = %q", got)
	}

	// Only a whole leading segment equal to a named stage is removed:
	// custom domains do not add the prefix, and "$default" never has one.
	cases := []struct{ stage, rawPath, want string }{
		{"prod", "/prod", "/"},
		{"prod", "/prod/", "/"},
		{"prod", "/production/webhooks/x", "/production/webhooks/x"},
		{"prod", "/webhooks/x", "/webhooks/x"},
		{"prod", "/webhooks/prod/x", "/webhooks/prod/x"},
		{"$default", "/prod/webhooks/x", "/prod/webhooks/x"},
		{"", "/prod/webhooks/x", "/prod/webhooks/x"},
	}
	for _, c := range cases {
		ev := loadEvent(t, "post_named_stage.json")
		ev.RequestContext.Stage, ev.RawPath = c.stage, c.rawPath
		r, err := NewRequest(context.Background(), ev)
		if err != nil {
			t.Errorf("stage %q, path %q: %v", c.stage, c.rawPath, err)
			continue
		}
		if r.URL.Path != c.want {
			t.Errorf("stage %q, path %q: URL.Path = %q, want %q", c.stage, c.rawPath, r.URL.Path, c.want)
		}
	}
}

func TestHeadersAreCaseInsensitiveAndKeepCommaJoinedValues(t *testing.T) {
	t.Parallel()
	s, _ := invoke(t, loadEvent(t, "post_plain.json"))
	if s == nil {
		t.Fatal("route not reached")
	}
	h := s.req.Header
	const sig = "t=1717164517,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd"
	for _, name := range []string{"Stripe-Signature", "stripe-signature", "STRIPE-SIGNATURE"} {
		if got := h.Get(name); got != sig {
			t.Errorf("Get(%q) = %q, want %q", name, got, sig)
		}
	}
	// A repeated header arrives comma-joined and stays one value: splitting
	// would also split Stripe-Signature above.
	if got := h.Values("X-Webhook-Tag"); !slices.Equal(got, []string{"alpha,beta"}) {
		t.Errorf("Values(X-Webhook-Tag) = %q, want [alpha,beta]", got)
	}
	if got := h.Get("content-type"); got != "application/json; charset=utf-8" {
		t.Errorf("Content-Type = %q", got)
	}
	for k := range h {
		if k != http.CanonicalHeaderKey(k) {
			t.Errorf("header key %q is not canonical", k)
		}
	}
}

func TestCookies(t *testing.T) {
	t.Parallel()
	s, _ := invoke(t, loadEvent(t, "post_plain.json"))
	if s == nil {
		t.Fatal("route not reached")
	}
	if got := s.req.Header.Get("Cookie"); got != "session=abc123; theme=dark" {
		t.Errorf("Cookie header = %q", got)
	}
	c, err := s.req.Cookie("session")
	if err != nil || c.Value != "abc123" {
		t.Errorf("Cookie(session) = %v, %v", c, err)
	}
	if n := len(s.req.Cookies()); n != 2 {
		t.Errorf("len(Cookies()) = %d, want 2", n)
	}
}

func TestQueryString(t *testing.T) {
	t.Parallel()
	s, _ := invoke(t, loadEvent(t, "post_plain.json"))
	if s == nil {
		t.Fatal("route not reached")
	}
	q := s.req.URL.Query()
	// queryStringParameters says "a,b c"; rawQueryString keeps both values.
	if got := q["tag"]; !slices.Equal(got, []string{"a", "b c"}) {
		t.Errorf("tag = %q, want [a b c]", got)
	}
	if q.Get("attempt") != "2" {
		t.Errorf("attempt = %q", q.Get("attempt"))
	}

	s, _ = invoke(t, loadEvent(t, "post_percent_encoded.json"))
	if s == nil {
		t.Fatal("route not reached")
	}
	if s.req.URL.RawQuery != "q=a%26b&empty=&note=caf%C3%A9" {
		t.Errorf("RawQuery = %q", s.req.URL.RawQuery)
	}
	q = s.req.URL.Query()
	if q.Get("q") != "a&b" || q.Get("note") != "café" || !q.Has("empty") {
		t.Errorf("query = %v", q)
	}

	ev := loadEvent(t, "post_plain.json")
	ev.RawQueryString = ""
	r, err := NewRequest(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if r.RequestURI != "/webhooks/stripe" || r.URL.ForceQuery {
		t.Errorf("RequestURI = %q without a query", r.RequestURI)
	}
}

func TestPercentEncodedPathSegments(t *testing.T) {
	t.Parallel()
	s, resp := invoke(t, loadEvent(t, "post_percent_encoded.json"))
	if s == nil {
		t.Fatalf("route not reached; response %d %q", resp.StatusCode, resp.Body)
	}
	u := s.req.URL
	if u.Path != "/webhooks/acme/billing eu" {
		t.Errorf("Path = %q, want decoded", u.Path)
	}
	if u.RawPath != "/webhooks/acme%2Fbilling%20eu" || u.EscapedPath() != "/webhooks/acme%2Fbilling%20eu" {
		t.Errorf("RawPath = %q, EscapedPath = %q, want the path as received", u.RawPath, u.EscapedPath())
	}
	// The escaped slash stays inside the one segment the wildcard matches.
	if s.source != "acme/billing eu" {
		t.Errorf(`PathValue("source") = %q, want "acme/billing eu"`, s.source)
	}
	if s.req.Host != "hooks.example.com" {
		t.Errorf("Host = %q", s.req.Host)
	}
}

func TestInvalidBase64IsRejectedWith400(t *testing.T) {
	t.Parallel()
	ev := loadEvent(t, "post_invalid_base64.json")
	s, resp := invoke(t, ev)
	if s != nil {
		t.Error("handler ran for an unparsable body")
	}
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("status = %d, want 400", resp.StatusCode)
	}
	o := decodeOutcome(t, resp)
	if o["status"] != "rejected" || o["cause"] != "unparsable_body" || o["message"] == "" {
		t.Errorf("body = %q", resp.Body)
	}
	if _, err := NewRequest(context.Background(), ev); !errors.Is(err, ErrUnparsableBody) {
		t.Errorf("NewRequest error = %v, want ErrUnparsableBody", err)
	}
}

// TestAdapterRefusalsAreTheReceivers: what the adapter refuses is answered,
// logged (JSON, with cause and request id), counted (EMF) and recorded as
// the receiver's own refusals, by the receiver's table.
func TestAdapterRefusalsAreTheReceivers(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	ew, store := errorWriter(t, &logs)
	ev := loadEvent(t, "post_invalid_base64.json")
	resp, err := Handler(http.NotFoundHandler(), ew)(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest || resp.Headers["Cache-Control"] != "no-store" || resp.Headers["X-Content-Type-Options"] != "nosniff" {
		t.Errorf("response = %d %v", resp.StatusCode, resp.Headers)
	}
	if o := decodeOutcome(t, resp); o["status"] != receiver.StatusRejected || o["cause"] != "unparsable_body" {
		t.Errorf("body = %q", resp.Body)
	}
	entry := logEntry(t, &logs)
	// The fixture posts to /webhooks/acme, which is not configured: the
	// metric's dimension stays bounded, the name goes to requested_source.
	field.Check(t, "log entry",
		field.Eq("msg", entry["msg"], "webhook rejected"),
		field.Eq("cause", entry["cause"], "unparsable_body"),
		field.Eq("source", entry["source"], "(unknown)"),
		field.Eq("requested_source", entry["requested_source"], "acme"),
		field.Eq("request_id", entry["request_id"], any(ev.RequestContext.RequestID)),
		field.Eq("Rejected", entry["Rejected"], 1.0),
	)
	// Recorded by the receiver's background writer, under (unknown).
	poll.Until(t, 10*time.Second, func() (bool, string) {
		rej, err := store.RejectionList(context.Background(), time.Time{}, 10)
		return err == nil && len(rej) == 1 && rej[0].Source == "(unknown)" && strings.HasSuffix(rej[0].Message, "acme") &&
			rej[0].Cause == "unparsable_body" && rej[0].RequestID == ev.RequestContext.RequestID, fmt.Sprintf("rejections recorded = %+v, %v", rej, err)
	})

	// To a configured source, the refusal counts under its name.
	logs.Reset()
	ev.RawPath = "/webhooks/stripe"
	if resp, _ := Handler(http.NotFoundHandler(), ew)(context.Background(), ev); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	entry = nil
	if err := json.Unmarshal(bytes.TrimSpace(logs.Bytes()), &entry); err != nil || entry["source"] != "stripe" {
		t.Errorf("log entry = %v, %v", entry, err)
	}
}

func TestInvalidRequestLineIsRejectedWith400(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, method, rawPath string }{
		{"bad escape", "POST", "/webhooks/%zz"},
		{"absolute form", "POST", "http://evil.example/webhooks/x"},
		{"relative path", "POST", "webhooks/x"},
		{"method with space", "PO ST", "/webhooks/x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ev := loadEvent(t, "post_plain.json")
			ev.RequestContext.HTTP.Method, ev.RawPath = c.method, c.rawPath
			s, resp := invoke(t, ev)
			if s != nil {
				t.Error("handler ran")
			}
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status = %d, want 400", resp.StatusCode)
			}
			if o := decodeOutcome(t, resp); o["status"] != "rejected" || o["cause"] != "invalid_request" {
				t.Errorf("body = %q", resp.Body)
			}
			if _, err := NewRequest(context.Background(), ev); !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("NewRequest error = %v, want ErrInvalidRequest", err)
			}
		})
	}
}

// panickers are handlers that fail in the ways a bug does.
func panickers() map[string]http.HandlerFunc {
	const secret = "dsn=postgres://admin:hunter2@db"
	return map[string]http.HandlerFunc{
		"panic after partial write": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Partial", "yes")
			_, _ = io.WriteString(w, "partial "+secret)
			panic(errors.New("boom: " + secret))
		},
		"invalid status code": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(0)
		},
		"panic(nil)": func(w http.ResponseWriter, r *http.Request) {
			panic(nil) // recover sees *runtime.PanicNilError since Go 1.21
		},
	}
}

// TestHandlerPanicIs503Internal: a panic is the receiver's cause internal:
// 503 with Retry-After (the sender retries; nothing is lost), a body that
// leaks nothing of what the handler wrote, and one JSON log line with the
// cause, the request id, the panic's value and its stack, which is also
// the Unavailable metric.
func TestHandlerPanicIs503Internal(t *testing.T) {
	t.Parallel()
	for name, h := range panickers() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			ew, _ := errorWriter(t, &logs)
			resp, err := Handler(h, ew)(context.Background(), loadEvent(t, "post_plain.json"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Headers["Retry-After"] == "" {
				t.Errorf("status = %d, headers %v; want 503 with Retry-After", resp.StatusCode, resp.Headers)
			}
			if o := decodeOutcome(t, resp); o["status"] != receiver.StatusUnavailable || o["cause"] != "internal" || o["message"] == "" {
				t.Errorf("body = %q", resp.Body)
			}
			if _, ok := resp.Headers["X-Partial"]; ok || strings.Contains(resp.Body, "hunter2") || strings.Contains(resp.Body, "panic") {
				t.Errorf("partial response leaked: %v %q", resp.Headers, resp.Body)
			}
			entry := logEntry(t, &logs)
			field.Check(t, "log entry",
				field.Eq("level", entry["level"], "ERROR"),
				field.Eq("cause", entry["cause"], "internal"),
				field.Eq("request_id", entry["request_id"], "Yx3kQhS1DoEEJ8g="),
				field.Eq("Unavailable", entry["Unavailable"], 1.0),
				field.Is("panic", entry["panic"], entry["panic"] != "" && entry["panic"] != nil, "the panic's value"),
			)
			if stack, _ := entry["stack"].(string); !strings.Contains(stack, "lambdahttp") {
				t.Errorf("log has no stack: %v", entry)
			}
		})
	}
}

// panickingWriter is an error writer with a bug.
type panickingWriter struct{}

func (panickingWriter) WriteError(http.ResponseWriter, *http.Request, error) { panic("writer bug") }

// TestErrorWriterPanicStillAnswers: even a broken error path answers a
// clean, retryable 503 and no Lambda error.
func TestErrorWriterPanicStillAnswers(t *testing.T) {
	t.Parallel()
	resp, err := Handler(panickers()["panic(nil)"], panickingWriter{})(context.Background(), loadEvent(t, "post_plain.json"))
	if err != nil {
		t.Fatal(err)
	}
	field.Check(t, "response",
		field.Eq("StatusCode", resp.StatusCode, http.StatusServiceUnavailable),
		field.Eq("Body", resp.Body, `{"status":"unavailable","cause":"internal"}`+"\n"),
		field.Is("Retry-After", resp.Headers["Retry-After"], resp.Headers["Retry-After"] != "", "set"),
		field.Eq("X-Content-Type-Options", resp.Headers["X-Content-Type-Options"], "nosniff"),
		field.Eq("Content-Type", resp.Headers["Content-Type"], "application/json"),
	)
}

func TestNilArgumentsPanicAtColdStart(t *testing.T) {
	t.Parallel()
	ew, _ := errorWriter(t, nil)
	for name, f := range map[string]func(){
		"nil handler": func() { Handler(nil, ew) },
		"nil writer":  func() { Handler(http.NotFoundHandler(), nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestBinaryResponseIsBase64(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01")
	cases := []struct {
		name        string
		contentType string // "" leaves it for sniffing
		encoding    string
		body        []byte
		wantBase64  bool
		wantType    string
	}{
		{"png", "image/png", "", png, true, "image/png"},
		{"octet-stream ascii", "application/octet-stream", "", []byte("plain ascii"), true, "application/octet-stream"},
		{"sniffed png", "", "", png, true, "image/png"},
		{"text with invalid utf-8", "text/plain; charset=latin1", "", []byte("caf\xe9"), true, "text/plain; charset=latin1"},
		{"gzipped json", "application/json", "gzip", []byte("\x1f\x8b\x08\x00"), true, "application/json"},
		{"json", "application/json", "", []byte(`{"ok":true}`), false, "application/json"},
		{"sniffed text", "", "", []byte("hello"), false, "text/plain; charset=utf-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			resp := run(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.contentType != "" {
					w.Header().Set("Content-Type", c.contentType)
				}
				if c.encoding != "" {
					w.Header().Set("Content-Encoding", c.encoding)
				}
				_, _ = w.Write(c.body)
			}), loadEvent(t, "post_plain.json"))
			if resp.IsBase64Encoded != c.wantBase64 {
				t.Fatalf("IsBase64Encoded = %v, want %v (body %q)", resp.IsBase64Encoded, c.wantBase64, resp.Body)
			}
			got := []byte(resp.Body)
			if resp.IsBase64Encoded {
				var err error
				if got, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, c.body) {
				t.Errorf("body = %q, want %q", got, c.body)
			}
			if resp.Headers["Content-Type"] != c.wantType {
				t.Errorf("Content-Type = %q, want %q", resp.Headers["Content-Type"], c.wantType)
			}
		})
	}
}

func TestTextualContentTypes(t *testing.T) {
	t.Parallel()
	cases := map[string]bool{
		"text/plain":                        true,
		"text/html; charset=utf-8":          true,
		"TEXT/CSV":                          true,
		"application/json":                  true,
		"application/problem+json":          true,
		"application/xml":                   true,
		"application/atom+xml":              true,
		"application/javascript":            true,
		"text/javascript; charset=utf-8":    true,
		"application/x-www-form-urlencoded": true,
		"application/json; charset=":        true, // malformed parameter
		"application/octet-stream":          false,
		"image/svg":                         false,
		"application/pdf":                   false,
		"":                                  false,
	}
	for ct, want := range cases {
		h := http.Header{"Content-Type": {ct}}
		if got := textual(h); got != want {
			t.Errorf("textual(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestResponseHeadersAndCookies(t *testing.T) {
	t.Parallel()
	resp := run(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Add("Vary", "Accept")
		h.Add("Vary", "Accept-Encoding")
		h.Add("Set-Cookie", "a=1; Path=/; Expires=Wed, 21 Oct 2026 07:28:00 GMT")
		h.Add("Set-Cookie", "b=2; HttpOnly")
		h.Set("X-Injected", "ok\r\nX-Evil: 1")
		h["bad name"] = []string{"dropped"}
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		// After WriteHeader the headers are sent; net/http ignores these.
		h.Set("X-Late", "ignored")
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, `{}`)
	}), loadEvent(t, "post_plain.json"))

	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("status = %d, want 202 (the first WriteHeader wins)", resp.StatusCode)
	}
	if got := resp.Headers["Vary"]; got != "Accept,Accept-Encoding" {
		t.Errorf("Vary = %q", got)
	}
	want := []string{"a=1; Path=/; Expires=Wed, 21 Oct 2026 07:28:00 GMT", "b=2; HttpOnly"}
	if !slices.Equal(resp.Cookies, want) {
		t.Errorf("Cookies = %q, want %q", resp.Cookies, want)
	}
	if _, ok := resp.Headers["Set-Cookie"]; ok {
		t.Error("Set-Cookie must only appear in Cookies")
	}
	if got := resp.Headers["X-Injected"]; got != "ok X-Evil: 1" {
		t.Errorf("X-Injected = %q, want CR/LF replaced", got)
	}
	if _, ok := resp.Headers["X-Late"]; ok {
		t.Error("header set after WriteHeader was sent")
	}
	if _, ok := resp.Headers["bad name"]; ok {
		t.Error("invalid header name was sent")
	}
}

func TestResponseStatusDefaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		h          http.HandlerFunc
		wantStatus int
		wantBody   string
	}{
		{"write without WriteHeader", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "ok")
		}, http.StatusOK, "ok"},
		{"nothing written", func(w http.ResponseWriter, r *http.Request) {}, http.StatusOK, ""},
		{"informational then final", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusCreated)
		}, http.StatusCreated, ""},
		{"no body allowed", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
			if _, err := io.WriteString(w, "x"); !errors.Is(err, http.ErrBodyNotAllowed) {
				t.Errorf("Write after 204: err = %v, want ErrBodyNotAllowed", err)
			}
		}, http.StatusNoContent, ""},
		{"flush is harmless", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "a")
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("Flush: %v", err)
			}
			_, _ = io.WriteString(w, "b")
		}, http.StatusOK, "ab"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			resp := run(t, c.h, loadEvent(t, "post_plain.json"))
			if resp.StatusCode != c.wantStatus || resp.Body != c.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, resp.Body, c.wantStatus, c.wantBody)
			}
		})
	}
}

func TestServeMuxDispatchesOnMethodAndPattern(t *testing.T) {
	t.Parallel()
	s, resp := invoke(t, loadEvent(t, "post_plain.json"))
	if s == nil || s.source != "stripe" {
		t.Fatalf("POST /webhooks/stripe: seen %+v, response %d %q", s, resp.StatusCode, resp.Body)
	}

	ev := loadEvent(t, "post_plain.json")
	ev.RequestContext.HTTP.Method = http.MethodGet
	s, resp = invoke(t, ev)
	if s != nil || resp.StatusCode != http.StatusMethodNotAllowed || resp.Headers["Allow"] != "POST" {
		t.Errorf("GET: seen %v, response %d %v", s != nil, resp.StatusCode, resp.Headers)
	}

	ev = loadEvent(t, "post_plain.json")
	ev.RawPath = "/elsewhere"
	s, resp = invoke(t, ev)
	if s != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("/elsewhere: seen %v, status %d", s != nil, resp.StatusCode)
	}
}

func TestRequestIDOutsideLambda(t *testing.T) {
	t.Parallel()
	if got := RequestID(httptest.NewRequest(http.MethodPost, "/webhooks/x", nil)); got != "" {
		t.Errorf("RequestID = %q, want empty", got)
	}
	if got := RequestID(nil); got != "" {
		t.Errorf("RequestID(nil) = %q", got)
	}
}

// A function URL's IAM authorizer (which Lambda fills, never the client)
// reaches the handler through IAMCaller; a header claiming an identity
// does not, and an event without the authorizer has none.
func TestIAMCallerComesFromTheRequestContextOnly(t *testing.T) {
	t.Parallel()
	iam := &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
		AccessKey: "ASIAEXAMPLE", AccountID: "123456789012", CallerID: "AROAEXAMPLE:alice",
		UserARN: "arn:aws:sts::123456789012:assumed-role/Ops/alice", UserID: "AROAEXAMPLE:alice",
	}
	ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: "/v1/whoami", Headers: map[string]string{"x-amzn-iam-userarn": "arn:aws:iam::1:root"}}
	ev.RequestContext.HTTP.Method = http.MethodGet
	r, err := NewRequest(t.Context(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := IAMCaller(r); ok {
		t.Fatal("an event without an authorizer has a caller")
	}
	ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: iam}
	if r, err = NewRequest(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	got, ok := IAMCaller(r)
	if !ok || got.UserARN != iam.UserARN || got.AccessKey != iam.AccessKey {
		t.Fatalf("IAMCaller = %+v, %v", got, ok)
	}
	if _, ok := IAMCaller(httptest.NewRequest(http.MethodGet, "/", nil)); ok {
		t.Fatal("a request from outside Lambda has a caller")
	}
	if _, ok := IAMCaller(nil); ok {
		t.Fatal("nil has a caller")
	}
}

// FuzzHandler checks the adapter's promise: whatever the event holds,
// Handler returns a response and no Lambda error, and an accepted body
// reaches the handler and comes back byte for byte.
func FuzzHandler(f *testing.F) {
	for _, name := range []string{"post_plain.json", "post_base64_binary.json", "post_named_stage.json", "post_percent_encoded.json", "post_invalid_base64.json"} {
		ev := loadEvent(f, name)
		f.Add(ev.RequestContext.HTTP.Method, ev.RawPath, ev.RawQueryString, ev.RequestContext.Stage, ev.Body, ev.IsBase64Encoded, "stripe-signature", "t=1,v1=x", "a=b", ev.RequestContext.HTTP.SourceIP)
	}
	f.Add("", "", "", "", "", false, "", "", "", "")
	f.Add("GET", "/%", "%%", "$default", "=", true, "Host", "\r\n", ";;", "not-an-ip")
	f.Add("POST", "/a?b#c", "x=1", "a?b", "\x00\xff", false, "content-length", "-1", "\x00", "::1")

	ew, _ := errorWriter(f, nil)
	f.Fuzz(func(t *testing.T, method, rawPath, rawQuery, stage, body string, b64 bool, hk, hv, cookie, ip string) {
		ev := events.APIGatewayV2HTTPRequest{
			Version:         "2.0",
			RawPath:         rawPath,
			RawQueryString:  rawQuery,
			Cookies:         []string{cookie},
			Headers:         map[string]string{hk: hv},
			Body:            body,
			IsBase64Encoded: b64,
		}
		ev.RequestContext.Stage = stage
		ev.RequestContext.HTTP.Method = method
		ev.RequestContext.HTTP.SourceIP = ip

		echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = r.URL.Query()
			_ = r.Cookies()
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = io.Copy(w, r.Body)
		})
		resp, err := Handler(echo, ew)(context.Background(), ev)
		if err != nil {
			t.Fatalf("Lambda error: %v", err)
		}
		if resp.StatusCode != http.StatusOK {
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d %q", resp.StatusCode, resp.Body)
			}
			return
		}
		want := []byte(body)
		if b64 {
			want, _ = base64.StdEncoding.DecodeString(body)
		}
		got, _ := base64.StdEncoding.DecodeString(resp.Body)
		if !resp.IsBase64Encoded && resp.Body != "" {
			t.Fatalf("octet-stream body not base64: %q", resp.Body)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("echoed %q, want %q", got, want)
		}
	})
}
