package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/schemaresource"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// respond stands in for the pre-signed ResponseURL and returns the last
// answer PUT to it.
func respond(t *testing.T) (string, func() schemaresource.Response) {
	var mu sync.Mutex
	var last []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		last, _ = io.ReadAll(r.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/answer?X-Amz-Signature=x", func() schemaresource.Response {
		mu.Lock()
		defer mu.Unlock()
		var resp schemaresource.Response
		if err := json.Unmarshal(last, &resp); err != nil {
			t.Fatalf("answer %q: %v", last, err)
		}
		return resp
	}
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
	t.Parallel()
	dbURL := pgtest.EmptyURL(t, pgtest.Cluster(t))
	env := map[string]string{"DATABASE_URL": dbURL, "LOG_LEVEL": "error"}
	h, closePool, err := setup(t.Context(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer closePool()
	url, answer := respond(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // the Lambda's deadline
	defer cancel()
	if _, err := h.Handle(ctx, create(url)); err != nil {
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
// naming every variable, and main then answers with schemaresource.Failing
// (shared/schemaresource tests what that answers).
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
	env := map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x?connect_timeout=1", "LOG_LEVEL": "error"}
	h, closePool, err := setup(t.Context(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer closePool()
	url, answer := respond(t)
	if _, err := h.Handle(t.Context(), create(url)); err != nil {
		t.Fatal(err)
	}
	if a := answer(); a.Status != "FAILED" || !strings.Contains(a.Reason, "127.0.0.1") {
		t.Fatalf("answer = %+v", a)
	}
}
