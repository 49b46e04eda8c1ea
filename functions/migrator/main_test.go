package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/migrator"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// respond stands in for the pre-signed ResponseURL and returns the last
// answer PUT to it.
func respond(t *testing.T) (string, func() migrator.Response) {
	var mu sync.Mutex
	var last []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		last, _ = io.ReadAll(r.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/answer?X-Amz-Signature=x", func() migrator.Response {
		mu.Lock()
		defer mu.Unlock()
		var resp migrator.Response
		if err := json.Unmarshal(last, &resp); err != nil {
			t.Fatalf("answer %q: %v", last, err)
		}
		return resp
	}
}

// call invokes h with ev as the Lambda runtime would: its JSON.
func call(ctx context.Context, h handler, ev any) (any, error) {
	raw, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return h(ctx, raw)
}

func create(url string) cfn.Event {
	return cfn.Event{
		RequestType: cfn.RequestCreate, RequestID: "r1", ResponseURL: url, ResourceType: "Custom::DatabaseSchema",
		LogicalResourceID: "DatabaseSchema", StackID: "arn:aws:cloudformation:eu-west-1:123456789012:stack/inbox/x",
		ResourceProperties: map[string]any{"ServiceToken": "arn:aws:lambda:eu-west-1:123456789012:function:m", "Auth": "iam", "Release": "1"},
	}
}

// TestCreateInIAMMode: the Lambda entry migrates an empty database and
// sets up the roles for IAM authentication (no secret to read), on a
// server of its own (roles belong to the whole server).
func TestCreateInIAMMode(t *testing.T) {
	tier.Heavy(t, "starts a cluster of its own")
	t.Parallel()
	dbURL := pgtest.EmptyURL(t, pgtest.Cluster(t))
	env := map[string]string{"DATABASE_URL": dbURL, "LOG_LEVEL": "error", "MIGRATOR_ROLES_AUTH": "iam", "MIGRATOR_LOCAL_RESPONSE_URL": "true"}
	h, closePool, err := setup(t.Context(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer closePool()
	url, answer := respond(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // the Lambda's deadline
	defer cancel()
	if _, err := call(ctx, h, create(url)); err != nil {
		t.Fatal(err)
	}
	if a := answer(); a.Status != "SUCCESS" || a.Data["SchemaVersion"] == "" {
		t.Fatalf("answer = %+v", a)
	}
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	// Every function's role, the operator function's two included.
	var roles []string
	if err := conn.QueryRow(t.Context(), `SELECT array_agg(rolname::text ORDER BY rolname) FROM pg_roles WHERE rolname = ANY($1) AND rolcanlogin`, migrate.FunctionRoles()).Scan(&roles); err != nil ||
		strings.Join(roles, " ") != "webhook_archiver webhook_operator webhook_operator_read webhook_processor webhook_receiver" {
		t.Fatalf("login roles = %v, %v", roles, err)
	}
}

// TestSetupReportsEveryProblemAtOnce: a configuration problem fails setup,
// naming every variable, and main then answers with migrator.Failing
// (shared/migrator tests what that answers).
func TestSetupReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	env := map[string]string{"LOG_LEVEL": "loud", "DATABASE_QUERY_MODE": "fast"}
	_, _, err := setup(t.Context(), func(k string) string { return env[k] })
	for _, want := range []string{"DATABASE_URL", "LOG_LEVEL", "DATABASE_QUERY_MODE"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}

// TestDatabaseDownAtInitIsNotFatal: the pool connects at the first request,
// so a database down at a cold start fails that request (FAILED) only.
func TestDatabaseDownAtInitIsNotFatal(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x?connect_timeout=1", "LOG_LEVEL": "error", "MIGRATOR_ROLES_AUTH": "iam", "MIGRATOR_LOCAL_RESPONSE_URL": "true"}
	h, closePool, err := setup(t.Context(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer closePool()
	url, answer := respond(t)
	if _, err := call(t.Context(), h, create(url)); err != nil {
		t.Fatal(err)
	}
	if a := answer(); a.Status != "FAILED" || !strings.Contains(a.Reason, "127.0.0.1") {
		t.Fatalf("answer = %+v", a)
	}
}

// TestModesAreCheckedAtSetup: an unknown MIGRATOR_MODE and a front without
// its MIGRATOR_FUNCTION fail setup, naming the variables; main then
// answers with migrator.Failing.
func TestModesAreCheckedAtSetup(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"MIGRATOR_MODE": "both"}, []string{`MIGRATOR_MODE must be direct, front or apply, got "both"`}},
		{map[string]string{"MIGRATOR_MODE": "front", "LOG_LEVEL": "loud"}, []string{"MIGRATOR_FUNCTION is not set", "LOG_LEVEL"}},
		{map[string]string{"MIGRATOR_MODE": "apply", "LOG_LEVEL": "loud"}, []string{"LOG_LEVEL"}},
	} {
		_, _, err := setup(t.Context(), func(k string) string { return c.env[k] })
		for _, want := range c.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%v: error does not say %q: %v", c.env, want, err)
			}
		}
	}
}

// TestModesRefuseEachOthersEvents: the apply mode takes no CloudFormation
// request (it answers it FAILED, so CloudFormation does not wait, and
// fails the invocation), and the direct and front modes take no apply
// payload; each error says which mode runs.
func TestModesRefuseEachOthersEvents(t *testing.T) {
	t.Parallel()
	payload := map[string]any{"ApplyVersion": 1, "RequestType": "Create", "ResourceProperties": map[string]any{"Auth": "iam"}}
	for mode, want := range map[string]string{
		"front": "MIGRATOR_FUNCTION must name the migration function in apply mode, not a front",
		"":      "set MIGRATOR_MODE=apply on the function the front invokes",
	} {
		env := map[string]string{"MIGRATOR_MODE": mode, "MIGRATOR_FUNCTION": "inbox-MigrationFunction", "DATABASE_URL": "postgres://x@127.0.0.1:1/x", "LOG_LEVEL": "error", "MIGRATOR_ROLES_AUTH": "iam", "MIGRATOR_LOCAL_RESPONSE_URL": "true"}
		h, closePool, err := setup(t.Context(), func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		_, err = call(t.Context(), h, payload)
		closePool()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("mode %q: %v, want %q", mode, err, want)
		}
	}

	env := map[string]string{"MIGRATOR_MODE": "apply", "LOG_LEVEL": "error", "MIGRATOR_ROLES_AUTH": "iam", "MIGRATOR_LOCAL_RESPONSE_URL": "true"}
	h, _, err := setup(t.Context(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	url, answer := respond(t)
	_, err = call(t.Context(), h, create(url))
	if err == nil || !strings.Contains(err.Error(), "runs with MIGRATOR_MODE=apply") {
		t.Fatalf("apply mode given CloudFormation's request: %v", err)
	}
	if a := answer(); a.Status != "FAILED" || !strings.Contains(a.Reason, "make the migration function in front mode the DatabaseSchema resource's ServiceToken") {
		t.Fatalf("answer = %+v", a)
	}
}

// TestApplyModeStartUpFailureReturnsFailed: an apply function whose
// start-up failed returns FAILED to the front with the cause.
func TestApplyModeStartUpFailureReturnsFailed(t *testing.T) {
	t.Parallel()
	env := map[string]string{"MIGRATOR_MODE": "apply"}
	h := failing(func(k string) string { return env[k] }, errors.New("LOG_LEVEL must be one of ..."), slog.New(slog.DiscardHandler))
	out, err := call(t.Context(), h, map[string]any{"ApplyVersion": 1, "RequestType": "Update", "ResourceProperties": map[string]any{"Auth": "iam"}})
	res, ok := out.(migrator.ApplyResult)
	if err != nil || !ok {
		t.Fatalf("%+v %v, want an ApplyResult", out, err)
	}
	if !field.Check(t, "result",
		field.Eq("Status", res.Status, "FAILED"),
		field.Eq("Reason", res.Reason, "Update failed: the migration function did not start: LOG_LEVEL must be one of ..."),
	) {
		t.FailNow()
	}
}
