package migrator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3/lock"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testclock"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testhandler"
	"github.com/webhook-inbox/webhook-inbox/shared/cfnresponse"
	"github.com/webhook-inbox/webhook-inbox/shared/dbschema"
	"github.com/webhook-inbox/webhook-inbox/shared/migrator"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The ARNs of the roles' secrets, as the template's generated secrets.
const (
	receiverARN  = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:inbox-receiver-AbCdEf"
	processorARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:inbox-processor-GhIjKl"
	archiverARN  = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:inbox-archiver-MnOpQr"
	opReadARN    = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:inbox-operator-read-StUvWx"
	operatorARN  = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:inbox-operator-YzAbCd"
	stackID      = "arn:aws:cloudformation:eu-west-1:123456789012:stack/inbox/5b6c9a80-0000-11ef-8d3e-0a1b2c3d4e5f"
)

// secretStore stands in for Secrets Manager, which the handler only reads:
// the behaviour under test is what it does with the values.
type secretStore struct {
	mu     sync.Mutex
	values map[string]string
}

func (s *secretStore) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[aws.ToString(in.SecretId)]
	if !ok {
		return nil, errors.New("ResourceNotFoundException: Secrets Manager can't find the specified secret")
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(v)}, nil
}

// roleSecrets are the roles' secrets, with the shared test server's
// role password (roles belong to the whole server; the other tests connect
// with it).
func roleSecrets() *secretStore {
	doc := func(role string) string {
		return fmt.Sprintf(`{"username":%q,"password":%q}`, role, pgtest.RolePassword)
	}
	return &secretStore{values: map[string]string{
		receiverARN: doc(migrate.RoleReceiver), processorARN: doc(migrate.RoleProcessor), archiverARN: doc(migrate.RoleArchiver),
		opReadARN: doc(migrate.RoleOperatorRead), operatorARN: doc(migrate.RoleOperator),
	}}
}

// received is one PUT to the stand-in of the pre-signed ResponseURL.
type received struct {
	method, contentType string
	hasContentType      bool
	contentLength       int64
	body                []byte
	at                  time.Time // when it arrived
}

// responder stands in for the pre-signed S3 URL CloudFormation gives: it
// records every PUT and answers with the status codes given, then 200.
type responder struct {
	srv      *httptest.Server
	mu       sync.Mutex
	got      []received
	statuses []int
}

func newResponder(t *testing.T, statuses ...int) *responder {
	r := &responder{statuses: statuses}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		ct, has := req.Header["Content-Type"]
		r.mu.Lock()
		r.got = append(r.got, received{method: req.Method, contentType: strings.Join(ct, ","), hasContentType: has, contentLength: req.ContentLength, body: body, at: time.Now()})
		status := http.StatusOK
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// url is a ResponseURL shaped like CloudFormation's (a signed query).
func (r *responder) url() string {
	return r.srv.URL + "/cloudformation-custom-resource-response-euwest1/" + "arn%3Aaws%3Acloudformation%3Aeu-west-1%7Cinbox%7CDatabaseSchema%7Creq?X-Amz-Signature=0ddba11"
}

// last returns the one answer the request got, checked to be sent as
// CloudFormation's pre-signed URL wants it.
func (r *responder) last(t *testing.T) []byte {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		t.Fatal("no answer was PUT to the ResponseURL")
	}
	g := r.got[len(r.got)-1]
	if g.method != http.MethodPut || !g.hasContentType || g.contentType != "" || g.contentLength != int64(len(g.body)) {
		t.Fatalf("answer sent as %s, Content-Type present %v %q, Content-Length %d for %d bytes; want PUT, an empty Content-Type, the length",
			g.method, g.hasContentType, g.contentType, g.contentLength, len(g.body))
	}
	return g.body
}

func (r *responder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

type fixture struct {
	t       *testing.T
	url     string
	pool    *pgxpool.Pool
	secrets *secretStore
	h       *migrator.Handler
	resp    *responder
	logs    *bytes.Buffer
}

// schemas are the handler packages the tests migrate: the tests' own, not
// the application's, so that what they expect holds whatever a fork
// registers.
var schemas = []processor.HandlerSchema{testhandler.Schema}

// setup gives each test an empty database (a first deploy's), the roles'
// secrets, a ResponseURL stand-in, and a handler as the migration function
// builds it, connected as the database's owner.
func setup(t *testing.T, statuses ...int) *fixture {
	t.Helper()
	f := &fixture{t: t, url: pgtest.Empty(t), secrets: roleSecrets(), resp: newResponder(t, statuses...), logs: &bytes.Buffer{}}
	f.h = f.handler(f.url)
	return f
}

// handler builds a handler over a pool on dbURL (opened as the Lambda
// opens it: it connects at the first statement).
func (f *fixture) handler(dbURL string) *migrator.Handler {
	f.t.Helper()
	getenv := func(k string) string {
		switch k {
		case storage.EnvDatabaseURL:
			return dbURL
		case migrator.EnvRolesAuth:
			return "password"
		case migrator.EnvLocalResponseURL:
			return "true" // the responder is on the loopback interface
		}
		return ""
	}
	cfg, err := migrator.ConfigFromEnv(getenv)
	db, dbErr := storage.PoolConfigFromEnv(getenv)
	if err := errors.Join(err, dbErr); err != nil {
		f.t.Fatal(err)
	}
	pool, err := cfg.Pool(db).Open(f.t.Context())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(pool.Close)
	if f.pool == nil {
		f.pool = pool
	}
	h, err := migrator.New(cfg, migrator.Deps{Pool: pool, Schemas: schemas, Secrets: f.secrets, Logger: slog.New(slog.NewJSONHandler(f.logs, nil))})
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// request builds CloudFormation's request for the resource.
func (f *fixture) request(typ string, props map[string]any) migrator.Request {
	req := migrator.Request{
		RequestType: cfn.RequestType(typ), RequestID: "req-" + strings.ToLower(typ) + "-6f1c", ResponseURL: f.resp.url(),
		ResourceType: "Custom::DatabaseSchema", LogicalResourceID: "DatabaseSchema", StackID: stackID,
		ResourceProperties: props,
	}
	if typ != migrator.RequestCreate {
		req.PhysicalResourceID = migrator.PhysicalResourceID
		req.OldResourceProperties = passwordProps("1")
	}
	return req
}

// passwordProps are the properties the template gives in password mode.
func passwordProps(release string) map[string]any {
	return map[string]any{
		"ServiceToken": "arn:aws:lambda:eu-west-1:123456789012:function:inbox-MigrationFunction-1a2b3c", "ServiceTimeout": "300",
		"Auth": "password", "ReceiverSecretArn": receiverARN, "ProcessorSecretArn": processorARN, "ArchiverSecretArn": archiverARN,
		"OperatorReadSecretArn": opReadARN, "OperatorSecretArn": operatorARN,
		"Release": release,
		// In create mode: the endpoints, the route table, its subnet
		// associations, subnets and security groups (not read).
		"NetworkPath": []any{"vpce-0s3", "rtb-0a", "rtbassoc-0a", "rtbassoc-0b", "vpce-0sm", "sg-0e", "subnet-0a", "subnet-0b", "sg-0m"},
	}
}

// handle runs one invocation with the Lambda's deadline.
func (f *fixture) handle(req migrator.Request, timeout time.Duration) (migrator.Response, error) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), timeout)
	defer cancel()
	return f.h.Handle(ctx, req)
}

// latest is the core schema's latest version: the number of its migrations.
func latest(t *testing.T) int {
	t.Helper()
	files, err := fs.Glob(migrate.Migrations(), "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations: %v %v", files, err)
	}
	// The highest version, not the count: versions may leave gaps (a
	// branch's migration numbered after another branch's).
	v, err := strconv.Atoi(strings.SplitN(files[len(files)-1], "_", 2)[0])
	if err != nil {
		t.Fatalf("migration %s: %v", files[len(files)-1], err)
	}
	return v
}

// answer is the exact body CloudFormation must get.
func answer(status, reason, requestID string, data string) string {
	b, _ := json.Marshal(reason)
	s := fmt.Sprintf(`{"Status":%q,"Reason":%s,"PhysicalResourceId":"webhook-inbox-schema","StackId":%q,"RequestId":%q,"LogicalResourceId":"DatabaseSchema","NoEcho":false`,
		status, b, stackID, requestID)
	if data != "" {
		s += `,"Data":` + data
	}
	return s + "}"
}

// snapshot is what a Delete must leave as it found: the schema's tables,
// the roles and their privileges.
func (f *fixture) snapshot() string {
	f.t.Helper()
	var out string
	err := f.pool.QueryRow(f.t.Context(), `
		SELECT concat_ws(' | ',
		  (SELECT string_agg(relname || ':' || coalesce(relacl::text, ''), ',' ORDER BY relname) FROM pg_class WHERE relnamespace = current_schema()::regnamespace),
		  (SELECT string_agg(rolname || ':' || rolcanlogin, ',' ORDER BY rolname) FROM pg_roles WHERE rolname LIKE 'webhook\_%'),
		  (SELECT count(*) FROM goose_db_version)::text)`).Scan(&out)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// TestCreateUpdateDelete: the resource's life on a first deploy's empty
// database. Create migrates everything and sets up the roles; Update (the
// next deploy) finds nothing to migrate and sets them up again; Delete
// changes nothing. Each answer is exactly CloudFormation's document.
func TestCreateUpdateDelete(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := latest(t)
	reason := fmt.Sprintf("schema at version %d (testhandler 1); roles webhook_receiver, webhook_processor, webhook_archiver, webhook_operator_read, webhook_operator set up (password)", v)
	data := fmt.Sprintf(`{"SchemaVersion":"%d"}`, v)

	if _, err := f.handle(f.request(migrator.RequestCreate, passwordProps("1")), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, want := string(f.resp.last(t)), answer("SUCCESS", reason, "req-create-6f1c", data); got != want {
		t.Fatalf("Create answered\n%s\nwant\n%s", got, want)
	}
	// The schema is at the latest version, core and handlers.
	versions, err := dbschema.Migrate(t.Context(), f.pool, schemas)
	if err != nil {
		t.Fatalf("versions after Create: %v", err)
	}
	if !field.Check(t, "versions after Create",
		field.Eq("Core", versions.Core, int64(v)),
		field.Eq(`Handlers["testhandler"]`, versions.Handlers["testhandler"], 1),
		field.Is("Handlers", versions.Handlers, len(versions.Handlers) == 1, "testhandler's alone"),
	) {
		t.FailNow()
	}
	// The roles exist, log in, and hold their grants.
	for _, g := range dbschema.Grants(schemas) {
		for _, p := range g.Privileges {
			var ok bool
			q := `SELECT has_table_privilege($1, $2, $3)`
			args := []any{g.Role, g.On, p}
			if len(g.Columns) > 0 {
				q, args = `SELECT has_column_privilege($1, $2, $4, $3)`, append(args, g.Columns[0])
			} else if strings.HasSuffix(g.On, "_seq") {
				q = `SELECT has_sequence_privilege($1, $2, $3)`
			}
			if err := f.pool.QueryRow(t.Context(), q, args...).Scan(&ok); err != nil || !ok {
				t.Errorf("%s lacks %s on %s %v (%v)", g.Role, p, g.On, g.Columns, err)
			}
		}
	}
	for _, role := range migrate.FunctionRoles() {
		conn, err := pgx.Connect(t.Context(), pgtest.RoleURL(t, f.url, role))
		if err != nil {
			t.Fatalf("%s cannot log in: %v", role, err)
		}
		conn.Close(t.Context())
	}

	before := f.snapshot()
	if _, err := f.handle(f.request(migrator.RequestUpdate, passwordProps("2")), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, want := string(f.resp.last(t)), answer("SUCCESS", reason, "req-update-6f1c", data); got != want {
		t.Fatalf("Update answered\n%s\nwant\n%s", got, want)
	}
	if after := f.snapshot(); after != before {
		t.Fatalf("an Update with nothing new changed the schema:\n%s\n%s", before, after)
	}

	if _, err := f.handle(f.request(migrator.RequestDelete, passwordProps("2")), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, want := string(f.resp.last(t)), answer("SUCCESS", "nothing deleted: the database, its data and its roles outlive the stack", "req-delete-6f1c", ""); got != want {
		t.Fatalf("Delete answered\n%s\nwant\n%s", got, want)
	}
	if after := f.snapshot(); after != before {
		t.Fatalf("Delete changed the database:\n%s\n%s", before, after)
	}
	if n := f.resp.count(); n != 3 {
		t.Fatalf("%d answers for 3 requests", n)
	}
	for _, secret := range []string{pgtest.RolePassword} {
		if strings.Contains(f.logs.String(), secret) {
			t.Fatalf("a password is in the log:\n%s", f.logs)
		}
	}
}

// TestMigrationFailureAnswersFailed: a migration that fails (a table in the
// way) answers FAILED, so that CloudFormation rolls the deploy back, with
// a reason naming the migration, and the function returns normally.
func TestMigrationFailureAnswersFailed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if _, err := f.pool.Exec(t.Context(), `CREATE TABLE webhook_events (id int)`); err != nil {
		t.Fatal(err)
	}
	resp, err := f.handle(f.request(migrator.RequestCreate, passwordProps("1")), time.Minute)
	if err != nil {
		t.Fatalf("the invocation failed (CloudFormation would wait for an answer): %v", err)
	}
	var got migrator.Response
	body := f.resp.last(t)
	if err := json.Unmarshal(body, &got); err != nil || !reflect.DeepEqual(got, resp) || len(body) > cfnresponse.MaxResponseBytes {
		t.Fatalf("answer %s (%d bytes), %v", body, len(body), err)
	}
	if !field.Check(t, "answer",
		field.Eq("Status", got.Status, "FAILED"),
		field.Eq("PhysicalResourceID", got.PhysicalResourceID, migrator.PhysicalResourceID),
		field.Is("Data", got.Data, got.Data == nil, "nil"),
		field.Is("Reason", got.Reason, strings.HasPrefix(got.Reason, "Create failed: ") && strings.Contains(got.Reason, "(type:sql,version:1)") &&
			strings.Contains(got.Reason, `relation "webhook_events" already exists`),
			`"Create failed: ", naming the migration (type:sql,version:1) and the relation that already exists`),
	) {
		t.FailNow()
	}
}

// TestFailuresAnswerFailed: every way Create or Update can fail answers
// FAILED with a reason that says what failed and holds no secret; Delete
// answers SUCCESS even when nothing else would work.
func TestFailuresAnswerFailed(t *testing.T) {
	t.Parallel()
	with := func(edit func(map[string]any)) map[string]any {
		p := passwordProps("1")
		edit(p)
		return p
	}
	const adminPassword = "s3cr3t-admin-pw"
	for _, c := range []struct {
		name    string
		dbURL   string // "" for the test's database
		secrets map[string]string
		typ     string
		props   map[string]any
		status  string
		reason  string // exact, or with contains
		contain []string
	}{
		{name: "no auth", typ: "Create", props: with(func(p map[string]any) { delete(p, "Auth") }), status: "FAILED",
			reason: `Create failed: property Auth must be "password" or "iam", got ""`},
		{name: "unknown property", typ: "Update", props: with(func(p map[string]any) { p["RecieverSecretArn"] = "x" }), status: "FAILED",
			reason: `Update failed: unknown property "RecieverSecretArn" (known: Auth, ReceiverSecretArn, ProcessorSecretArn, ArchiverSecretArn, OperatorReadSecretArn, OperatorSecretArn, Release, NetworkPath)`},
		{name: "no secret", typ: "Create", props: with(func(p map[string]any) { p["ProcessorSecretArn"] = "" }), status: "FAILED",
			reason: `Create failed: property ProcessorSecretArn is empty: password mode needs each role's secret`},
		{name: "secret not found", typ: "Create", props: with(func(p map[string]any) { p["ArchiverSecretArn"] = archiverARN + "-gone" }), status: "FAILED",
			contain: []string{"Create failed: ArchiverSecretArn: read secret " + archiverARN + "-gone", "ResourceNotFoundException"}},
		{name: "no operator secret", typ: "Create", props: with(func(p map[string]any) { delete(p, "OperatorSecretArn") }), status: "FAILED",
			reason: `Create failed: property OperatorSecretArn is empty: password mode needs each role's secret`},
		// The acting role's secret given for the read-only one: the read
		// function would log in as the role that may act.
		{name: "operator secrets swapped", typ: "Create", props: with(func(p map[string]any) { p["OperatorReadSecretArn"], p["OperatorSecretArn"] = operatorARN, opReadARN }), status: "FAILED",
			reason: `Create failed: OperatorReadSecretArn: the secret ` + operatorARN + ` is for user "webhook_operator", not webhook_operator_read`},
		{name: "secret of another user", typ: "Create", props: passwordProps("1"), status: "FAILED",
			secrets: map[string]string{receiverARN: `{"username":"postgres","password":"pw-of-another-user"}`},
			reason:  `Create failed: ReceiverSecretArn: the secret ` + receiverARN + ` is for user "postgres", not webhook_receiver`},
		{name: "secret not JSON", typ: "Create", props: passwordProps("1"), status: "FAILED",
			secrets: map[string]string{receiverARN: `hunter2`},
			reason:  `Create failed: ReceiverSecretArn: the secret ` + receiverARN + ` is not a JSON document {"username", "password"}`},
		{name: "secret without password", typ: "Create", props: passwordProps("1"), status: "FAILED",
			secrets: map[string]string{receiverARN: `{"username":"webhook_receiver"}`},
			reason:  `Create failed: ReceiverSecretArn: the secret ` + receiverARN + ` has no password`},
		{name: "unreachable database", typ: "Create", props: passwordProps("1"), status: "FAILED",
			dbURL:   "postgres://postgres:" + adminPassword + "@127.0.0.1:1/inbox?sslmode=disable",
			contain: []string{"Create failed: ", "127.0.0.1"}},
		{name: "a secret in an error", typ: "Create", props: with(func(p map[string]any) { p[adminPassword] = "x" }), status: "FAILED",
			dbURL:  "postgres://postgres:" + adminPassword + "@127.0.0.1:1/inbox?sslmode=disable",
			reason: `Create failed: unknown property "xxxxx" (known: Auth, ReceiverSecretArn, ProcessorSecretArn, ArchiverSecretArn, OperatorReadSecretArn, OperatorSecretArn, Release, NetworkPath)`},
		{name: "unknown request type", typ: "Replace", props: passwordProps("1"), status: "FAILED",
			reason: `unknown request type "Replace"`},
		{name: "delete without a database", typ: "Delete", props: passwordProps("1"), status: "SUCCESS",
			dbURL:  "postgres://postgres:" + adminPassword + "@127.0.0.1:1/inbox?sslmode=disable",
			reason: "nothing deleted: the database, its data and its roles outlive the stack"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &fixture{t: t, secrets: roleSecrets(), resp: newResponder(t), logs: &bytes.Buffer{}}
			for k, v := range c.secrets {
				f.secrets.values[k] = v
			}
			f.url = c.dbURL
			if f.url == "" {
				f.url = pgtest.Empty(t)
			}
			f.h = f.handler(f.url)
			if _, err := f.handle(f.request(c.typ, c.props), time.Minute); err != nil {
				t.Fatalf("the invocation failed: %v", err)
			}
			var got migrator.Response
			if err := json.Unmarshal(f.resp.last(t), &got); err != nil {
				t.Fatal(err)
			}
			if got.Status != c.status || (c.reason != "" && got.Reason != c.reason) {
				t.Fatalf("answer %s %q; want %s %q", got.Status, got.Reason, c.status, c.reason)
			}
			for _, s := range c.contain {
				if !strings.Contains(got.Reason, s) {
					t.Fatalf("reason %q lacks %q", got.Reason, s)
				}
			}
			for _, secret := range []string{adminPassword, pgtest.RolePassword, "hunter2", "pw-of-another-user"} {
				if strings.Contains(string(f.resp.last(t)), secret) || strings.Contains(f.logs.String(), secret) {
					t.Fatalf("%q leaked:\n%s\n%s", secret, f.resp.last(t), f.logs)
				}
			}
			if c.status == "FAILED" && c.typ != "Replace" {
				if exists := f.rolesExist(c.dbURL != ""); exists {
					t.Fatalf("a failed %s set up the roles", c.typ)
				}
			}
		})
	}
}

// rolesExist reports whether the test database has the schema's tables
// (nothing should have been applied before the failure).
func (f *fixture) rolesExist(unreachable bool) bool {
	f.t.Helper()
	if unreachable {
		return false
	}
	var exists bool
	if err := f.pool.QueryRow(f.t.Context(), `SELECT to_regclass('webhook_events') IS NOT NULL`).Scan(&exists); err != nil {
		f.t.Fatal(err)
	}
	return exists
}

// TestStartUpFailureStillAnswers: a migration function whose start-up
// failed answers Create and Update FAILED with the cause, and Delete
// SUCCESS, so that the stack rolls back and can be deleted.
func TestStartUpFailureStillAnswers(t *testing.T) {
	t.Parallel()
	f := &fixture{t: t, resp: newResponder(t), logs: &bytes.Buffer{}}
	f.h = migrator.Failing(errors.New("DATABASE_URL (or DATABASE_SECRET_ARN) is not set"), slog.New(slog.NewJSONHandler(f.logs, nil)), true)
	for typ, want := range map[string]string{
		"Create": answer("FAILED", "Create failed: the migration function did not start: DATABASE_URL (or DATABASE_SECRET_ARN) is not set", "req-create-6f1c", ""),
		"Update": answer("FAILED", "Update failed: the migration function did not start: DATABASE_URL (or DATABASE_SECRET_ARN) is not set", "req-update-6f1c", ""),
		"Delete": answer("SUCCESS", "nothing deleted: the database, its data and its roles outlive the stack", "req-delete-6f1c", ""),
	} {
		if _, err := f.handle(f.request(typ, passwordProps("1")), time.Minute); err != nil {
			t.Fatal(err)
		}
		if got := string(f.resp.last(t)); got != want {
			t.Fatalf("%s answered\n%s\nwant\n%s", typ, got, want)
		}
	}
}

// TestAnswersBeforeTheDeadline: a migration that cannot finish in time
// (another migrator holds the lock) is given up before the invocation's
// deadline, leaving time to answer FAILED.
func TestAnswersBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	f := setup(t)
	conn, err := pgx.Connect(t.Context(), f.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// goose's session lock, as a migrator stuck elsewhere would hold it.
	if _, err := conn.Exec(t.Context(), `SELECT pg_advisory_lock($1)`, lock.DefaultLockID); err != nil {
		t.Fatal(err)
	}
	// The answer is sent under the invocation's own context: that it was
	// delivered proves it went out before the deadline. The deadline is
	// Lambda's, in real time: a short one keeps the wait short, and half
	// of it is kept to answer a loopback server.
	resp, err := f.handle(f.request(migrator.RequestCreate, passwordProps("1")), time.Second)
	if err != nil || resp.Status != "FAILED" || !strings.Contains(resp.Reason, "ran out of time") {
		t.Fatalf("answer %+v, %v", resp, err)
	}
	if n := f.resp.count(); n != 1 {
		t.Fatalf("%d answers, want 1", n)
	}
}

// TestAnswerIsRetried: a PUT the ResponseURL refuses for a while is sent
// again, after a wait that doubles, until it is taken; one never taken
// fails the invocation (Lambda then retries it) without the pre-signed URL
// in the error.
func TestAnswerIsRetried(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	f := setup(t, http.StatusInternalServerError, http.StatusServiceUnavailable)
	clock := testclock.At(start)
	migrator.SetAnswerWaits(f.h, clock.After)
	if _, err := f.handle(f.request(migrator.RequestDelete, passwordProps("1")), time.Minute); err != nil {
		t.Fatal(err)
	}
	if !field.Check(t, "two refused answers",
		field.Eq("PUTs", f.resp.count(), 3),
		field.Eq("waited", clock.Now().Sub(start), 250*time.Millisecond+500*time.Millisecond),
	) {
		t.FailNow()
	}

	g := setup(t, 403, 403, 403, 403, 403, 403)
	clock = testclock.At(start)
	migrator.SetAnswerWaits(g.h, clock.After)
	_, err := g.handle(g.request(migrator.RequestDelete, passwordProps("1")), time.Minute)
	if err == nil || !strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "X-Amz-Signature") ||
		strings.Contains(g.logs.String(), "X-Amz-Signature") {
		t.Fatalf("undeliverable answer: %v\n%s", err, g.logs)
	}
	if !field.Check(t, "an answer never taken",
		field.Eq("PUTs", g.resp.count(), 5),
		field.Eq("waited", clock.Now().Sub(start), (250+500+1000+2000)*time.Millisecond),
	) {
		t.FailNow()
	}
}

// TestLongReasonFitsTheLimit: CloudFormation takes at most 4096 bytes; a
// longer reason is cut, the document stays whole.
func TestLongReasonFitsTheLimit(t *testing.T) {
	t.Parallel()
	f := setup(t)
	props := passwordProps("1")
	props[strings.Repeat("é", 3000)] = "x"
	if _, err := f.handle(f.request(migrator.RequestCreate, props), time.Minute); err != nil {
		t.Fatal(err)
	}
	body := f.resp.last(t)
	var got migrator.Response
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%d bytes: %.200s…, %v", len(body), body, err)
	}
	if !field.Check(t, "the cut answer",
		field.Is("size", len(body), len(body) <= cfnresponse.MaxResponseBytes && len(body) >= cfnresponse.MaxResponseBytes-8,
			fmt.Sprintf("within 8 bytes under %d", cfnresponse.MaxResponseBytes)),
		field.Eq("Status", got.Status, "FAILED"),
		field.Is("Reason", fmt.Sprintf("%.200s…", got.Reason), strings.HasSuffix(got.Reason, " …"), `ending " …"`),
		field.Eq("RequestID", got.RequestID, "req-create-6f1c"),
	) {
		t.FailNow()
	}
}
