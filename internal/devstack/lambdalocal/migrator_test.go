package lambdalocal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3/lock"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localsecrets"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/pinnedtools"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/dbschema"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

const (
	stackID  = "arn:aws:cloudformation:us-east-1:123456789012:stack/inbox/0a1b2c3d-4e5f-11ef-9a8b-0a1b2c3d4e5f"
	adminARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:rds!cluster-0a1b2c3d"
)

// migrator is the migration function's bootstrap with what its tests need.
type migrator struct {
	t        *testing.T
	rie, bin string
	dir      string
	secrets  *localsecrets.Server
}

// startMigrator runs the bootstrap under the emulator with env (its
// template's environment in AWS: the admin secret) and the local Secrets
// Manager's endpoint.
func (m *migrator) start(name string, timeout time.Duration, env ...string) *lambdalocal.Emulator {
	m.t.Helper()
	em, err := lambdalocal.StartEmulator(context.Background(), lambdalocal.EmulatorOptions{
		Name: "MigrationFunction", RIE: m.rie, Bootstrap: m.bin, Timeout: timeout, MemoryMB: 256,
		Env: append(append([]string{"LOG_LEVEL=info", "MIGRATOR_ROLES_AUTH=password", "MIGRATOR_LOCAL_RESPONSE_URL=true"}, m.secrets.Env()...), env...), LogPath: filepath.Join(m.dir, name+".log"),
	})
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() { _ = em.Close() })
	return em
}

// request is CloudFormation's request for the DatabaseSchema resource.
func request(typ cfn.RequestType, release string, props map[string]any) cfn.Event {
	p := map[string]any{
		"ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:inbox-MigrationFunction-AbC123",
		"Auth":         "password", "Release": release,
		"ReceiverSecretArn":     lambdalocal.SecretARN(migrate.RoleReceiver),
		"ProcessorSecretArn":    lambdalocal.SecretARN(migrate.RoleProcessor),
		"ArchiverSecretArn":     lambdalocal.SecretARN(migrate.RoleArchiver),
		"OperatorReadSecretArn": lambdalocal.SecretARN(migrate.RoleOperatorRead),
		"OperatorSecretArn":     lambdalocal.SecretARN(migrate.RoleOperator),
		// As the template sends it in create mode (not read).
		"NetworkPath": []any{"vpce-0s3", "rtb-0a", "rtbassoc-0a", "rtbassoc-0b", "vpce-0sm", "sg-0e", "subnet-0a", "subnet-0b", "sg-0m"},
	}
	for k, v := range props {
		p[k] = v
	}
	ev := cfn.Event{
		RequestType: typ, RequestID: "req-" + strings.ToLower(string(typ)), ResourceType: "Custom::DatabaseSchema",
		LogicalResourceID: "DatabaseSchema", StackID: stackID, ResourceProperties: p,
	}
	if typ != cfn.RequestCreate {
		ev.PhysicalResourceID = "webhook-inbox-schema"
	}
	return ev
}

// body is the exact answer CloudFormation must get.
func body(status, reason, requestID, data string) string {
	r, _ := json.Marshal(reason)
	s := fmt.Sprintf(`{"Status":%q,"Reason":%s,"PhysicalResourceId":"webhook-inbox-schema","StackId":%q,"RequestId":%q,"LogicalResourceId":"DatabaseSchema","NoEcho":false`,
		status, r, stackID, requestID)
	if data != "" {
		s += `,"Data":` + data
	}
	return s + "}"
}

// invoke sends req and checks that the answer went out as the pre-signed
// URL wants it, and that the function returned normally after it.
func invoke(t *testing.T, em *lambdalocal.Emulator, req cfn.Event) string {
	t.Helper()
	a, _, err := lambdalocal.InvokeCustomResource(context.Background(), em, req)
	if err != nil {
		t.Fatalf("%s: %v", req.RequestType, err)
	}
	if a.Method != "PUT" || len(a.ContentType) != 1 || a.ContentType[0] != "" || a.ContentLength != int64(len(a.Body)) || len(a.Body) > 4096 {
		t.Fatalf("%s answered with %s, Content-Type %q, Content-Length %d for %d bytes", req.RequestType, a.Method, a.ContentType, a.ContentLength, len(a.Body))
	}
	return string(a.Body)
}

func putRoleSecrets(s *localsecrets.Server, gen string) map[string]string {
	pw := map[string]string{}
	for _, role := range migrate.FunctionRoles() {
		pw[role] = role + "-" + gen + "-Zx9!q"
		doc, _ := json.Marshal(map[string]string{"username": role, "password": pw[role]})
		s.Put(lambdalocal.SecretARN(role), string(doc))
	}
	return pw
}

func withUser(dbURL, user, password string) string {
	u, _ := url.Parse(dbURL)
	u.User = url.UserPassword(user, password)
	return u.String()
}

// TestMigrationFunctionUnderTheEmulator: the migration function's real
// bootstrap, built by its Makefile target, run under the Runtime Interface
// Emulator, answers CloudFormation's Create, Update and Delete for the
// DatabaseSchema resource against a real Postgres that checks passwords,
// reading its own admin secret and the roles' secrets through its real AWS
// SDK client (from a local Secrets Manager), and PUTs exactly the documented
// answer to a local stand-in of the pre-signed ResponseURL; failures answer
// FAILED, and the function always returns normally after answering.
func TestMigrationFunctionUnderTheEmulator(t *testing.T) {
	tier.Heavy(t, "builds the migration function and runs it under the emulator")
	ctx := context.Background()
	root, err := pinnedtools.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rie, err := pinnedtools.Tool(ctx, "aws-lambda-rie", "AWS_LAMBDA_RIE")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bins, err := lambdalocal.Build(ctx, root, dir, []string{"MigrationFunction"})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := localsecrets.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer secrets.Close()
	m := &migrator{t: t, rie: rie, bin: bins["MigrationFunction"], dir: dir, secrets: secrets}

	// A first deploy: an empty database on a server that checks passwords;
	// the admin's secret holds a URL, the roles' their generated passwords.
	cluster := pgtest.Cluster(t, pgtest.Passwords())
	dbURL := pgtest.EmptyURL(t, cluster)
	// The master secret always holds a password, which the local server
	// (trusting postgres) does not check.
	admin, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	admin.User = url.UserPassword(admin.User.Username(), "master-password")
	secrets.Put(adminARN, admin.String())
	passwords := putRoleSecrets(secrets, "one")
	em := m.start("deploy", 2*time.Minute, "DATABASE_SECRET_ARN="+adminARN)

	want := latest(t, handlers.Schemas)
	version := int(want.Core)
	ok := fmt.Sprintf("schema at version %s; roles webhook_receiver, webhook_processor, webhook_archiver, webhook_operator_read, webhook_operator set up (password)", want)
	data := fmt.Sprintf(`{"SchemaVersion":"%d"}`, version)
	if got, want := invoke(t, em, request(cfn.RequestCreate, "1", nil)), body("SUCCESS", ok, "req-create", data); got != want {
		t.Fatalf("Create answered\n%s\nwant\n%s\n%s", got, want, tailOf(em))
	}

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The schema at its latest version, core and handlers.
	var core int
	if err := conn.QueryRow(ctx, `SELECT max(version_id) FROM goose_db_version`).Scan(&core); err != nil || core != version {
		t.Fatalf("core version %d, want %d (%v)", core, version, err)
	}
	for _, tb := range handlers.Schemas {
		var v int64
		if err := conn.QueryRow(ctx, `SELECT max(version_id) FROM `+pgx.Identifier{tb.VersionTable}.Sanitize()).Scan(&v); err != nil || v != want.Handlers[tb.Name] {
			t.Fatalf("%s version %d, want %d (%v)", tb.Name, v, want.Handlers[tb.Name], err)
		}
	}
	// The roles with their grants, logging in with their secrets'
	// passwords and no other, and refused DDL.
	checkGrants(t, conn)
	checkLogins(t, dbURL, passwords, nil)

	// The next deploy, after a rotation of the roles' secrets.
	old := passwords
	passwords = putRoleSecrets(secrets, "two")
	if got, want := invoke(t, em, request(cfn.RequestUpdate, "2", nil)), body("SUCCESS", ok, "req-update", data); got != want {
		t.Fatalf("Update answered\n%s\nwant\n%s", got, want)
	}
	checkLogins(t, dbURL, passwords, old)

	// Delete changes nothing.
	before := snapshot(t, conn)
	if got, want := invoke(t, em, request(cfn.RequestDelete, "2", nil)), body("SUCCESS", "nothing deleted: the database, its data and its roles outlive the stack", "req-delete", ""); got != want {
		t.Fatalf("Delete answered\n%s\nwant\n%s", got, want)
	}
	if after := snapshot(t, conn); after != before {
		t.Fatalf("Delete changed the database:\n%s\n%s", before, after)
	}
	checkLogins(t, dbURL, passwords, nil)

	// Failures answer FAILED.
	// A migration that fails: a table in the way on another first deploy.
	blocked := pgtest.EmptyURL(t, cluster)
	if err := execOn(ctx, blocked, `CREATE TABLE webhook_events (id int)`); err != nil {
		t.Fatal(err)
	}
	emBlocked := m.start("blocked", time.Minute, "DATABASE_URL="+blocked)
	if got, want := invoke(t, emBlocked, request(cfn.RequestCreate, "1", nil)),
		body("FAILED", `Create failed: apply migrations: partial migration error (type:sql,version:1): ERROR: relation "webhook_events" already exists (SQLSTATE 42P07)`, "req-create", ""); got != want {
		t.Fatalf("a failing migration answered\n%s\nwant\n%s", got, want)
	}
	// A database it cannot reach; Delete still succeeds there.
	emDown := m.start("down", time.Minute, "DATABASE_URL=postgres://postgres:admin-pw-Qq7@127.0.0.1:1/inbox?sslmode=disable")
	got := invoke(t, emDown, request(cfn.RequestCreate, "1", nil))
	var resp struct{ Status, Reason string }
	if err := json.Unmarshal([]byte(got), &resp); err != nil || resp.Status != "FAILED" ||
		!strings.HasPrefix(resp.Reason, "Create failed: ") || !strings.Contains(resp.Reason, "127.0.0.1") || strings.Contains(got, "admin-pw-Qq7") {
		t.Fatalf("an unreachable database answered %s", got)
	}
	if got, want := invoke(t, emDown, request(cfn.RequestDelete, "1", nil)), body("SUCCESS", "nothing deleted: the database, its data and its roles outlive the stack", "req-delete", ""); got != want {
		t.Fatalf("Delete without a database answered\n%s\nwant\n%s", got, want)
	}
	// A role's secret that is not there.
	if got, want := invoke(t, em, request(cfn.RequestUpdate, "3", map[string]any{"ArchiverSecretArn": adminARN + "-gone"})), "ResourceNotFoundException"; !strings.Contains(got, `"Status":"FAILED"`) || !strings.Contains(got, want) {
		t.Fatalf("a missing secret answered %s", got)
	}
	// A start-up that failed (no database configured) still answers.
	emBroken := m.start("broken", time.Minute)
	if got, want := invoke(t, emBroken, request(cfn.RequestCreate, "1", nil)),
		body("FAILED", "Create failed: the migration function did not start: DATABASE_URL (or DATABASE_SECRET_ARN) is not set, nor DATABASE_IAM_AUTH=true with DATABASE_USER and DATABASE_HOST", "req-create", ""); got != want {
		t.Fatalf("a broken start-up answered\n%s\nwant\n%s", got, want)
	}
	// A migration that cannot finish before the function's timeout (another
	// migrator holds the lock) is given up in time to answer.
	hold, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close(ctx)
	if _, err := hold.Exec(ctx, `SELECT pg_advisory_lock($1)`, lock.DefaultLockID); err != nil {
		t.Fatal(err)
	}
	emShort := m.start("short", 4*time.Second, "DATABASE_SECRET_ARN="+adminARN)
	start := time.Now()
	got = invoke(t, emShort, request(cfn.RequestUpdate, "4", nil))
	if took := time.Since(start); !strings.Contains(got, `"Status":"FAILED"`) || !strings.Contains(got, "ran out of time") || took > 4*time.Second {
		t.Fatalf("a migration past the deadline answered after %v: %s", took, got)
	}

	// No password in any log line.
	for _, name := range []string{"deploy", "blocked", "down", "broken", "short"} {
		b, err := os.ReadFile(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		for _, pw := range append(values(passwords), append(values(old), "admin-pw-Qq7")...) {
			if strings.Contains(string(b), pw) {
				t.Fatalf("the %s log holds a password", name)
			}
		}
	}
}

func values(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func tailOf(em *lambdalocal.Emulator) string {
	b, _ := os.ReadFile(em.LogPath())
	return string(b)
}

func execOn(ctx context.Context, dbURL, stmt string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, stmt)
	return err
}

// latest is the schema the migrations of the core and of schemas reach,
// read from their files: the highest version of each, not the count, since
// versions may leave gaps. The migration function compiled for the tests
// migrates the application's handlers.Schemas, whatever a fork declares.
func latest(t *testing.T, schemas []processor.HandlerSchema) dbschema.Versions {
	t.Helper()
	highest := func(fsys fs.FS, dir string) int64 {
		files, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
		if err != nil || len(files) == 0 {
			t.Fatalf("migrations in %s: %v, %v", dir, files, err)
		}
		var top int64
		for _, f := range files {
			v, err := strconv.ParseInt(strings.SplitN(path.Base(f), "_", 2)[0], 10, 64)
			if err != nil {
				t.Fatalf("migration %s: %v", f, err)
			}
			top = max(top, v)
		}
		return top
	}
	v := dbschema.Versions{Core: highest(migrate.Migrations(), "."), Handlers: map[string]int64{}}
	for _, tb := range schemas {
		v.Handlers[tb.Name] = highest(tb.Migrations, tb.Dir)
	}
	return v
}

// checkGrants checks every grant dbschema declares, in the catalogue.
func checkGrants(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	for _, g := range dbschema.Grants(handlers.Schemas) {
		for _, p := range g.Privileges {
			var ok bool
			var err error
			switch {
			case len(g.Columns) > 0:
				for _, c := range g.Columns {
					if err = conn.QueryRow(context.Background(), `SELECT has_column_privilege($1, $2, $3, $4)`, g.Role, g.On, c, p).Scan(&ok); err != nil || !ok {
						break
					}
				}
			case strings.HasSuffix(g.On, "_seq"):
				err = conn.QueryRow(context.Background(), `SELECT has_sequence_privilege($1, $2, $3)`, g.Role, g.On, p).Scan(&ok)
			default:
				err = conn.QueryRow(context.Background(), `SELECT has_table_privilege($1, $2, $3)`, g.Role, g.On, p).Scan(&ok)
			}
			if err != nil || !ok {
				t.Errorf("%s lacks %s on %s %v (%v)", g.Role, p, g.On, g.Columns, err)
			}
		}
	}
	for _, role := range migrate.FunctionRoles() {
		var body bool
		if err := conn.QueryRow(context.Background(), `SELECT has_column_privilege($1, 'webhook_events', 'body', 'SELECT')`, role).Scan(&body); err != nil || body != (role != migrate.RoleReceiver) {
			t.Errorf("%s may read bodies: %v (%v)", role, body, err)
		}
	}
}

// checkLogins checks that each role logs in with its password, not with
// an old one, and is refused DDL.
func checkLogins(t *testing.T, dbURL string, passwords, old map[string]string) {
	t.Helper()
	ctx := context.Background()
	for _, role := range migrate.FunctionRoles() {
		conn, err := pgx.Connect(ctx, withUser(dbURL, role, passwords[role]))
		if err != nil {
			t.Errorf("%s with its secret's password: %v", role, err)
			continue
		}
		_, err = conn.Exec(ctx, `DROP TABLE webhook_events`)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s: DROP TABLE: %v, want SQLSTATE 42501", role, err)
		}
		conn.Close(ctx)
		for _, pw := range []string{"wrong", old[role]} {
			if pw == "" {
				continue
			}
			_, err := pgx.Connect(ctx, withUser(dbURL, role, pw))
			if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
				t.Errorf("%s with a wrong or old password: %v, want SQLSTATE 28P01", role, err)
			}
		}
	}
}

// snapshot is what a Delete must leave as it found.
func snapshot(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var out string
	if err := conn.QueryRow(context.Background(), `SELECT concat_ws(' | ',
		(SELECT string_agg(relname || ':' || coalesce(relacl::text, ''), ',' ORDER BY relname) FROM pg_class WHERE relnamespace = current_schema()::regnamespace),
		(SELECT string_agg(rolname || ':' || rolcanlogin || ':' || coalesce(rolpassword, ''), ',' ORDER BY rolname) FROM pg_authid WHERE rolname LIKE 'webhook\_%'),
		(SELECT count(*) FROM goose_db_version)::text)`).Scan(&out); err != nil {
		t.Fatal(err)
	}
	return out
}
