package receiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/invoketest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func TestMain(m *testing.M) { invoketest.Use(); pgtest.Main(m) }

// now is the fixed clock of these tests: signatures are made and checked at
// this instant, so no test depends on the wall clock.
var now = time.Unix(1_700_000_000, 0)

const sourcesDoc = `{"sources": {
  "stripe":   {"kind": "stripe",   "secrets": ["whsec_test_new_0123456789abcde", "whsec_test_old_0123456789abcde"]},
  "standard": {"kind": "standard", "secrets": ["whsec_dGVzdC1zdGFuZGFyZC1zZWNyZXQtMDEy"]}
}}`

type fixture struct {
	t       *testing.T
	pool    *pgxpool.Pool
	store   *storage.Store
	sources *source.Set
	handler *receiver.Handler
}

// setup gives each test its own migrated database and a receiver over it.
func setup(t *testing.T) *fixture {
	t.Helper()
	return setupOn(t, pgtest.Pool(t), receiver.Config{}, receiver.Deps{})
}

// fixedClock is a Clock stopped at one time.
type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// setupOn makes a fixture on pool: deps' store is the pool's, and its
// sources, clock and logger default to the tests' sources, now and
// silence.
func setupOn(t *testing.T, pool *pgxpool.Pool, cfg receiver.Config, deps receiver.Deps) *fixture {
	t.Helper()
	if deps.Sources == nil {
		var err error
		if deps.Sources, err = source.Parse([]byte(sourcesDoc)); err != nil {
			t.Fatal(err)
		}
	}
	sources, store := deps.Sources, storage.New(pool)
	deps.Store = store
	if deps.Clock == nil {
		deps.Clock = fixedClock(now)
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	h, err := receiver.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return &fixture{t: t, pool: pool, store: store, sources: sources, handler: h}
}

// stripeEvent returns the source package's recorded Stripe event (the one
// its verifier is tested with) with its id replaced.
func stripeEvent(t testing.TB, id string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "source", "testdata", "stripe_invoice_paid.json"))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Replace(b, []byte("evt_1PqAbCDeFgHiJkLm"), []byte(id), 1)
}

// signed returns a request for srcName carrying body, signed at now.
func (f *fixture) signed(srcName string, body []byte, eventID string) *http.Request {
	f.t.Helper()
	src, ok := f.sources.Lookup(srcName)
	if !ok {
		f.t.Fatalf("no source %s", srcName)
	}
	sr, err := sender.Sign(src, body, eventID, now)
	if err != nil {
		f.t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/webhooks/"+srcName, bytes.NewReader(body))
	for k, v := range sr.Header {
		r.Header[k] = v
	}
	return r
}

type answer struct {
	Code    int
	Status  string      `json:"status"`
	ID      int64       `json:"id"`
	Cause   inbox.Cause `json:"cause"`
	Message string      `json:"message"`
	Header  http.Header `json:"-"`
}

func (f *fixture) do(r *http.Request) answer {
	f.t.Helper()
	w := httptest.NewRecorder()
	f.handler.ServeHTTP(w, r)
	var a answer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		f.t.Fatalf("response is not JSON: %q", w.Body.String())
	}
	a.Code, a.Header = w.Code, w.Header()
	return a
}

func (f *fixture) count() int {
	f.t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_events`).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

func TestAcceptThenDuplicate(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := stripeEvent(t, "evt_accept")

	a := f.do(f.signed("stripe", body, ""))
	if a.Code != 200 || a.Status != "accepted" || a.ID == 0 {
		t.Fatalf("first delivery: %+v", a)
	}
	if a.Header.Get("X-Content-Type-Options") != "nosniff" || a.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("headers of an answer = %v", a.Header)
	}
	d := f.do(f.signed("stripe", body, ""))
	if d.Code != 200 || d.Status != "duplicate" || d.ID != 0 {
		t.Fatalf("redelivery: %+v", d)
	}
	ev, err := f.store.EventGetByKey(context.Background(), "stripe", "evt_accept")
	if err != nil {
		t.Fatal(err)
	}
	field.Must(t, "stored event", field.Printed("ID", ev.ID, a.ID), field.Printed("Type", ev.Type, "invoice.paid"), field.Printed("Body", string(ev.Body), string(body)),
		field.Printed("Payload stored", ev.Payload != nil, true), field.Printed("BodySize", ev.BodySize, len(body)))
	if n := f.count(); n != 1 {
		t.Fatalf("rows = %d, want 1", n)
	}
	if ev.SourceKind != "stripe" {
		t.Fatalf("source_kind = %q; the processor routes by it", ev.SourceKind)
	}
}

func TestStandardWebhooksAccepted(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := []byte(`{"type":"user.created","timestamp":"2023-11-14T22:13:20Z","data":{"id":"u_1"}}`)
	a := f.do(f.signed("standard", body, "msg_std_1"))
	if a.Code != 200 || a.Status != "accepted" {
		t.Fatalf("standard delivery: %+v", a)
	}
	ev, err := f.store.EventGetByKey(context.Background(), "standard", "msg_std_1")
	if err != nil || ev.Type != "user.created" {
		t.Fatalf("stored = %+v, %v", ev, err)
	}
	// The same id on another source is another source's event: kept too.
	b2 := []byte(`{"id":"msg_std_1","type":"x"}`)
	if a := f.do(f.signed("stripe", b2, "")); a.Status != "accepted" {
		t.Fatalf("same id on another source: %+v", a)
	}
}

func TestDuplicateWithDifferentBodyIsRecorded(t *testing.T) {
	t.Parallel()
	f := setup(t)
	first := stripeEvent(t, "evt_mismatch")
	second := bytes.Replace(first, []byte(`"amount_paid": 2000`), []byte(`"amount_paid": 9999`), 1)
	if a := f.do(f.signed("stripe", first, "")); a.Status != "accepted" {
		t.Fatalf("first: %+v", a)
	}
	if a := f.do(f.signed("stripe", first, "")); a.Status != "duplicate" {
		t.Fatalf("identical redelivery: %+v", a)
	}
	if n, _ := f.store.PayloadMismatchCountByEvent(context.Background(), "stripe", "evt_mismatch"); n != 0 {
		t.Fatalf("identical redelivery recorded as a mismatch")
	}
	if a := f.do(f.signed("stripe", second, "")); a.Code != 200 || a.Status != "duplicate" {
		t.Fatalf("changed redelivery: %+v", a)
	}
	if n, _ := f.store.PayloadMismatchCountByEvent(context.Background(), "stripe", "evt_mismatch"); n != 1 {
		t.Fatalf("mismatches = %d, want 1", n)
	}
	ev, _ := f.store.EventGetByKey(context.Background(), "stripe", "evt_mismatch")
	if !bytes.Equal(ev.Body, first) {
		t.Fatal("the first body must win")
	}
}

// TestConcurrentRedeliveries: 32 senders post the
// same 500 signed events 4 times each, shuffled, through a real HTTP server.
func TestConcurrentRedeliveries(t *testing.T) {
	t.Parallel()
	f := setup(t)
	srv := httptest.NewServer(f.handler)
	defer srv.Close()

	const events, copies, workers = 500, 4, 32
	type job struct {
		body []byte
		sig  http.Header
	}
	src, _ := f.sources.Lookup("stripe")
	var jobs []job
	for i := range events {
		sr, err := sender.Sign(src, stripeEvent(t, fmt.Sprintf("evt_conc_%04d", i)), "", now)
		if err != nil {
			t.Fatal(err)
		}
		for range copies {
			jobs = append(jobs, job{sr.Body, sr.Header})
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })

	var accepted, duplicate, other atomic.Int64
	ch := make(chan job)
	var wg sync.WaitGroup
	client := srv.Client()
	for range workers {
		wg.Go(func() {
			for j := range ch {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/stripe", bytes.NewReader(j.body))
				req.Header = j.sig.Clone()
				resp, err := client.Do(req)
				if err != nil {
					other.Add(1)
					t.Error(err)
					continue
				}
				var a answer
				_ = json.NewDecoder(resp.Body).Decode(&a)
				resp.Body.Close()
				switch {
				case resp.StatusCode == 200 && a.Status == "accepted":
					accepted.Add(1)
				case resp.StatusCode == 200 && a.Status == "duplicate":
					duplicate.Add(1)
				default:
					other.Add(1)
					t.Errorf("unexpected answer %d %+v", resp.StatusCode, a)
				}
			}
		})
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	if accepted.Load() != events || duplicate.Load() != events*(copies-1) || other.Load() != 0 {
		t.Fatalf("accepted=%d duplicate=%d other=%d", accepted.Load(), duplicate.Load(), other.Load())
	}
	if n := f.count(); n != events {
		t.Fatalf("rows = %d, want %d", n, events)
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := stripeEvent(t, "evt_refused")
	tests := []struct {
		name   string
		req    func() *http.Request
		status int
		cause  inbox.Cause
	}{
		// A GET is only ever a handshake: to a kind without one, the one
		// unauthenticated answer (handshake_test.go).
		{"GET", func() *http.Request { return httptest.NewRequest("GET", "/webhooks/stripe", nil) }, 401, inbox.CauseUnauthenticated},
		{"PUT", func() *http.Request { r := f.signed("stripe", body, ""); r.Method = "PUT"; return r }, 405, inbox.CauseMethodNotAllowed},
		{"unknown source", func() *http.Request { return httptest.NewRequest("POST", "/webhooks/paypal", bytes.NewReader(body)) }, 401, inbox.CauseUnauthenticated},
		{"other path", func() *http.Request { return httptest.NewRequest("POST", "/hooks/stripe", nil) }, 404, inbox.CauseNotFound},
		{"nested path", func() *http.Request { return httptest.NewRequest("POST", "/webhooks/stripe/x/y", nil) }, 404, inbox.CauseNotFound},
		{"token path of a source without one", func() *http.Request { return httptest.NewRequest("POST", "/webhooks/stripe/x", nil) }, 401, inbox.CauseUnauthenticated},
		{"no signature", func() *http.Request { return httptest.NewRequest("POST", "/webhooks/stripe", bytes.NewReader(body)) }, 401, inbox.CauseUnauthenticated},
		{"tampered body", func() *http.Request {
			r := f.signed("stripe", body, "")
			r.Body = io.NopCloser(bytes.NewReader(bytes.Replace(body, []byte("2000"), []byte("2001"), 1)))
			return r
		}, 401, inbox.CauseUnauthenticated},
		{"replayed later", func() *http.Request {
			src, _ := f.sources.Lookup("stripe")
			sr, _ := sender.Sign(src, body, "", now.Add(-time.Hour))
			r := httptest.NewRequest("POST", "/webhooks/stripe", bytes.NewReader(body))
			r.Header = sr.Header
			return r
		}, 401, inbox.CauseUnauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := f.do(tt.req())
			field.Must(t, "answer", field.Printed("Code", a.Code, tt.status), field.Printed("Cause", a.Cause, tt.cause), field.Printed("Status", a.Status, "rejected"),
				field.Printed("Message given", a.Message != "", true))
			if tt.status == 405 && a.Header.Get("Allow") != "GET, POST" {
				t.Fatalf("Allow = %q", a.Header.Get("Allow"))
			}
		})
	}
	if n := f.count(); n != 0 {
		t.Fatalf("refused requests stored %d rows", n)
	}
}

// TestHostileInput signs every hostile body correctly, so it reaches the
// parsing and storing code: nothing may panic or answer 5xx, and whatever
// is accepted must read back byte for byte.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	f := setupOn(t, pgtest.Pool(t), receiver.Config{MaxBodyBytes: 64 << 10}, receiver.Deps{})
	nested := func(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }
	tests := []struct {
		name   string
		body   string
		status int
		cause  inbox.Cause
		noJSON bool // accepted, but JSONB cannot hold it: payload NULL
	}{
		{"oversize", `{"id":"evt_big","pad":"` + strings.Repeat("x", 70<<10) + `"}`, 413, inbox.CausePayloadTooLarge, false},
		{"empty body", ``, 400, inbox.CauseUnparsableBody, false},
		{"invalid JSON", `{"id":"evt_bad",`, 400, inbox.CauseUnparsableBody, false},
		{"missing id", `{"type":"invoice.paid"}`, 400, inbox.CauseMissingEventID, false},
		{"id of 10 000 characters", `{"id":"` + strings.Repeat("x", 10000) + `"}`, 400, inbox.CauseMissingEventID, false},
		{"SQL in the id", `{"id":"evt_1'); DROP TABLE webhook_events; --","type":"x' OR '1'='1"}`, 200, "", false},
		{"SQL in the body", `{"id":"evt_sql_body","data":"'; DELETE FROM webhook_events; --"}`, 200, "", false},
		{"non-UTF-8 bytes in a string", "{\"id\":\"evt_latin1\",\"name\":\"caf\xe9\"}", 200, "", true},
		{"non-UTF-8 bytes in the id", "{\"id\":\"evt_\xff\"}", 400, inbox.CauseUnparsableBody, false},
		{"NUL escape inside a string", `{"id":"evt_nul","note":"a\u0000b"}`, 200, "", true},
		{"lone surrogate", `{"id":"evt_surrogate","note":"\ud800"}`, 200, "", true},
		{"number JSONB cannot hold", `{"id":"evt_hugenum","n":1e1000000}`, 200, "", true},
		{"nesting 9 000 deep", `{"id":"evt_deep","d":` + nested(9000) + `}`, 200, "", false},
		{"nesting past the JSON parser's limit", `{"id":"evt_deeper","d":` + nested(20000) + `}`, 400, inbox.CauseUnparsableBody, false},
		{"duplicate keys", `{"id":"evt_dupkeys","a":1,"a":2}`, 200, "", false},
		{"control characters", "{\"id\":\"evt_ctl\",\"s\":\"\x01\"}", 400, inbox.CauseUnparsableBody, false},
		// Terminal escapes aimed at the operator's screen (issue 14): an
		// ESC, a C1 CSI and an OSC 52 clipboard write in the id or type
		// are refused at receipt; in the body they are only data.
		{"ESC sequence in the id", `{"id":"evt_\u001b[2J","type":"x"}`, 400, inbox.CauseMissingEventID, false},
		{"C1 CSI in the id", `{"id":"evt_\u009b2J","type":"x"}`, 400, inbox.CauseMissingEventID, false},
		{"OSC 52 in the type", `{"id":"evt_osc","type":"x\u001b]52;c;aGk=\u0007"}`, 400, inbox.CauseInvalidEventType, false},
		{"C1 OSC in the type", `{"id":"evt_c1osc","type":"x\u009d52;c;aGk=\u009c"}`, 400, inbox.CauseInvalidEventType, false},
		{"bidi override in the id", `{"id":"evt_\u202egnp.exe","type":"x"}`, 200, "", false},
		{"escapes in the body only", `{"id":"evt_esc_body","note":"\u001b]52;c;aGk=\u0007\u009b"}`, 200, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := f.do(f.signed("stripe", []byte(tt.body), ""))
			if a.Code >= 500 {
				t.Fatalf("5xx for hostile input: %+v", a)
			}
			if a.Code != tt.status || a.Cause != tt.cause {
				t.Fatalf("got %d %+v, want %d %q", a.Code, a, tt.status, tt.cause)
			}
			if tt.status != 200 {
				return
			}
			if a.Status != "accepted" {
				t.Fatalf("want accepted, got %+v", a)
			}
			ev, err := f.store.EventGetByID(context.Background(), a.ID)
			if err != nil {
				t.Fatal(err)
			}
			stored, payloadNull := ev.Body, ev.Payload == nil
			if !bytes.Equal(stored, []byte(tt.body)) {
				t.Fatalf("stored body differs from the one sent")
			}
			if payloadNull != tt.noJSON {
				t.Fatalf("payload IS NULL = %v, want %v", payloadNull, tt.noJSON)
			}
			// A redelivery of the hostile body is still a plain duplicate.
			if d := f.do(f.signed("stripe", []byte(tt.body), "")); d.Code != 200 || d.Status != "duplicate" {
				t.Fatalf("redelivery: %+v", d)
			}
		})
	}
	t.Run("chunked body without Content-Length over the limit", func(t *testing.T) {
		t.Parallel()
		body := []byte(`{"id":"evt_chunked","pad":"` + strings.Repeat("y", 70<<10) + `"}`)
		r := f.signed("stripe", body, "")
		r.ContentLength = -1
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body))) // hides the length
		if a := f.do(r); a.Code != 413 || a.Cause != inbox.CausePayloadTooLarge {
			t.Fatalf("got %+v", a)
		}
	})
}

// TestDatabaseOutage kills the database under load: every answer is 200 or
// 503, every 200 "accepted" is in the table after the restart, and once the
// server is back the requests that got 503 succeed when the sender retries.
func TestDatabaseOutage(t *testing.T) {
	tier.Heavy(t, "a database outage")
	t.Parallel()
	cluster := pgtest.Cluster(t)
	url := pgtest.MigratedURL(t, cluster)
	ctx := context.Background()
	pool, err := storage.PoolConfig{URL: url, MaxConns: 8, ConnectTimeout: time.Second}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	f := setupOn(t, pool, receiver.Config{StoreTimeout: 2 * time.Second}, receiver.Deps{})

	type result struct {
		id     string
		code   int
		status string
	}
	var (
		mu       sync.Mutex
		results  []result
		next     atomic.Int64
		accepted atomic.Int64
		refused  atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := next.Add(1)
				if n > 20000 { // a bound, whatever happens
					return
				}
				id := fmt.Sprintf("evt_outage_%05d", n)
				a := f.do(f.signed("stripe", stripeEvent(t, id), ""))
				mu.Lock()
				results = append(results, result{id, a.Code, a.Status})
				mu.Unlock()
				switch a.Code {
				case 200:
					accepted.Add(1)
				case 503:
					refused.Add(1)
					if a.Cause != inbox.CauseDatabaseUnavailable || a.Header.Get("Retry-After") == "" {
						t.Errorf("503 without the database_unavailable cause: %+v", a)
					}
				}
			}
		})
	}
	// The senders stop however the test ends.
	var stopOnce sync.Once
	stopSenders := func() { stopOnce.Do(func() { close(stop); wg.Wait() }) }
	t.Cleanup(stopSenders)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		poll.Until(t, 60*time.Second, func() (bool, string) { return cond(), "waiting for " + what })
	}
	waitFor("accepted events before the outage", func() bool { return accepted.Load() >= 50 })
	if err := cluster.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor("503s during the outage", func() bool { return refused.Load() >= 20 })
	if err := cluster.Start(ctx); err != nil {
		t.Fatal(err)
	}
	before := accepted.Load()
	waitFor("accepted events after the restart", func() bool { return accepted.Load() >= before+50 })
	stopSenders()

	var retry []string
	for _, r := range results {
		switch {
		case r.code == 200 && r.status == "accepted":
			if _, err := f.store.EventGetByKey(ctx, "stripe", r.id); err != nil {
				t.Errorf("%s was answered accepted but is not stored: %v", r.id, err)
			}
		case r.code == 503:
			retry = append(retry, r.id)
		default:
			t.Errorf("%s: unexpected answer %d %s", r.id, r.code, r.status)
		}
	}
	// The sender retries what got 503: each is now accepted, or a duplicate
	// when its commit landed but the answer was lost with the connection.
	for _, id := range retry {
		a := f.do(f.signed("stripe", stripeEvent(t, id), ""))
		if a.Code != 200 {
			t.Errorf("retry of %s after the restart: %+v", id, a)
		}
	}
	if n := f.count(); n != len(results) {
		t.Fatalf("rows = %d, want one per distinct event sent (%d)", n, len(results))
	}
	t.Logf("requests=%d accepted=%d 503=%d", len(results), accepted.Load(), refused.Load())
}

// Every refusal a verifier can give maps to its status:
// 401 for anything about the source, its endpoint token, the signature or
// its timestamp (answered as one, unauthenticated), 400 for a body or
// identity that can never be stored, and only an unavailable database is
// a 5xx (503, so that senders retry).
func TestStatusOfEveryCause(t *testing.T) {
	t.Parallel()
	want := map[inbox.Cause]int{
		inbox.CauseSignatureMissing: 401, inbox.CauseSignatureMalformed: 401, inbox.CauseSignatureMismatch: 401,
		inbox.CauseTimestampOutOfTolerance: 401,
		inbox.CauseUnparsableBody:          400, inbox.CauseMissingEventID: 400, inbox.CauseInvalidEventType: 400,
		inbox.CauseUnreadableBody: 400, inbox.CauseInvalidEvent: 400, inbox.CauseInvalidRequest: 400,
		inbox.CauseUnknownSource: 401, inbox.CauseEndpointTokenMismatch: 401, inbox.CauseUnauthenticated: 401,
		inbox.CauseNotFound: 404, inbox.CauseMethodNotAllowed: 405,
		inbox.CausePayloadTooLarge: 413, inbox.CauseDatabaseUnavailable: 503,
		// A cause the table does not know is a bug: 503, so the sender
		// retries and nothing is lost.
		inbox.CauseInternal: 503,
	}
	for cause, status := range want {
		if got := receiver.StatusOf(cause); got != status {
			t.Errorf("StatusOf(%s) = %d, want %d", cause, got, status)
		}
	}
}

// TestStoreWaitsForTheDatabase: a database that refuses connections for a
// moment (restarting, failing over, or resuming from a pause, as the
// economy profile's does) delays the answer instead of failing it: the
// receiver dials again within its store timeout, stores the event and
// answers 200. Past the timeout it answers 503, as before.
func TestStoreWaitsForTheDatabase(t *testing.T) {
	tier.Heavy(t, "a database restart")
	t.Parallel()
	cluster := pgtest.Cluster(t)
	url := pgtest.MigratedURL(t, cluster)
	ctx := context.Background()
	pool, err := storage.PoolConfig{URL: url, MaxConns: 2, ConnectTimeout: time.Second}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	f := setupOn(t, pool, receiver.Config{StoreTimeout: 20 * time.Second}, receiver.Deps{})
	if err := cluster.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	pool.Reset() // no connection survives the restart
	done := make(chan answer, 1)
	start := time.Now()
	go func() { done <- f.do(f.signed("stripe", stripeEvent(t, "evt_waited"), "")) }()
	time.Sleep(time.Second) // the request is retrying its dial
	if err := cluster.Start(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.Code != 200 || a.Status != receiver.StatusAccepted {
		t.Fatalf("answer after the database came back: %+v", a)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("answered in %s, before the database was back", took)
	}
	if _, err := f.store.EventGetByKey(ctx, "stripe", "evt_waited"); err != nil {
		t.Fatal(err)
	}

	// Down for longer than the store timeout: 503, within about it.
	short := setupOn(t, pool, receiver.Config{StoreTimeout: 2 * time.Second}, receiver.Deps{})
	if err := cluster.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	pool.Reset()
	start = time.Now()
	b := short.do(short.signed("stripe", stripeEvent(t, "evt_refused"), ""))
	if b.Code != 503 || b.Cause != inbox.CauseDatabaseUnavailable {
		t.Fatalf("answer with the database down: %+v", b)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the 503 took %s, beyond the 2 s store timeout", took)
	}
	if err := cluster.Start(ctx); err != nil {
		t.Fatal(err)
	}
}
