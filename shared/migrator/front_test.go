package migrator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/migrator"
)

// adminARN names the admin secret the front reads (its DATABASE_SECRET_ARN).
const adminARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:rds!cluster-0a1b2c3d-XyZ123"

// invokeAPI stands in for Lambda's Invoke API (POST
// /2015-03-31/functions/{FunctionName}/invocations, REST-JSON) for the
// real SDK client: it runs fn on the payload as the Lambda runtime would,
// answering its result as JSON, or a function error as Lambda does (the
// X-Amz-Function-Error header and {"errorType", "errorMessage"}).
type invokeAPI struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []string // function names invoked
	types []string // X-Amz-Invocation-Type of each
}

func newInvokeAPI(t *testing.T, fn func(ctx context.Context, raw json.RawMessage) (any, error)) *invokeAPI {
	api := &invokeAPI{}
	api.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/2015-03-31/functions/")
		name, ok2 := strings.CutSuffix(name, "/invocations")
		if r.Method != http.MethodPost || !ok || !ok2 || !strings.Contains(r.Header.Get("Authorization"), "/lambda/aws4_request") {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		name, _ = url.PathUnescape(name)
		api.mu.Lock()
		api.calls = append(api.calls, name)
		api.types = append(api.types, r.Header.Get("X-Amz-Invocation-Type"))
		api.mu.Unlock()
		raw, _ := io.ReadAll(r.Body)
		out, err := fn(r.Context(), raw)
		if err != nil {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			_ = json.NewEncoder(w).Encode(map[string]string{"errorType": "errorString", "errorMessage": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(api.srv.Close)
	return api
}

func (a *invokeAPI) invoked() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

// lambdaClient is the real SDK client pointed at endpoint.
func lambdaClient(endpoint string) *lambda.Client {
	return lambda.New(lambda.Options{
		Region: "eu-west-1", BaseEndpoint: aws.String(endpoint), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDFRONT", "front-secret", ""),
	})
}

// frontFixture is a front invoking an apply-mode handler over a first
// deploy's empty database, the admin secret holding its URL.
type frontFixture struct {
	*fixture
	api   *invokeAPI
	front *migrator.Front
	apply *migrator.Applier
}

func setupFront(t *testing.T, applyEnv map[string]string) *frontFixture {
	t.Helper()
	f := &frontFixture{fixture: &fixture{t: t, url: pgtest.Empty(t), secrets: roleSecrets(), resp: newResponder(t), logs: &bytes.Buffer{}}}
	f.secrets.values[adminARN] = adminSecret(t, f.url)
	// The apply function's environment says where the database is, never
	// how to log in: that comes in the payload.
	f.apply = migrator.NewApplier(func(k string) string {
		if v, ok := applyEnv[k]; ok {
			return v
		}
		return map[string]string{migrator.EnvRolesAuth: "password", migrator.EnvLocalResponseURL: "true"}[k]
	}, schemas, slog.New(slog.NewJSONHandler(f.logs, nil)))
	f.api = newInvokeAPI(t, func(ctx context.Context, raw json.RawMessage) (any, error) { return f.apply.HandleEvent(ctx, raw) })
	f.front = f.newFront(lambdaClient(f.api.srv.URL))
	f.handler(f.url) // the owner's pool, for the checks
	return f
}

// adminSecret is the admin secret's value for dbURL: a URL with the
// master password (the local server trusts the owner and checks none;
// a secret without one is refused).
func adminSecret(t *testing.T, dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "master-pw-Zq8")
	return u.String()
}

func (f *frontFixture) newFront(lc migrator.Invoker) *migrator.Front {
	fr, err := migrator.NewFront(migrator.FrontConfig{
		Function: "inbox-MigrationApplyFunction", DatabaseSecretARN: adminARN, RolesAuth: "password", LocalResponseURL: true,
	}, migrator.FrontDeps{Secrets: f.secrets, Lambda: lc, Logger: slog.New(slog.NewJSONHandler(f.logs, nil))})
	if err != nil {
		f.t.Fatal(err)
	}
	return fr
}

func (f *frontFixture) handle(req migrator.Request, timeout time.Duration) (migrator.Response, error) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), timeout)
	defer cancel()
	return f.front.Handle(ctx, req)
}

// TestFrontCreateUpdateDelete: the front, with the secrets it reads, has
// the apply mode (through the real Lambda client, RequestResponse) do
// Create and Update, and answers exactly what the direct mode answers;
// Delete is answered without invoking anything.
func TestFrontCreateUpdateDelete(t *testing.T) {
	t.Parallel()
	f := setupFront(t, nil)
	v := latest(t)
	reason := fmt.Sprintf("schema at version %d (testhandler 1); roles webhook_receiver, webhook_processor, webhook_archiver, webhook_operator_read, webhook_operator set up (password)", v)
	data := fmt.Sprintf(`{"SchemaVersion":"%d"}`, v)

	if _, err := f.handle(f.request(migrator.RequestCreate, passwordProps("1")), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, want := string(f.resp.last(t)), answer("SUCCESS", reason, "req-create-6f1c", data); got != want {
		t.Fatalf("Create answered\n%s\nwant\n%s\n%s", got, want, f.logs)
	}
	before := f.snapshot()
	if _, err := f.handle(f.request(migrator.RequestUpdate, passwordProps("2")), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, want := string(f.resp.last(t)), answer("SUCCESS", reason, "req-update-6f1c", data); got != want {
		t.Fatalf("Update answered\n%s\nwant\n%s", got, want)
	}
	if _, err := f.handle(f.request(migrator.RequestDelete, passwordProps("2")), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, want := string(f.resp.last(t)), answer("SUCCESS", "nothing deleted: the database, its data and its roles outlive the stack", "req-delete-6f1c", ""); got != want {
		t.Fatalf("Delete answered\n%s\nwant\n%s", got, want)
	}
	if after := f.snapshot(); after != before {
		t.Fatalf("Update or Delete changed the schema:\n%s\n%s", before, after)
	}
	if calls := f.api.invoked(); strings.Join(calls, ",") != "inbox-MigrationApplyFunction,inbox-MigrationApplyFunction" ||
		strings.Join(f.api.types, ",") != "RequestResponse,RequestResponse" {
		t.Fatalf("invocations %v %v, want Create's and Update's, RequestResponse", calls, f.api.types)
	}
	if strings.Contains(f.logs.String(), pgtest.RolePassword) {
		t.Fatalf("a password is in the log:\n%s", f.logs)
	}
}

// TestFrontDeleteNeedsNothing: Delete is answered SUCCESS when nothing
// else can be reached (the apply function's endpoint is gone, as the VPC
// is when a create-mode stack is torn down), and reads no secret.
func TestFrontDeleteNeedsNothing(t *testing.T) {
	t.Parallel()
	f := &frontFixture{fixture: &fixture{t: t, secrets: &secretStore{values: map[string]string{}}, resp: newResponder(t), logs: &bytes.Buffer{}}}
	f.front = f.newFront(lambdaClient(closedEndpoint(t)))
	start := time.Now()
	if _, err := f.handle(f.request(migrator.RequestDelete, passwordProps("1")), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, want := string(f.resp.last(t)), answer("SUCCESS", "nothing deleted: the database, its data and its roles outlive the stack", "req-delete-6f1c", ""); got != want {
		t.Fatalf("Delete answered\n%s\nwant\n%s", got, want)
	}
	t.Logf("Delete answered in %v", time.Since(start).Round(time.Millisecond))
}

// closedEndpoint is a loopback URL nothing listens on.
func closedEndpoint(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestFrontFailuresAnswerFailed: every way the front's Create or Update
// fails answers FAILED with a reason that says what failed and holds no
// secret; the checks and reads that fail come before any invocation.
func TestFrontFailuresAnswerFailed(t *testing.T) {
	t.Parallel()
	const adminPassword = "s3cr3t-admin-pw"
	with := func(edit func(map[string]any)) map[string]any {
		p := passwordProps("1")
		edit(p)
		return p
	}
	for _, c := range []struct {
		name    string
		props   map[string]any
		fn      func(ctx context.Context, raw json.RawMessage) (any, error) // nil: the apply mode
		down    bool                                                        // nothing listens at the endpoint
		timeout time.Duration
		calls   int
		reason  string
		contain []string
	}{
		{name: "unknown property", props: with(func(p map[string]any) { p["RecieverSecretArn"] = "x" }),
			reason: `Create failed: unknown property "RecieverSecretArn" (known: Auth, ReceiverSecretArn, ProcessorSecretArn, ArchiverSecretArn, OperatorReadSecretArn, OperatorSecretArn, Release, NetworkPath)`},
		{name: "no auth", props: with(func(p map[string]any) { delete(p, "Auth") }),
			reason: `Create failed: property Auth must be "password" or "iam", got ""`},
		{name: "secret not found", props: with(func(p map[string]any) { p["ArchiverSecretArn"] = archiverARN + "-gone" }),
			contain: []string{"Create failed: ArchiverSecretArn: read secret " + archiverARN + "-gone", "ResourceNotFoundException"}},
		// Checked by the apply mode, with the direct mode's words.
		{name: "empty role secret", props: with(func(p map[string]any) { p["ProcessorSecretArn"] = "" }), calls: 1,
			reason: `Create failed: property ProcessorSecretArn is empty: password mode needs each role's secret`},
		{name: "apply function unreachable", props: passwordProps("1"), down: true,
			contain: []string{"Create failed: could not invoke the migration function inbox-MigrationApplyFunction: ", "connect"}},
		{name: "function error", props: passwordProps("1"), calls: 1,
			fn:     func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("runtime: out of memory") },
			reason: "Create failed: the migration function inbox-MigrationApplyFunction failed (Unhandled): errorString: runtime: out of memory"},
		{name: "not a result", props: passwordProps("1"), calls: 1,
			fn: func(context.Context, json.RawMessage) (any, error) { return map[string]any{"Status": "SUCCESS"}, nil },
			contain: []string{"Create failed: the migration function inbox-MigrationApplyFunction answered something other than a migration result of version 1",
				"is it running with MIGRATOR_MODE=apply"}},
		{name: "a secret in a result", props: passwordProps("1"), calls: 1,
			fn: func(context.Context, json.RawMessage) (any, error) {
				return migrator.ApplyResult{ApplyVersion: 1, Status: "FAILED", Reason: "Create failed: password " + adminPassword + " refused"}, nil
			},
			reason: "Create failed: password xxxxx refused"},
		{name: "no answer in time", props: passwordProps("1"), calls: 1, timeout: 3 * time.Second,
			fn: func(ctx context.Context, _ json.RawMessage) (any, error) { <-ctx.Done(); return nil, ctx.Err() },
			contain: []string{"Create failed: the migration function inbox-MigrationApplyFunction did not answer within the front's time",
				"give the front a longer Timeout than the migration function's"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &frontFixture{fixture: &fixture{t: t, secrets: roleSecrets(), resp: newResponder(t), logs: &bytes.Buffer{}}}
			f.secrets.values[adminARN] = "postgres://postgres:" + adminPassword + "@127.0.0.1:1/inbox?sslmode=disable"
			fn := c.fn
			if fn == nil {
				a := migrator.NewApplier(testApplyEnv, schemas, slog.New(slog.NewJSONHandler(f.logs, nil)))
				fn = func(ctx context.Context, raw json.RawMessage) (any, error) { return a.HandleEvent(ctx, raw) }
			}
			f.api = newInvokeAPI(t, fn)
			endpoint := f.api.srv.URL
			if c.down {
				endpoint = closedEndpoint(t)
			}
			f.front = f.newFront(lambdaClient(endpoint))
			timeout := c.timeout
			if timeout == 0 {
				timeout = time.Minute
			}
			start := time.Now()
			if _, err := f.handle(f.request("Create", c.props), timeout); err != nil {
				t.Fatalf("the invocation failed: %v", err)
			}
			if took := time.Since(start); took >= timeout {
				t.Fatalf("answered after %v of a %v invocation", took, timeout)
			}
			var got migrator.Response
			body := f.resp.last(t)
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if got.Status != "FAILED" || (c.reason != "" && got.Reason != c.reason) {
				t.Fatalf("answer %s %q; want FAILED %q", got.Status, got.Reason, c.reason)
			}
			for _, s := range c.contain {
				if !strings.Contains(got.Reason, s) {
					t.Fatalf("reason %q lacks %q", got.Reason, s)
				}
			}
			if n := len(f.api.invoked()); n != c.calls {
				t.Fatalf("%d invocations, want %d", n, c.calls)
			}
			for _, secret := range []string{adminPassword, pgtest.RolePassword} {
				if strings.Contains(string(body), secret) || strings.Contains(f.logs.String(), secret) {
					t.Fatalf("%q leaked:\n%s\n%s", secret, body, f.logs)
				}
			}
		})
	}
}

// applyRequest is the front's payload for the test's database.
func applyRequest(f *fixture, props map[string]any) migrator.ApplyRequest {
	values := map[string]string{adminARN: adminSecret(f.t, f.url)}
	for k, v := range f.secrets.values {
		values[k] = v
	}
	return migrator.ApplyRequest{ApplyVersion: 1, RequestType: "Create", RequestID: "req-1", StackID: stackID,
		LogicalResourceID: "DatabaseSchema", Properties: props, DatabaseSecretARN: adminARN, Secrets: values}
}

// TestApplyRefusesWhatItCannotRead: a payload of another version, with
// fields it does not know, too large, a Delete, or naming a secret it does
// not carry, gets a FAILED result saying so, and nothing is applied.
func TestApplyRefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := migrator.NewApplier(testApplyEnv, schemas, slog.New(slog.NewJSONHandler(f.logs, nil)))
	encode := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := applyRequest(f, passwordProps("1"))
	other := good
	other.ApplyVersion = 2
	del := good
	del.RequestType = "Delete"
	missing := good
	missing.Secrets = map[string]string{adminARN: adminSecret(t, f.url)}
	var extra map[string]any
	_ = json.Unmarshal(encode(good), &extra)
	extra["Passwords"] = map[string]string{"webhook_receiver": "pw"}
	big := good
	big.Secrets = map[string]string{adminARN: strings.Repeat("x", migrator.MaxPayloadBytes)}
	for _, c := range []struct {
		name    string
		raw     json.RawMessage
		contain string
	}{
		{"version", encode(other), "the front's payload is of version 2, this migration function reads version 1: deploy both from one build"},
		{"unknown field", encode(extra), "the front's payload does not decode as an apply request: are the front and the migration function from the same build?"},
		{"too large", encode(big), "over the 524288 allowed"},
		{"delete", encode(del), `unknown request type "Delete" for the apply mode`},
		{"secret not sent", encode(missing), "ReceiverSecretArn: read secret " + receiverARN + ": the front did not send it"},
	} {
		res, err := a.HandleEvent(t.Context(), c.raw)
		if err != nil || res.Status != "FAILED" || !strings.Contains(res.Reason, c.contain) {
			t.Errorf("%s: %+v %v; want FAILED with %q", c.name, res, err, c.contain)
		}
	}
	if f.rolesExist(false) {
		t.Fatal("a refused payload applied the schema")
	}
	if strings.Contains(f.logs.String(), pgtest.RolePassword) {
		t.Fatalf("a password is in the log:\n%s", f.logs)
	}
	// The payload's printed forms hold no secret value.
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "request", good)
	for _, s := range []string{fmt.Sprint(good), fmt.Sprintf("%+v", good), fmt.Sprintf("%#v", good), buf.String()} {
		if strings.Contains(s, pgtest.RolePassword) || strings.Contains(s, "master-pw-Zq8") {
			t.Fatalf("printed with a secret: %s", s)
		}
	}
}

// testApplyEnv is an apply function's environment that says nothing of
// the database: how the roles authenticate, and the loopback responder.
func testApplyEnv(k string) string {
	return map[string]string{migrator.EnvRolesAuth: "password", migrator.EnvLocalResponseURL: "true"}[k]
}
