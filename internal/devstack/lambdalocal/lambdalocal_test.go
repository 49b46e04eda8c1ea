package lambdalocal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/devtools"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/iamlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

func TestMain(m *testing.M) {
	// Started by the emulator as a Lambda bootstrap, the test binary is
	// the tiny function of TestFunctionURLUnderTheEmulator.
	if os.Getenv(echoEnv) == "echo" {
		lambda.Start(echoFunction)
		return
	}
	pgtest.Main(m)
}

// TestEndToEndUnderTheEmulator is the deployed artefacts' test: the real
// bootstrap binaries, built by the Makefile targets SAM calls, run under
// the AWS Lambda Runtime Interface Emulator as template.yaml describes
// them, against a real Postgres that checks passwords and a real S3
// (versitygw). As CloudFormation would, the stack first runs the migration
// function on an empty database (the schema and the three roles, each
// role's password from its own secret); each function then connects as its
// own role. Signed webhooks go through the local API front; the
// processor's and the archiver's schedules are fired; the operator
// function answers through its two function URLs; rows, effects, objects
// and who connected as whom are checked.
func TestEndToEndUnderTheEmulator(t *testing.T) {
	tier.Heavy(t, "builds the Lambda binaries and runs them under the emulator")
	ctx := context.Background()
	root, err := devtools.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := samtemplate.Open(filepath.Join(root, "template.yaml"), map[string]any{
		"DatabaseSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:unused",
		"SourcesSecretArn":  "arn:aws:secretsmanager:us-east-1:123456789012:secret:unused",
	})
	if err != nil {
		t.Fatal(err)
	}
	dbURL := pgtest.EmptyURL(t, pgtest.Cluster(t, pgtest.Passwords()))
	s3srv := s3test.Server(t)
	bucket := s3test.Bucket(t, s3srv)
	sourcesFile := filepath.Join(root, "dev", "sources.json")

	// The operator function's URLs admit two local principals, as the
	// stack's two policies would: one may act, one may only read.
	operator, err := iamlocal.NewIdentity("operator", "read", "act")
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := iamlocal.NewIdentity("viewer", "read")
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := iamlocal.NewVerifier("us-east-1", operator, viewer)
	if err != nil {
		t.Fatal(err)
	}
	archiveEnv := []string{
		"ARCHIVE_BUCKET=" + bucket.Bucket, "ARCHIVE_MIN_AGE=1ms",
		"S3_ENDPOINT=" + s3srv.Endpoint(), "S3_ACCESS_KEY_ID=" + locals3.AccessKeyID,
		"S3_SECRET_ACCESS_KEY=" + locals3.SecretAccessKey, "AWS_REGION=" + locals3.Region,
	}
	stack, err := lambdalocal.StartStack(ctx, lambdalocal.StackOptions{
		Template: tpl, RepoRoot: root, Dir: t.TempDir(), DatabaseURL: dbURL,
		Env: map[string][]string{
			"*":                {"DATABASE_QUERY_MODE=exec", "LOG_LEVEL=info"},
			"ReceiverFunction": {"WEBHOOK_SOURCES_FILE=" + sourcesFile},
			// A short run, so the test need not wait the template's 70 s.
			"ProcessorFunction":    {"PROCESSOR_RUN_FOR=10s", "PROCESSOR_POLL_INTERVAL=100ms"},
			"ArchiverFunction":     archiveEnv,
			"OperatorFunction":     archiveEnv,
			"OperatorReadFunction": archiveEnv,
		},
		IAM: verifier, URLTargets: map[string]string{"OperatorFunction": "act", "OperatorReadFunction": "read"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	front := httptest.NewServer(stack.Front)
	defer front.Close()

	// Signed webhooks of every kind through the local API Gateway, each
	// sent twice: accepted, then duplicate.
	set, err := source.Load(func(k string) string {
		if k == source.EnvSourcesFile {
			return sourcesFile
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, name := range set.Names() {
		src, _ := set.Lookup(name)
		req, err := sender.Sample(src, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []string{"accepted", "duplicate"} {
			code, body, err := req.Post(ctx, front.Client(), front.URL)
			var ans struct{ Status string }
			_ = json.Unmarshal(body, &ans)
			if err != nil || code != 200 || ans.Status != want {
				t.Fatalf("%s delivery %d: %d %s %v", name, i+1, code, body, err)
			}
		}
		ids = append(ids, req.EventID)
	}
	// A forged one is refused by the binary too.
	stripe, _ := set.Lookup("stripe")
	forged, _ := sender.Sample(stripe, time.Now())
	forged.Body = []byte(strings.Replace(string(forged.Body), "2000", "9000", 1))
	if code, body, _ := forged.Post(ctx, front.Client(), front.URL); code != 401 || !strings.Contains(string(body), "unauthenticated") {
		t.Fatalf("forged delivery: %d %s", code, body)
	}

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM webhook_events`).Scan(&rows); err != nil || rows != len(ids) {
		t.Fatalf("rows = %d, %v; want %d", rows, err, len(ids))
	}

	// The processor's schedule: every event processed, the Stripe dunning
	// and Square order handlers' effects written; then, in real time, a
	// webhook received while the invocation polls is processed by it.
	fired := make(chan error, 1)
	go func() {
		out, err := stack.Fire(ctx, "ProcessorFunction")
		if err != nil {
			err = fmt.Errorf("%w %s", err, out)
		}
		fired <- err
	}()
	processed := func(where string) func() (bool, string) {
		return func() (bool, string) {
			var n int
			_ = conn.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE processed_at IS NULL`+where).Scan(&n)
			return n == 0, fmt.Sprintf("%d events not processed", n)
		}
	}
	poll.Until(t, 60*time.Second, processed(""))
	sources := len(ids)
	github, _ := set.Lookup("github")
	late, err := sender.Sample(github, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if code, body, err := late.Post(ctx, front.Client(), front.URL); err != nil || code != 200 || !strings.Contains(string(body), "accepted") {
		t.Fatalf("late delivery: %d %s %v", code, body, err)
	}
	ids = append(ids, late.EventID)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		select {
		case err := <-fired:
			t.Fatalf("the invocation ended before the late webhook was processed: %v", err)
		default:
		}
		return processed(" AND event_id = '" + late.EventID + "'")()
	})
	if err := <-fired; err != nil {
		t.Fatalf("processor: %v", err)
	}
	var unprocessed, dunning, orders int
	_ = conn.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE processed_at IS NULL`).Scan(&unprocessed)
	_ = conn.QueryRow(ctx, `SELECT count(*) FROM stripe_dunning`).Scan(&dunning)
	_ = conn.QueryRow(ctx, `SELECT count(*) FROM square_orders`).Scan(&orders)
	if unprocessed != 0 || dunning != 1 || orders != 1 {
		t.Fatalf("after the processor: unprocessed=%d dunning=%d orders=%d", unprocessed, dunning, orders)
	}

	// The archiver's schedule: bodies moved to S3, one object per source.
	if out, err := stack.Fire(ctx, "ArchiverFunction"); err != nil {
		t.Fatalf("archiver: %v %s", err, out)
	}
	var archived, bodies int
	_ = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE archived_at IS NOT NULL), count(body) FROM webhook_events`).Scan(&archived, &bodies)
	if archived != len(ids) || bodies != 0 {
		t.Fatalf("after the archiver: archived=%d bodies left=%d", archived, bodies)
	}
	objects, err := s3test.Open(t, bucket).List(ctx, "archive/")
	if err != nil || len(objects) != sources {
		t.Fatalf("objects = %d, %v; want one per source (%d)", len(objects), err, sources)
	}

	// The operator function, deployed twice as the template says, through
	// its function URLs: function-URL-shaped events with the caller that
	// the stand-in for IAM verified, what webhookctl --stack reaches.
	checkOperatorAPI(t, ctx, stack, operator, viewer, len(ids))

	// Each function connected as its own role, the migrator as the admin
	// (their pools stay open between invocations), and no function's role
	// may change the schema.
	activity, err := conn.Query(ctx, `SELECT DISTINCT application_name, usename::text FROM pg_stat_activity
		WHERE datname = current_database() AND application_name LIKE 'webhook-inbox-%' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	who, err := pgx.CollectRows(activity, func(r pgx.CollectableRow) (string, error) {
		var app, user string
		err := r.Scan(&app, &user)
		return app + "=" + user, err
	})
	want := []string{"webhook-inbox-archiver=webhook_archiver", "webhook-inbox-migrator=postgres",
		"webhook-inbox-operator=webhook_operator", "webhook-inbox-operator=webhook_operator_read",
		"webhook-inbox-processor=webhook_processor", "webhook-inbox-receiver=webhook_receiver"}
	if err != nil || !slices.Equal(who, want) {
		t.Fatalf("connections: %v (%v), want %v", who, err, want)
	}
	for id, roleURL := range stack.RoleURLs {
		rc, err := pgx.Connect(ctx, roleURL)
		if err != nil {
			t.Fatalf("%s's database URL: %v", id, err)
		}
		_, err = rc.Exec(ctx, `DROP TABLE webhook_events`)
		rc.Close(ctx)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s: DROP TABLE: %v, want SQLSTATE 42501", id, err)
		}
	}
	if !strings.Contains(string(stack.Schema.Body), `"Status":"SUCCESS"`) {
		t.Fatalf("the schema resource answered %s", stack.Schema.Body)
	}

	for id, d := range stack.InitDurations() {
		t.Logf("%s: init duration %v (the emulator's INIT REPORT line)", id, d)
	}
	if len(stack.InitDurations()) != 5 {
		t.Fatalf("init durations reported: %v", stack.InitDurations())
	}
}
