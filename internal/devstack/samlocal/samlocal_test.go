package samlocal_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var repoRoot = filepath.Join("..", "..", "..")

func template(t *testing.T) *samtemplate.Template {
	t.Helper()
	tpl, err := samtemplate.Open(filepath.Join(repoRoot, "template.yaml"), map[string]any{
		"SourcesSecretArn": "arn:aws:secretsmanager:us-east-1:000000000000:secret:local",
	})
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

var devStack = samlocal.Stack{
	DatabaseURL: "postgres://postgres@127.0.0.1:54321/webhook_inbox?sslmode=disable",
	S3Endpoint:  "http://127.0.0.1:7071", S3AccessKeyID: "locals3", S3SecretAccessKey: "locals3-secret-key",
	Bucket: "webhook-inbox-dev", MinAge: "1m0s",
	Sources: `{"sources":{"stripe":{"kind":"stripe","secrets":["whsec_dev_FAKE_0123456789abcde"]}}}`,
}

// TestEnvPointsContainersAtTheDevStack: env.json sends each function, from
// its container, to make dev's database and S3 through host.docker.internal,
// turns off what only works in AWS, and sets only variables the template
// declares for the function (sam local ignores the others).
func TestEnvPointsContainersAtTheDevStack(t *testing.T) {
	t.Parallel()
	tpl := template(t)
	env, err := samlocal.Env(tpl, devStack)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ReceiverFunction", "ProcessorFunction", "ArchiverFunction", "OperatorReadFunction", "OperatorFunction"} {
		vars := env[id]
		want := map[string]string{
			"DATABASE_URL":        "postgres://postgres@host.docker.internal:54321/webhook_inbox?sslmode=disable",
			"DATABASE_HOST":       "host.docker.internal",
			"DATABASE_PORT":       "54321",
			"DATABASE_NAME":       "webhook_inbox",
			"DATABASE_SSLMODE":    "disable",
			"DATABASE_SECRET_ARN": "",
			"DATABASE_IAM_AUTH":   "false",
		}
		for k, v := range want {
			if got, ok := vars[k]; !ok || got != v {
				t.Errorf("%s: %s = %q (set %v), want %q", id, k, got, ok, v)
			}
		}
		for k := range vars {
			if _, declared := tpl.Functions[id].Environment[k]; !declared {
				t.Errorf("env.json sets %s for %s, which the template does not declare (sam local would ignore it)", k, id)
			}
		}
	}
	// A local invoke of the processor drains once and returns, instead
	// of lingering for wake-ups that never come here.
	if p := env["ProcessorFunction"]; p["PROCESSOR_RUN_FOR"] != "0" {
		t.Errorf("processor's PROCESSOR_RUN_FOR = %q, want 0 (one drain per invoke)", p["PROCESSOR_RUN_FOR"])
	}
	// The receiver verifies with the document itself, not the relay's
	// copy in a control bucket that sam local does not have.
	if r := env["ReceiverFunction"]; r["WEBHOOK_SOURCES"] != devStack.Sources || r["WEBHOOK_SOURCES_OBJECT"] != "" {
		t.Errorf("receiver's sources: %v", r)
	}
	// Nothing wakes or arms anything: no Lambda endpoint, no control
	// bucket, no EventBridge under sam local.
	for _, id := range []string{"ReceiverFunction", "ProcessorFunction", "ArchiverFunction", "OperatorReadFunction", "OperatorFunction"} {
		vars, fn := env[id], tpl.Functions[id]
		if _, declared := fn.Environment["WAKE_BUCKET"]; !declared {
			t.Errorf("the template no longer declares WAKE_BUCKET for %s: env.json cannot turn its markers off", id)
		}
		if got, set := vars["WAKE_BUCKET"]; !set || got != "" {
			t.Errorf("%s: WAKE_BUCKET = %q (set %v), want it set empty", id, got, set)
		}
		if _, declared := fn.Environment["WAKE_MODE"]; declared && vars["WAKE_MODE"] != "none" {
			t.Errorf("%s: WAKE_MODE = %q, want none", id, vars["WAKE_MODE"])
		}
	}
	if _, declared := tpl.Functions["ReceiverFunction"].Environment["WAKE_MODE"]; !declared {
		t.Error("the template no longer declares the receiver's WAKE_MODE")
	}
	for _, id := range []string{"RelayFunction", "MigrationFrontFunction"} {
		if _, ok := env[id]; ok {
			t.Errorf("%s only answers AWS's events; env.json has nothing for it", id)
		}
	}
	for _, id := range []string{"ArchiverFunction", "OperatorReadFunction", "OperatorFunction"} {
		if a := env[id]; a["S3_ENDPOINT"] != "http://host.docker.internal:7071" || a["S3_ACCESS_KEY_ID"] != "locals3" || a["ARCHIVE_BUCKET"] != "webhook-inbox-dev" {
			t.Errorf("%s's S3: %v", id, a)
		}
	}
	if _, ok := env["MigrationFunction"]; ok {
		t.Error("the migration function runs for CloudFormation only; env.json has nothing for it")
	}

	// A database the developer named elsewhere is kept as it is.
	other := devStack
	other.DatabaseURL = "postgres://app:pw@db.example.com:6432/inbox?sslmode=require"
	env, err = samlocal.Env(tpl, other)
	if err != nil {
		t.Fatal(err)
	}
	if p := env["ProcessorFunction"]; p["DATABASE_URL"] != other.DatabaseURL || p["DATABASE_HOST"] != "db.example.com" || p["DATABASE_SSLMODE"] != "require" {
		t.Errorf("a remote database was rewritten: %v", p)
	}
	other.DatabaseURL = "postgres://app:secret-password@[::1"
	if _, err := samlocal.Env(tpl, other); err == nil || strings.Contains(err.Error(), "secret-password") {
		t.Errorf("a bad URL: %v", err)
	}
}

// TestEnvConnectsEachFunctionAsItsRole: with make dev's role logins, each
// function's container connects as its deployed role, as make dev's
// components do, to the same database; without (--as-owner), as the URL's
// user.
func TestEnvConnectsEachFunctionAsItsRole(t *testing.T) {
	t.Parallel()
	st := devStack
	st.Logins = map[string]*url.Userinfo{
		"ReceiverFunction":  url.UserPassword("webhook_receiver", "pw-r"),
		"ProcessorFunction": url.UserPassword("webhook_processor", "pw-p"),
	}
	env, err := samlocal.Env(template(t), st)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{
		"ReceiverFunction":  "postgres://webhook_receiver:pw-r@host.docker.internal:54321/webhook_inbox?sslmode=disable",
		"ProcessorFunction": "postgres://webhook_processor:pw-p@host.docker.internal:54321/webhook_inbox?sslmode=disable",
		"ArchiverFunction":  "postgres://postgres@host.docker.internal:54321/webhook_inbox?sslmode=disable",
	} {
		if got := env[id]["DATABASE_URL"]; got != want {
			t.Errorf("%s: DATABASE_URL = %q, want %q", id, got, want)
		}
	}
}

// TestWriteEnv: the file is JSON for --env-vars, readable by its owner only.
func TestWriteEnv(t *testing.T) {
	t.Parallel()
	env, err := samlocal.Env(template(t), devStack)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), ".local", "env.json")
	if err := samlocal.WriteEnv(path, env); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("env.json mode %v, %v; want 0600 (it holds the database URL)", fi.Mode(), err)
	}
	raw, _ := os.ReadFile(path)
	var back map[string]map[string]string
	if err := json.Unmarshal(raw, &back); err != nil || back["ReceiverFunction"]["DATABASE_HOST"] != samlocal.HostName {
		t.Fatalf("env.json = %s, %v", raw, err)
	}
}

// relayHost is a loopback address other than 127.0.0.1, standing in for
// Docker's bridge: a relay there on a server's port reaches the server on
// 127.0.0.1 only through the relay.
const relayHost = "127.0.0.2"

// TestRelayReachesTheDevStacksServers: a real PostgreSQL and a real S3
// server listening on 127.0.0.1 only are reached on another address, on
// the same port, through the relays, as a container reaches make dev's.
func TestRelayReachesTheDevStacksServers(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	s3 := s3test.Server(t)
	ports := samlocal.LoopbackPorts(dbURL, s3.Endpoint(), "postgres://db.example.com:5432/x")
	if len(ports) != 2 {
		t.Fatalf("loopback ports = %v", ports)
	}
	relay, err := samlocal.StartRelay(relayHost, ports)
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	u, _ := url.Parse(dbURL)
	u.Host = net.JoinHostPort(relayHost, u.Port())
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatalf("PostgreSQL through the relay: %v", err)
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 through the relay: %d %v", one, err)
	}
	conn.Close(ctx)

	s3u, _ := url.Parse(s3.Endpoint())
	resp, err := http.Get("http://" + net.JoinHostPort(relayHost, s3u.Port()) + "/")
	if err != nil {
		t.Fatalf("S3 through the relay: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == 0 {
		t.Fatal("no answer from S3 through the relay")
	}

	// Closed, the relay neither listens nor keeps a connection open.
	if err := relay.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		c.Close()
		t.Fatal("the relay still listens after Close")
	}
}

func TestRelayRefusesATakenAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", relayHost+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if r, err := samlocal.StartRelay(relayHost, []string{port}); err == nil {
		r.Close()
		t.Fatal("a relay started on a port already taken")
	}
}

// TestCheckedInEventsCannotGoStale: the receiver events kept in events/
// (for sam local invoke, and the Lambda tests) are signed for a kind that
// signs no timestamp, so they still verify years from now; any other
// sample is made fresh by `webhookdev sample SOURCE --apigw`.
func TestCheckedInEventsCannotGoStale(t *testing.T) {
	t.Parallel()
	sources, _, err := checkout.Sources(func(k string) string {
		if k == "WEBHOOK_SOURCES_FILE" {
			return filepath.Join(repoRoot, checkout.SourcesFile)
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(repoRoot, "events", "receiver-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no receiver events: %v", err)
	}
	later := time.Now().AddDate(10, 0, 0)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		src, ok := sources.Lookup(ev.PathParameters["source"])
		if !ok {
			t.Errorf("%s: no dev source %q", f, ev.PathParameters["source"])
			continue
		}
		if src.Tolerance() > 0 {
			t.Errorf("%s: %s signs a timestamp: a checked-in sample goes stale; make it fresh with webhookdev sample --apigw", f, src.Kind)
			continue
		}
		body := []byte(ev.Body)
		if ev.IsBase64Encoded {
			if body, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
		h := http.Header{}
		for k, v := range ev.Headers {
			h.Set(k, v)
		}
		if _, err := src.Verifier.Verify(h, body, later); err != nil {
			t.Errorf("%s does not verify: %v", f, err)
		}
	}
}
