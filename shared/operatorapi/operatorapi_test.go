package operatorapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// principalHeader carries, in these tests only, the principal the
// verifier in front of the handler established (in AWS, Lambda's IAM
// authorizer; locally, iamlocal): a request without it has none.
const principalHeader = "X-Test-Principal"

const alice = "arn:aws:sts::123456789012:assumed-role/WebhookInboxOperator/alice"

// fixture is the API over a database of its own, read-only and acting.
type fixture struct {
	t     *testing.T
	store *storage.Store
	read  *httptest.Server
	act   *httptest.Server
}

func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, store: storage.New(pgtest.Pool(t))}
	serve := func(access operations.Access) *httptest.Server {
		svc, err := operations.New(operations.Config{Access: access}, operations.Deps{Store: f.store})
		if err != nil {
			t.Fatal(err)
		}
		h, err := operatorapi.New(operatorapi.Deps{API: svc, Caller: func(r *http.Request) (operatorapi.Caller, bool) {
			arn := r.Header.Get(principalHeader)
			return operatorapi.Caller{UserARN: arn, UserID: "AROAEXAMPLE:alice", AccountID: "123456789012"}, arn != ""
		}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv
	}
	f.read, f.act = serve(operations.AccessRead), serve(operations.AccessAct)
	return f
}

// do sends a request as principal ("" for none) and returns the status,
// the headers and the body.
func (f *fixture) do(srv *httptest.Server, method, path, principal, contentType string, body []byte) (int, http.Header, []byte) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), method, srv.URL+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if principal != "" {
		req.Header.Set(principalHeader, principal)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func (f *fixture) get(srv *httptest.Server, path string) (int, []byte) {
	status, _, b := f.do(srv, http.MethodGet, path, alice, "", nil)
	return status, b
}

func (f *fixture) post(srv *httptest.Server, path string, v any) (int, []byte) {
	b, _ := json.Marshal(v)
	status, _, out := f.do(srv, http.MethodPost, path, alice, "application/json", b)
	return status, out
}

// refused checks an answer is the error table's: the status, the cause,
// a message, JSON.
func refused(t *testing.T, status int, body []byte, wantStatus int, wantCause inbox.Cause) {
	t.Helper()
	var e operatorapi.ErrorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("answer %d is not the error's JSON (%v): %s", status, err, body)
	}
	field.Must(t, "refusal", field.Printed("status", status, wantStatus), field.Printed("cause", e.Error.Cause, wantCause), field.Printed("message given", e.Error.Message != "", true))
}

// Nothing is served without a verified principal: not a read, not an
// action, not even whether a route exists.
func TestEveryRequestNeedsAVerifiedPrincipal(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/whoami"}, {"GET", "/v1/stats"}, {"GET", "/v1/events"}, {"GET", "/v1/event?id=1"}, {"GET", "/v1/event/body?id=1"},
		{"POST", "/v1/requeue"}, {"POST", "/v1/replay"}, {"POST", "/v1/expunge"}, {"POST", "/v1/archive-run"},
		{"GET", "/v1/nothing"}, {"DELETE", "/"}, {"OPTIONS", "/v1/events"},
	} {
		status, h, body := f.do(f.act, r.method, r.path, "", "application/json", []byte(`{}`))
		refused(t, status, body, http.StatusUnauthorized, inbox.CauseUnauthenticated)
		if h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s %s answers CORS", r.method, r.path)
		}
	}
}

func TestRoutesAndMethods(t *testing.T) {
	t.Parallel()
	f := setup(t)
	status, body := f.get(f.act, "/v1/nothing")
	refused(t, status, body, http.StatusNotFound, inbox.CauseNotFound)
	status, body = f.get(f.act, "/v1/stats/")
	refused(t, status, body, http.StatusNotFound, inbox.CauseNotFound)
	status, h, body := f.do(f.act, http.MethodGet, "/v1/requeue", alice, "", nil)
	refused(t, status, body, http.StatusMethodNotAllowed, inbox.CauseMethodNotAllowed)
	if h.Get("Allow") != http.MethodPost {
		t.Errorf("Allow = %q", h.Get("Allow"))
	}
	status, _, body = f.do(f.act, http.MethodPost, "/v1/stats", alice, "application/json", []byte(`{}`))
	refused(t, status, body, http.StatusMethodNotAllowed, inbox.CauseMethodNotAllowed)
}

// Every read answers JSON of its operations type, through the same query
// keys the client and the console write.
func TestReads(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	e := factory.Event(ctx, t, f.store, &factory.EventOpts{Source: "github", EventID: "d-1", State: inbox.StateDead})
	factory.Rejection(ctx, t, f.store, &factory.RejectionOpts{Source: "stripe", Cause: inbox.CauseSignatureMismatch})
	check := func(path string, v any) {
		t.Helper()
		status, body := f.get(f.read, path)
		if status != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, status, body)
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, body)
		}
	}
	var id operations.Identity
	check("/v1/whoami", &id)
	if id.Operator != alice || !id.Verified || id.Access != operations.AccessRead {
		t.Errorf("whoami = %+v", id)
	}
	var st operations.Stats
	check("/v1/stats?"+operatorapi.StatsValues(operations.StatsQuery{Window: operations.Span(3600e9), Charts: true, Storage: true}).Encode(), &st)
	field.Must(t, "stats", field.Printed("DeadLettersOpen", st.DeadLettersOpen, 1), field.Printed("Charts given", st.Charts != nil, true),
		field.Printed("Bloat given", st.Bloat != nil, true), field.Printed("Window", st.Window, "1h"))
	var ref operations.Refusals
	check("/v1/refusals?window=1d&limit=5", &ref)
	if ref.Total != 1 {
		t.Errorf("refusals = %+v", ref)
	}
	var page operations.EventPage
	check("/v1/events?"+operatorapi.EventsValues(operations.EventQuery{Source: "github", State: "dead", Window: operations.Window{Since: operations.Span(3600e9)}}).Encode(), &page)
	if len(page.Events) != 1 || page.Events[0].ID != e.ID {
		t.Errorf("events = %+v", page)
	}
	check("/v1/events/find?find=d-1", &page)
	if len(page.Events) != 1 {
		t.Errorf("find = %+v", page)
	}
	var d operations.EventDetail
	check("/v1/event?source=github&event_id=d-1", &d)
	if d.Event.ID != e.ID || len(d.DeadLetters) != 1 {
		t.Errorf("event = %+v", d)
	}
	var dls operations.DeadLetterPage
	check("/v1/dead-letters?source=github&since=1h", &dls)
	if len(dls.DeadLetters) != 1 {
		t.Errorf("dead letters = %+v", dls)
	}
	var acts operations.ActionPage
	check("/v1/actions?since=7d&limit=10", &acts)
	qid := factory.Quarantined(ctx, t, f.store, &factory.QuarantinedOpts{Source: "github", Kind: "github", Body: []byte(`{"forged":true}`)})
	var qp operations.QuarantinePage
	check("/v1/quarantine?"+operatorapi.QuarantineValues(operations.QuarantineQuery{Source: "github", Window: operations.Window{Since: operations.Span(3600e9)}}).Encode(), &qp)
	if len(qp.Deliveries) != 1 || qp.Deliveries[0].ID != qid {
		t.Errorf("quarantine = %+v", qp)
	}
	var qd operations.QuarantinedDetail
	check("/v1/quarantine/delivery?"+operatorapi.QuarantinedValues(qid).Encode(), &qd)
	if string(qd.Body) != `{"forged":true}` {
		t.Errorf("quarantined delivery = %+v", qd)
	}
	status, body := f.get(f.read, "/v1/quarantine/delivery?id=0")
	refused(t, status, body, http.StatusBadRequest, inbox.CauseInvalidArgument)
}

// A read's query is checked before anything runs: a key the route does
// not take, a key given twice, a value out of range, a query too long.
func TestReadsRefuseBadQueries(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, path := range []string{
		"/v1/events?color=red", "/v1/events?limit=1&limit=2", "/v1/events?limit=100000", "/v1/events?state=sleeping",
		"/v1/events?since=soon", "/v1/events?from=2026-12-02&to=2026-12-01", "/v1/events?before=-3", "/v1/stats?charts=maybe",
		"/v1/event?id=abc", "/v1/event", "/v1/event/body", "/v1/event/body?id=1&offset=x", "/v1/whoami?x=1",
		"/v1/events?source=" + strings.Repeat("a", 300),
	} {
		status, body := f.get(f.read, path)
		refused(t, status, body, http.StatusBadRequest, inbox.CauseInvalidArgument)
	}
	status, body := f.get(f.read, "/v1/events?source="+strings.Repeat("a", operatorapi.MaxQueryBytes))
	refused(t, status, body, http.StatusBadRequest, inbox.CauseInvalidRequest)
	status, body = f.get(f.read, "/v1/event?id=999999")
	refused(t, status, body, http.StatusNotFound, inbox.CauseEventNotFound)
}

// An action's body is one JSON object of its request, bounded, with no
// unknown field; anything else is refused with a cause, and nothing runs.
func TestActionsRefuseBadBodies(t *testing.T) {
	t.Parallel()
	f := setup(t)
	factory.Event(t.Context(), t, f.store, &factory.EventOpts{Source: "shop", State: inbox.StateDead})
	for name, c := range map[string]struct {
		contentType string
		body        string
		status      int
		cause       inbox.Cause
	}{
		"not JSON":          {"application/json", `select=shop`, 400, inbox.CauseUnparsableBody},
		"an unknown field":  {"application/json", `{"select":{"source":"shop"},"force":true}`, 400, inbox.CauseUnparsableBody},
		"two values":        {"application/json", `{"select":{"source":"shop"}} {}`, 400, inbox.CauseUnparsableBody},
		"another type":      {"text/plain", `{"select":{"source":"shop"}}`, 400, inbox.CauseInvalidRequest},
		"too large":         {"application/json", `{"reason":"` + strings.Repeat("x", operatorapi.MaxRequestBytes) + `"}`, 413, inbox.CausePayloadTooLarge},
		"an empty selector": {"application/json", `{"select":{}}`, 400, inbox.CauseInvalidArgument},
		"a reason too long": {"application/json", `{"select":{"source":"shop"},"reason":"` + strings.Repeat("x", 3000) + `"}`, 400, inbox.CauseInvalidArgument},
	} {
		status, _, body := f.do(f.act, http.MethodPost, "/v1/requeue", alice, c.contentType, []byte(c.body))
		if status != c.status || !strings.Contains(string(body), string(c.cause)) {
			t.Errorf("%s: %d %s, want %d %s", name, status, body, c.status, c.cause)
		}
	}
	// Nothing was requeued.
	if status, body := f.post(f.act, "/v1/requeue", operations.RequeueRequest{Select: operations.DeadLetterSelection{Source: "shop"}, DryRun: true}); status != 200 || !strings.Contains(string(body), `"events":1`) {
		t.Fatalf("after the refusals: %d %s", status, body)
	}
}

// The read-only API counts what an action would do, and refuses to do it;
// the acting one does it and records the verified principal, never a name
// the client sends.
func TestReadOnlyRefusesAndActingRecordsThePrincipal(t *testing.T) {
	t.Parallel()
	f := setup(t)
	factory.Events(t.Context(), t, f.store, 2, &factory.EventOpts{Source: "shop", State: inbox.StateDead})
	req := operations.RequeueRequest{Select: operations.DeadLetterSelection{Source: "shop"}, Reason: "INC-9"}
	status, body := f.post(f.read, "/v1/requeue", req)
	refused(t, status, body, http.StatusForbidden, inbox.CauseReadOnly)
	dry := req
	dry.DryRun = true
	if status, body := f.post(f.read, "/v1/requeue", dry); status != 200 || !strings.Contains(string(body), `"events":2`) {
		t.Fatalf("dry run on the read-only API = %d %s", status, body)
	}
	req.Expect = new(5)
	status, body = f.post(f.act, "/v1/requeue", req)
	refused(t, status, body, http.StatusConflict, inbox.CauseCountChanged)
	req.Expect = new(2)
	if status, body := f.post(f.act, "/v1/requeue", req); status != 200 || !strings.Contains(string(body), `"events":2`) {
		t.Fatalf("requeue = %d %s", status, body)
	}
	_, acts := f.get(f.read, "/v1/actions")
	var page operations.ActionPage
	if err := json.Unmarshal(acts, &page); err != nil {
		t.Fatalf("actions: %v: %s", err, acts)
	}
	field.Must(t, "actions", field.Printed("len(Actions)", len(page.Actions), 1))
	if page.Actions[0].Reason == nil {
		t.Fatal("the action has no reason")
	}
	field.Must(t, "action", field.Printed("Actor", page.Actions[0].Actor, alice), field.Printed("Reason", *page.Actions[0].Reason, "INC-9"))
}

// A principal whose ARN is longer than a record holds is recorded by its
// unique id.
func TestALongPrincipalIsRecordedByItsID(t *testing.T) {
	t.Parallel()
	c := operatorapi.Caller{UserARN: "arn:aws:iam::123456789012:user/" + strings.Repeat("team/", 60) + "alice", UserID: "AIDAEXAMPLE"}
	if c.Name() != "aws-principal:AIDAEXAMPLE" {
		t.Fatalf("name = %q", c.Name())
	}
	if short := (operatorapi.Caller{UserARN: alice}); short.Name() != alice {
		t.Fatalf("name = %q", short.Name())
	}
}

// A body comes in chunks of at most BodyChunk bytes, each with the body's
// size, origin and hash; an offset past the end is refused.
func TestBodyInChunks(t *testing.T) {
	t.Parallel()
	f := setup(t)
	raw := bytes.Repeat([]byte("0123456789abcdef"), (operatorapi.BodyChunk+1000)/16)
	e := factory.Event(t.Context(), t, f.store, &factory.EventOpts{Body: raw})
	var got []byte
	for offset := 0; ; {
		status, h, chunk := f.do(f.read, http.MethodGet, "/v1/event/body?id="+strconv.FormatInt(e.ID, 10)+"&offset="+strconv.Itoa(offset), alice, "", nil)
		field.Must(t, fmt.Sprintf("chunk at %d", offset), field.Printed("status", status, 200), field.Printed("Content-Type", h.Get("Content-Type"), "application/octet-stream"),
			field.Printed(operatorapi.HeaderBodySize, h.Get(operatorapi.HeaderBodySize), strconv.Itoa(len(raw))),
			field.Printed(operatorapi.HeaderBodyFrom, h.Get(operatorapi.HeaderBodyFrom), "postgres"),
			field.Printed(operatorapi.HeaderBodySHA256+" given", h.Get(operatorapi.HeaderBodySHA256) != "", true),
			field.Printed("within BodyChunk", len(chunk) <= operatorapi.BodyChunk, true))
		got = append(got, chunk...)
		offset += len(chunk)
		if offset == len(raw) {
			break
		}
	}
	if !bytes.Equal(got, raw) {
		t.Fatal("the chunks do not make the body")
	}
	status, body := f.get(f.read, "/v1/event/body?id="+strconv.FormatInt(e.ID, 10)+"&offset="+strconv.Itoa(len(raw)+1))
	refused(t, status, body, http.StatusBadRequest, inbox.CauseInvalidArgument)
}

// The table: every cause the API answers has its status, and a cause it
// does not know is a 500.
func TestStatusOf(t *testing.T) {
	t.Parallel()
	for c, want := range map[inbox.Cause]int{
		inbox.CauseInvalidArgument: 400, inbox.CauseUnauthenticated: 401, inbox.CauseReadOnly: 403, inbox.CauseForbidden: 403,
		inbox.CauseEventNotFound: 404, inbox.CauseCountChanged: 409, inbox.CauseEventExpunged: 410, inbox.CauseBodyExpired: 410, inbox.CausePayloadTooLarge: 413,
		inbox.CauseInternal: 500, inbox.CauseArchiveStoreFailed: 502, inbox.CauseDatabaseUnavailable: 503, inbox.CauseArchiveNotConfigured: 503,
		inbox.CauseQuarantineNotFound: 404, inbox.CauseSourcesNotConfigured: 503,
		inbox.Cause("made_up"): 500,
	} {
		if got := operatorapi.StatusOf(inbox.Errorf(c, "x")); got != want {
			t.Errorf("StatusOf(%s) = %d, want %d", c, got, want)
		}
	}
	if got := operatorapi.StatusOf(io.EOF); got != 500 {
		t.Errorf("an error without a cause = %d", got)
	}
}
