package receiver_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/emftest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdahttp"
	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

const endpointToken = "tok_Zk3J9qLm2PzXv8RtYb6WcN4dHsAeUg1"

// tokenDoc has a source on both paths, and one only on its tokened path.
const tokenDoc = `{"sources": {
  "stripe":   {"kind": "stripe", "secrets": ["whsec_test_new_0123456789abcde"], "endpoint_token": "` + endpointToken + `"},
  "hidden":   {"kind": "stripe", "secrets": ["whsec_test_hidden_0123456789abcd"], "endpoint_token": "` + endpointToken + `", "untokened_path": false},
  "standard": {"kind": "standard", "secrets": ["whsec_dGVzdC1zdGFuZGFyZC1zZWNyZXQtMDEy"]}
}}`

func tokenSources(t *testing.T) *source.Set {
	t.Helper()
	set, err := source.Parse([]byte(tokenDoc))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// raw serves r and returns the recorder, body and headers untouched.
func (f *fixture) raw(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	f.handler.ServeHTTP(w, r)
	return w
}

// TestUnauthenticatedIsOneAnswer: an unknown name, a known name with a
// bad or no signature, a stale timestamp, a wrong or missing endpoint
// token all get the same status, headers and body, so a name cannot be
// told configured from the answer. The right token and signature pass.
func TestUnauthenticatedIsOneAnswer(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	f := setupOn(t, pgtest.Pool(t), receiver.Config{}, receiver.Deps{Sources: tokenSources(t), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	body := stripeEvent(t, "evt_one_answer")
	signedAt := func(name, path string) *http.Request {
		r := f.signed(name, body, "")
		r.URL.Path, r.RequestURI = path, path
		return r
	}
	forge := func(r *http.Request) *http.Request {
		r.Header.Set("Stripe-Signature", "t=1700000000,v1="+strings.Repeat("0", 64))
		return r
	}
	tok := "/" + endpointToken
	tests := []struct {
		name  string
		req   *http.Request
		cause inbox.Cause // in the log line
	}{
		{"unknown name", httptest.NewRequest("POST", "/webhooks/paypal", bytes.NewReader(body)), inbox.CauseUnknownSource},
		{"unknown name, token path", httptest.NewRequest("POST", "/webhooks/paypal"+tok, bytes.NewReader(body)), inbox.CauseUnknownSource},
		{"known name, no signature", httptest.NewRequest("POST", "/webhooks/stripe", bytes.NewReader(body)), inbox.CauseSignatureMissing},
		{"known name, bad signature", forge(signedAt("stripe", "/webhooks/stripe")), inbox.CauseSignatureMismatch},
		{"known name, token path, bad signature", forge(signedAt("stripe", "/webhooks/stripe"+tok)), inbox.CauseSignatureMismatch},
		{"known name, wrong token", signedAt("stripe", "/webhooks/stripe/"+strings.Repeat("x", 35)), inbox.CauseEndpointTokenMismatch},
		{"token-only source, untokened path", signedAt("hidden", "/webhooks/hidden"), inbox.CauseEndpointTokenMismatch},
		{"source without token, token path", signedAt("standard", "/webhooks/standard"+tok), inbox.CauseEndpointTokenMismatch},
		{"stale timestamp", func() *http.Request {
			src, _ := f.sources.Lookup("stripe")
			r := httptest.NewRequest("POST", "/webhooks/stripe", bytes.NewReader(body))
			sr := sign(t, src, body, now.Add(-time.Hour))
			r.Header = sr
			return r
		}(), inbox.CauseTimestampOutOfTolerance},
	}
	var first *httptest.ResponseRecorder
	for _, tt := range tests {
		w := f.raw(tt.req)
		if first == nil {
			first = w
			var a answer
			if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || w.Code != 401 || a.Cause != inbox.CauseUnauthenticated {
				t.Fatalf("%s: %d %s", tt.name, w.Code, w.Body)
			}
		}
		if w.Code != first.Code || w.Body.String() != first.Body.String() || fmt.Sprint(w.Header()) != fmt.Sprint(first.Header()) {
			t.Errorf("%s: %d %v %s; the first answer was %d %v %s", tt.name, w.Code, w.Header(), w.Body, first.Code, first.Header(), first.Body)
		}
	}
	// The log lines keep the precise cause, for operators.
	var causes []string
	for _, line := range logs.lines() {
		var doc map[string]any
		_ = json.Unmarshal(line, &doc)
		causes = append(causes, fmt.Sprint(doc["cause"]))
	}
	for i, tt := range tests {
		if i >= len(causes) || causes[i] != string(tt.cause) {
			t.Errorf("%s: logged cause %v, want %s", tt.name, causes, tt.cause)
		}
	}
	if n := f.count(); n != 0 {
		t.Fatalf("%d events stored", n)
	}

	// The right token and signature: accepted, on both paths where both are open.
	if a := f.do(signedAt("stripe", "/webhooks/stripe"+tok)); a.Code != 200 || a.Status != "accepted" {
		t.Fatalf("tokened path: %+v", a)
	}
	if a := f.do(f.signed("stripe", stripeEvent(t, "evt_untokened"), "")); a.Code != 200 || a.Status != "accepted" {
		t.Fatalf("untokened path: %+v", a)
	}
	if a := f.do(signedAt("hidden", "/webhooks/hidden"+tok)); a.Code != 200 || a.Status != "accepted" {
		t.Fatalf("token-only source: %+v", a)
	}
	// The token is a secret: no log line or record carries it, nor the
	// wrong one sent.
	for _, line := range logs.lines() {
		if bytes.Contains(line, []byte(endpointToken)) || bytes.Contains(line, []byte(strings.Repeat("x", 35))) {
			t.Fatalf("a log line carries a token: %s", line)
		}
	}
	for _, r := range f.rejections(1) {
		if strings.Contains(fmt.Sprint(r), endpointToken) || strings.Contains(fmt.Sprint(r), strings.Repeat("x", 35)) {
			t.Fatalf("a record carries a token: %+v", r)
		}
	}
}

// sign returns the headers of body signed for src at ts.
func sign(t *testing.T, src *source.Source, body []byte, ts time.Time) http.Header {
	t.Helper()
	sr, err := sender.Sign(src, body, "", ts)
	if err != nil {
		t.Fatal(err)
	}
	return sr.Header
}

func readCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

// TestRefusalDoesNotWaitForTheDatabase: with webhook_rejections locked,
// so that every insert into it waits, refusals still answer at once;
// their records arrive once the lock is gone.
func TestRefusalDoesNotWaitForTheDatabase(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	clk := &clock{t: now}
	f := setupOn(t, pool, receiver.Config{}, receiver.Deps{Clock: clk})
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `LOCK TABLE webhook_rejections IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		clk.Advance(2 * time.Second) // past the sampler: each is recorded
		if a := f.do(httptest.NewRequest("POST", "/webhooks/stripe", strings.NewReader("{}"))); a.Code != 401 {
			t.Fatalf("refusal %d: %+v", i, a)
		}
	}
	// The writer is stuck on the lock: the answers did not wait for it.
	poll.Until(t, 10*time.Second, func() (bool, string) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n == 1, fmt.Sprintf("%d sessions waiting for a lock, %v", n, err)
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if list := f.rejections(3); len(list) != 3 || list[0].Cause != inbox.CauseSignatureMissing {
		t.Fatalf("records = %+v", list)
	}
}

// TestRejectionQueueDropsAndCountsWhenFull: with the database blocked, a
// full queue drops records rather than holding answers, and says how many
// it dropped in a log line that is an EMF metric. Close writes what is
// queued before it returns.
func TestRejectionQueueDropsAndCountsWhenFull(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	clk := &clock{t: now}
	var logs syncBuffer
	f := setupOn(t, pool, receiver.Config{Metrics: metrics.Emitter{Namespace: "Test"}},
		receiver.Deps{Clock: clk, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `LOCK TABLE webhook_rejections IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	refuse := func() {
		clk.Advance(2 * time.Second)
		if a := f.do(httptest.NewRequest("POST", "/webhooks/stripe", strings.NewReader("{}"))); a.Code != 401 {
			t.Fatalf("refusal: %+v", a)
		}
	}
	refuse() // taken by the writer, which waits on the lock
	poll.Until(t, 10*time.Second, func() (bool, string) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n == 1, fmt.Sprintf("%d sessions waiting for a lock, %v", n, err)
	})
	for range receiver.RejectionQueue {
		refuse() // queued
	}
	for range 5 {
		refuse() // dropped
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := f.handler.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	list, err := f.store.RejectionList(ctx, time.Time{}, 2*receiver.RejectionQueue)
	if want := 1 + receiver.RejectionQueue; err != nil || len(list) != want {
		t.Fatalf("records after Close = %d, %v; want the %d taken or queued", len(list), err, want)
	}
	var dropped float64
	for _, line := range logs.lines() {
		var doc map[string]any
		_ = json.Unmarshal(line, &doc)
		if doc["msg"] == "rejection records dropped: the queue was full" {
			if err := emftest.Validate(line); err != nil {
				t.Fatalf("not EMF: %v", err)
			}
			dropped += doc["RejectionRecordsDropped"].(float64)
		}
	}
	if dropped != 5 {
		t.Fatalf("dropped records logged: %v, want 5\n%s", dropped, logs.buf.String())
	}
	// After Close a refusal still answers; it is not recorded.
	refuse()
}

// TestUnknownNamesShareOneBucket: any number of unknown names, hostile
// ones included, make one metric dimension value, one sampler key per
// cause and bounded records, stored under (unknown) with the name escaped.
func TestUnknownNamesShareOneBucket(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	f := setupOn(t, pgtest.Pool(t), receiver.Config{Metrics: metrics.Emitter{Namespace: "Test"}}, receiver.Deps{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	for i := range 40 {
		name := fmt.Sprintf("%%1B]52;c;aGk=%%07%%C2%%9B31mname-%d", i)
		method := "POST"
		if i%2 == 1 {
			method = "PUT" // a GET to an unknown name is unknown_source too
		}
		if a := f.do(httptest.NewRequest(method, "/webhooks/"+name, strings.NewReader("{}"))); a.Code != 401 && a.Code != 405 {
			t.Fatalf("%s %s: %+v", method, name, a)
		}
	}
	dims := map[string]bool{}
	for _, line := range logs.lines() {
		if bytes.ContainsAny(line, "\x1b\x07") || bytes.Contains(line, []byte("\u009b")) {
			t.Fatalf("log line carries a raw control: %s", line)
		}
		var doc map[string]any
		_ = json.Unmarshal(line, &doc)
		dims[fmt.Sprint(doc["source"])] = true
	}
	if len(dims) != 1 || !dims["(unknown)"] {
		t.Fatalf("source dimension values: %v", dims)
	}
	list := f.rejections(2)
	// Nothing else is queued: the clock did not move, so one record per cause.
	if len(list) != 2 {
		t.Fatalf("records = %d, want one per cause: %+v", len(list), list)
	}
	for _, r := range list {
		if r.Source != "(unknown)" || !strings.Contains(r.Message, `\u001b]52;c;aGk=\u0007\u009b31mname-`) {
			t.Fatalf("record = %+v", r)
		}
	}
}

// TestNoAnswerEchoesTheRequest: over a table of hostile requests, through
// the handler and through the Lambda adapter, no answer body contains any
// 6 bytes of what the sender chose (the path after /webhooks/, header
// values, the body), and every answer carries nosniff.
func TestNoAnswerEchoesTheRequest(t *testing.T) {
	t.Parallel()
	f := setupOn(t, pgtest.Pool(t), receiver.Config{MaxBodyBytes: 4096}, receiver.Deps{Sources: tokenSources(t)})
	signedBody := func(body string) *http.Request { return f.signed("standard", []byte(body), "msg_zqxIDvalue") }
	type hostile struct {
		name                string
		method, path, body  string
		header              map[string]string
		signed              *http.Request // instead of method, path, body
		wantStatus          int
		base64, invalidPath bool // adapter only
	}
	esc := "\x1b]52;c;zqxCLIP\x07\x1b[2J"
	tests := []hostile{
		{name: "unknown name", method: "POST", path: "/webhooks/zqxunknown", body: `{"id":"zqxBODYid"}`, wantStatus: 401},
		{name: "unknown name with escapes", method: "POST", path: "/webhooks/%1B%5B2Jzqxesc%C2%9B", body: esc, wantStatus: 401},
		{name: "GET any name", method: "GET", path: "/webhooks/zqxgetname", wantStatus: 401},
		{name: "GET a handshake query, any name", method: "GET", path: "/webhooks/zqxgetname?hub.mode=subscribe&hub.challenge=zqxCHALLENGE&hub.verify_token=zqxTOKEN", wantStatus: 401},
		{name: "PUT any name", method: "PUT", path: "/webhooks/zqxputname", body: "zqxPUT", wantStatus: 405},
		{name: "no route", method: "POST", path: "/zqxroute/zqxmore", body: "zqxNOROUTE", wantStatus: 404},
		{name: "deep route", method: "POST", path: "/webhooks/stripe/zqxa/zqxb", wantStatus: 404},
		{name: "wrong token", method: "POST", path: "/webhooks/stripe/zqxWRONGTOKENzqxWRONGTOKENzqxWRONG", body: "{}", wantStatus: 401},
		{name: "forged signature", method: "POST", path: "/webhooks/stripe", body: `{"id":"evt_zqxforged"}`,
			header: map[string]string{"Stripe-Signature": "t=1700000000,v1=zqxSIGNATUREzqx", "X-Request-Id": "zqxREQID" + esc, "User-Agent": "zqxAGENT"}, wantStatus: 401},
		{name: "oversize", method: "POST", path: "/webhooks/stripe", body: strings.Repeat("zqxBIG", 1000), wantStatus: 413},
		{name: "signed, unparsable", signed: signedBody("zqxNOTJSON{"), wantStatus: 400},
		{name: "signed, bad type", signed: signedBody(`{"type": 12345678, "zqx": "zqxTYPE"}`), wantStatus: 400},
		{name: "signed, long type", signed: signedBody(`{"type": "zqx` + strings.Repeat("T", 400) + `"}`), wantStatus: 400},
		{name: "adapter: invalid base64", method: "POST", path: "/webhooks/zqxb64name", body: "zqx!!not*b64", base64: true, wantStatus: 400},
		{name: "adapter: invalid path", method: "POST", path: "/webhooks/%zzzqxBADPATH", body: "{}", invalidPath: true, wantStatus: 400},
	}
	adapter := lambdahttp.Handler(f.handler, f.handler)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var chosen []string // what the sender chose
			var status int
			var body []byte
			var header http.Header
			if tt.signed != nil || (!tt.base64 && !tt.invalidPath) {
				r := tt.signed
				if r == nil {
					r = httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
					for k, v := range tt.header {
						r.Header.Set(k, v)
					}
				}
				b := new(bytes.Buffer)
				_, _ = b.ReadFrom(r.Body)
				chosen = append(chosen, strings.TrimPrefix(r.URL.Path, "/webhooks/"), strings.TrimPrefix(r.URL.EscapedPath(), "/webhooks/"), b.String())
				r.Body = readCloser(b.Bytes())
				for _, vs := range r.Header {
					chosen = append(chosen, vs...)
				}
				w := f.raw(r)
				status, body, header = w.Code, w.Body.Bytes(), w.Header()
			}
			if tt.signed == nil { // through the adapter too
				ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: tt.path, Headers: map[string]string{"x-zqx": "zqxHEADERvalue"}, Body: tt.body, IsBase64Encoded: tt.base64}
				for k, v := range tt.header {
					ev.Headers[strings.ToLower(k)] = v
				}
				ev.RequestContext.HTTP.Method = tt.method
				ev.RequestContext.RequestID = "zqxAPIGWREQ"
				chosen = append(chosen, strings.TrimPrefix(tt.path, "/webhooks/"), tt.body, "zqxHEADERvalue")
				for _, v := range tt.header {
					chosen = append(chosen, v)
				}
				resp, err := adapter(context.Background(), ev)
				if err != nil {
					t.Fatal(err)
				}
				ab := []byte(resp.Body)
				if resp.IsBase64Encoded {
					ab, _ = base64.StdEncoding.DecodeString(resp.Body)
				}
				if resp.Headers["X-Content-Type-Options"] != "nosniff" {
					t.Errorf("adapter: no nosniff: %v", resp.Headers)
				}
				checkNoEcho(t, "adapter", ab, chosen)
				if status == 0 {
					status, body, header = resp.StatusCode, ab, http.Header{"X-Content-Type-Options": {resp.Headers["X-Content-Type-Options"]}}
				} else if resp.StatusCode != status || string(ab) != string(body) {
					t.Errorf("adapter: %d %s; handler: %d %s", resp.StatusCode, ab, status, body)
				}
			}
			if status != tt.wantStatus {
				t.Errorf("status %d, want %d: %s", status, tt.wantStatus, body)
			}
			if header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("no nosniff: %v", header)
			}
			checkNoEcho(t, "handler", body, chosen)
		})
	}
}

// checkNoEcho fails when body holds "zqx" (every hostile value has it) or
// any 6 consecutive bytes of a chosen value.
func checkNoEcho(t *testing.T, via string, body []byte, chosen []string) {
	t.Helper()
	if bytes.Contains(bytes.ToLower(body), []byte("zqx")) {
		t.Errorf("%s: the answer echoes the request: %s", via, body)
		return
	}
	for _, c := range chosen {
		for i := 0; i+6 <= len(c); i++ {
			if bytes.Contains(body, []byte(c[i:i+6])) {
				t.Errorf("%s: the answer %s contains %q of the request's %q", via, body, c[i:i+6], c)
				return
			}
		}
	}
}
