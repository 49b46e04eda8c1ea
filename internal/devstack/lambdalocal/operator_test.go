package lambdalocal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/iamlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/internal/operatorclient"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
)

// checkOperatorAPI drives the operator function's two deployments under
// the emulator through their function URLs, as webhookctl --stack does:
// reads and an archived body, an action recorded under the verified
// principal and the acting function's database role, a read-only
// identity refused at the acting URL by IAM and at the read-only URL by
// the function itself, a request without IAM context, an oversized and
// a malformed one, each refused with its cause. stored is how many events
// the stack holds, all processed and archived.
func checkOperatorAPI(t *testing.T, ctx context.Context, stack *lambdalocal.Stack, operator, viewer iamlocal.Identity, stored int) {
	t.Helper()
	readSrv := httptest.NewServer(stack.URLs["OperatorReadFunction"])
	defer readSrv.Close()
	actSrv := httptest.NewServer(stack.URLs["OperatorFunction"])
	defer actSrv.Close()
	signed := func(id iamlocal.Identity) *http.Client {
		tr, err := operatorclient.NewTransport(credentials.NewStaticCredentialsProvider(id.AccessKeyID, id.SecretAccessKey, id.SessionToken), "us-east-1", nil)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Client{Transport: tr}
	}
	client := func(id iamlocal.Identity, read, act string) *operatorclient.Client {
		c, err := operatorclient.New(operatorclient.Config{ReadURL: read, ActURL: act, HTTP: signed(id)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	op := client(operator, readSrv.URL, actSrv.URL)

	who, err := op.Whoami(ctx)
	if err != nil {
		t.Fatalf("whoami: %v", err)
	}
	if !field.Check(t, "whoami",
		field.Eq("Operator", who.Operator, operator.UserARN),
		field.Eq("Verified", who.Verified, true),
		field.Eq("Access", who.Access, operations.AccessAct),
		field.Eq("DatabaseRole", who.DatabaseRole, "webhook_operator_read"),
	) {
		t.FailNow()
	}
	st, err := op.Stats(ctx, operations.StatsQuery{Charts: true, Storage: true})
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	if !field.Check(t, "stats",
		field.Eq("Backlog.Unprocessed", st.Backlog.Unprocessed, 0),
		field.Eq("Archive.ArchivedEvents", st.Archive.ArchivedEvents, int64(stored)),
		field.Is("Charts", st.Charts, st.Charts != nil, "set"),
		field.Is("Tables", len(st.Tables), len(st.Tables) != 0, "some"),
	) {
		t.FailNow()
	}
	page, err := op.Events(ctx, operations.EventQuery{Source: "github", State: string(inbox.StateArchived)})
	if err != nil || len(page.Events) == 0 {
		t.Fatalf("events = %+v, %v", page, err)
	}
	e := page.Events[0]
	body, err := op.EventBody(ctx, e.ID)
	if err != nil || body.From != operations.BodyFromArchive || len(body.Bytes) != e.BodySize {
		t.Fatalf("the archived body of %d: %+v, %v", e.ID, body, err)
	}

	// An action: counted by the read-only function, done by the acting
	// one, recorded under the verified principal and the acting role.
	sel := operations.ReplaySelection{ID: e.ID}
	dry, err := op.Replay(ctx, operations.ReplayRequest{Select: sel, DryRun: true})
	if err != nil || dry.Matched != 1 || dry.Archived != 1 {
		t.Fatalf("replay dry run = %+v, %v", dry, err)
	}
	res, err := op.Replay(ctx, operations.ReplayRequest{Select: sel, Expect: &dry.Matched, Reason: "e2e"})
	if err != nil || res.Replayed != 1 {
		t.Fatalf("replay = %+v, %v", res, err)
	}
	acts, err := op.Actions(ctx, operations.ActionQuery{})
	if err != nil || len(acts.Actions) != 1 {
		t.Fatalf("actions = %+v, %v; want one", acts, err)
	}
	if !field.Check(t, "action",
		field.Eq("Actor", acts.Actions[0].Actor, operator.UserARN),
		field.Eq("DBUser", acts.Actions[0].DBUser, "webhook_operator"),
	) {
		t.FailNow()
	}

	// The viewer: IAM refuses it at the acting URL; the read-only
	// function refuses its action itself.
	v := client(viewer, readSrv.URL, actSrv.URL)
	if who, err := v.Whoami(ctx); err != nil || who.Access != operations.AccessRead || who.Operator != viewer.UserARN {
		t.Fatalf("the viewer's whoami = %+v, %v", who, err)
	}
	if _, err := v.Requeue(ctx, operations.RequeueRequest{Select: operations.DeadLetterSelection{All: true}}); inbox.CauseOf(err) != inbox.CauseForbidden {
		t.Fatalf("the viewer's requeue at the acting URL: %v", err)
	}
	atRead := client(viewer, readSrv.URL, readSrv.URL)
	if _, err := atRead.Replay(ctx, operations.ReplayRequest{Select: sel}); inbox.CauseOf(err) != inbox.CauseReadOnly {
		t.Fatalf("an action at the read-only function: %v", err)
	}

	// A request without IAM context (a direct invocation, which the
	// stack's policies never grant) is refused by the function.
	req := httptest.NewRequest(http.MethodGet, "/v1/whoami", nil)
	ev := lambdalocal.NewFunctionURLEvent(req, nil, lambdalocal.FunctionURLDomain("OperatorFunction", "us-east-1"), nil, time.Now())
	payload, _ := json.Marshal(ev)
	out, err := stack.Functions["OperatorFunction"].Invoke(ctx, payload)
	var resp events.LambdaFunctionURLResponse
	if err != nil || json.Unmarshal(out, &resp) != nil || resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Body, string(inbox.CauseUnauthenticated)) {
		t.Fatalf("a request without IAM context: %s, %v", out, err)
	}

	// An oversized body (Lambda's own refusal) and a malformed one (the
	// function's), both signed.
	post := func(body []byte) (int, string) {
		t.Helper()
		r, _ := http.NewRequestWithContext(ctx, http.MethodPost, actSrv.URL+"/v1/requeue", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Transport: rawSigner(t, operator)}).Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, body := post(bytes.Repeat([]byte("x"), 7<<20)); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 7 MB request: %d %s", code, body)
	}
	if code, body := post([]byte(`{"select": "everything"}`)); code != http.StatusBadRequest || !strings.Contains(body, string(inbox.CauseUnparsableBody)) {
		t.Fatalf("a malformed request: %d %s", code, body)
	}
	var e2 operatorapi.ErrorBody
	if code, body := post([]byte(`{"select":{"all":true},"force":1}`)); code != http.StatusBadRequest || json.Unmarshal([]byte(body), &e2) != nil || e2.Error.Cause != inbox.CauseUnparsableBody {
		t.Fatalf("an unknown field: %d %s", code, body)
	}
}

// rawSigner signs like the client's transport but sends any body, even
// one over the client's own limit: what a hand-made request could send.
func rawSigner(t *testing.T, id iamlocal.Identity) http.RoundTripper {
	t.Helper()
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		var body []byte
		if r.Body != nil {
			var b bytes.Buffer
			_, _ = b.ReadFrom(r.Body)
			body = b.Bytes()
		}
		if len(body) <= operatorclient.MaxBodyBytes {
			r.Body = http.NoBody
			if len(body) > 0 {
				r.Body = readCloser{bytes.NewReader(body)}
			}
			tr, err := operatorclient.NewTransport(credentials.NewStaticCredentialsProvider(id.AccessKeyID, id.SecretAccessKey, id.SessionToken), "us-east-1", nil)
			if err != nil {
				return nil, err
			}
			return tr.RoundTrip(r)
		}
		// Over the client's limit: Lambda refuses it by its size before
		// any signature is looked at, so it goes unsigned.
		r.Body, r.ContentLength = readCloser{bytes.NewReader(body)}, int64(len(body))
		return http.DefaultTransport.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
