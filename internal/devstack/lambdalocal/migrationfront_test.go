package lambdalocal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localsecrets"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/pinnedtools"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
)

// TestMigrationFrontUnderTheEmulator: the migration function's real
// bootstrap, built by its two Makefile targets, runs twice under the
// Runtime Interface Emulator, as the profiles deploy it: the front
// (MIGRATOR_MODE=front, outside the VPC, the resource's ServiceToken)
// reads the admin secret and the roles' secrets from a local Secrets
// Manager and invokes, through its real AWS SDK Lambda client pointed at
// the other emulator (FunctionName "function"), the function in apply
// mode (MIGRATOR_MODE=apply, inside the VPC: it knows where the database
// is, never how to log in, and reads no secret). Create, Update and Delete
// answer exactly what the direct mode answers, against a real Postgres
// that checks passwords. Then the stack is torn down as in create mode:
// the apply function and every AWS endpoint are gone, and the front's
// Delete still answers SUCCESS at once. Each mode refuses the other's
// events, and no password reaches a log.
func TestMigrationFrontUnderTheEmulator(t *testing.T) {
	tier.Heavy(t, "builds the migration function and runs it twice under the emulator")
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
	bins, err := lambdalocal.Build(ctx, root, dir, []string{"MigrationFunction", "MigrationFrontFunction"})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := localsecrets.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer secrets.Close()

	// A first deploy's empty database on a server that checks passwords;
	// the admin secret as RDS manages it: a user and a password, no host.
	cluster := pgtest.Cluster(t, pgtest.Passwords())
	dbURL := pgtest.EmptyURL(t, cluster)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	admin, _ := json.Marshal(map[string]string{"username": u.User.Username(), "password": "master-password-Qq7"})
	secrets.Put(adminARN, string(admin))
	passwords := putRoleSecrets(secrets, "one")

	start := func(name, bin string, timeout time.Duration, env ...string) *lambdalocal.Emulator {
		t.Helper()
		// The roles' authentication is the function's own (password,
		// unless env says iam), and the answer goes to the loopback.
		base := []string{"LOG_LEVEL=info", "MIGRATOR_LOCAL_RESPONSE_URL=true"}
		if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "MIGRATOR_ROLES_AUTH=") }) {
			base = append(base, "MIGRATOR_ROLES_AUTH=password")
		}
		em, err := lambdalocal.StartEmulator(ctx, lambdalocal.EmulatorOptions{
			Name: name, RIE: rie, Bootstrap: bin, Timeout: timeout, MemoryMB: 256,
			Env: append(base, env...), LogPath: filepath.Join(dir, name+".log"),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = em.Close() })
		return em
	}
	// The apply function: where the database is, from its environment (as
	// the template gives the cluster's endpoint); no Secrets Manager
	// endpoint at all.
	apply := start("MigrationFunction", bins["MigrationFunction"], time.Minute,
		"MIGRATOR_MODE=apply", "DATABASE_HOST="+u.Hostname(), "DATABASE_PORT="+u.Port(),
		"DATABASE_NAME="+strings.TrimPrefix(u.Path, "/"), "DATABASE_SSLMODE=disable", "DATABASE_IAM_AUTH=false")
	// The front: a longer timeout than the apply function's, its secrets,
	// and the apply function's Invoke API.
	frontEnv := append([]string{"MIGRATOR_MODE=front", "MIGRATOR_FUNCTION=function", "DATABASE_SECRET_ARN=" + adminARN,
		"AWS_ENDPOINT_URL_LAMBDA=" + apply.Endpoint()}, secrets.Env()...)
	front := start("MigrationFrontFunction", bins["MigrationFrontFunction"], 90*time.Second, frontEnv...)

	want := latest(t, handlers.Schemas)
	version := int(want.Core)
	ok := fmt.Sprintf("schema at version %s; roles webhook_receiver, webhook_processor, webhook_archiver, webhook_operator_read, webhook_operator set up (password)", want)
	data := fmt.Sprintf(`{"SchemaVersion":"%d"}`, version)
	if got, want := invoke(t, front, request(cfn.RequestCreate, "1", nil)), body("SUCCESS", ok, "req-create", data); got != want {
		t.Fatalf("Create answered\n%s\nwant\n%s\n%s\n%s", got, want, tailOf(front), tailOf(apply))
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	checkGrants(t, conn)
	checkLogins(t, dbURL, passwords, nil)

	// The next deploy, after a rotation of the roles' secrets.
	old := passwords
	passwords = putRoleSecrets(secrets, "two")
	if got, want := invoke(t, front, request(cfn.RequestUpdate, "2", nil)), body("SUCCESS", ok, "req-update", data); got != want {
		t.Fatalf("Update answered\n%s\nwant\n%s", got, want)
	}
	checkLogins(t, dbURL, passwords, old)
	// The front read the admin secret for each (the apply function never).
	if n := secrets.Reads(adminARN); n != 2 {
		t.Fatalf("the admin secret was read %d times, want 2 (Create, Update)", n)
	}

	// Delete changes nothing.
	before := snapshot(t, conn)
	if got, want := invoke(t, front, request(cfn.RequestDelete, "2", nil)), body("SUCCESS", "nothing deleted: the database, its data and its roles outlive the stack", "req-delete", ""); got != want {
		t.Fatalf("Delete answered\n%s\nwant\n%s", got, want)
	}
	if after := snapshot(t, conn); after != before {
		t.Fatalf("Delete changed the database:\n%s\n%s", before, after)
	}

	// A failure in the apply function comes back FAILED with its reason:
	// a migration in the way, on another first deploy.
	blocked := pgtest.EmptyURL(t, cluster)
	if err := execOn(ctx, blocked, `CREATE TABLE webhook_events (id int)`); err != nil {
		t.Fatal(err)
	}
	bu, _ := url.Parse(blocked)
	applyBlocked := start("MigrationFunction-blocked", bins["MigrationFunction"], time.Minute,
		"MIGRATOR_MODE=apply", "DATABASE_HOST="+bu.Hostname(), "DATABASE_PORT="+bu.Port(),
		"DATABASE_NAME="+strings.TrimPrefix(bu.Path, "/"), "DATABASE_SSLMODE=disable")
	frontBlocked := start("MigrationFrontFunction-blocked", bins["MigrationFrontFunction"], 90*time.Second,
		append(append([]string(nil), frontEnv...), "AWS_ENDPOINT_URL_LAMBDA="+applyBlocked.Endpoint())...)
	if got, want := invoke(t, frontBlocked, request(cfn.RequestCreate, "1", nil)),
		body("FAILED", `Create failed: apply migrations: partial migration error (type:sql,version:1): ERROR: relation "webhook_events" already exists (SQLSTATE 42P07)`, "req-create", ""); got != want {
		t.Fatalf("a failing migration answered\n%s\nwant\n%s", got, want)
	}

	// Each mode refuses the other's events: the apply function answers a
	// CloudFormation request FAILED (CloudFormation would otherwise wait
	// an hour) and fails; the front fails on a payload.
	a, _, err := lambdalocal.InvokeCustomResource(ctx, apply, request(cfn.RequestCreate, "3", nil))
	if got := string(a.Body); err == nil || !strings.Contains(err.Error(), "runs with MIGRATOR_MODE=apply") ||
		!strings.Contains(got, `"Status":"FAILED"`) || !strings.Contains(got, "runs with MIGRATOR_MODE=apply") {
		t.Fatalf("the apply function given CloudFormation's request answered %s (%v)", got, err)
	}
	if out, err := front.Invoke(ctx, []byte(`{"ApplyVersion":1,"RequestType":"Create","ResourceProperties":{"Auth":"iam"}}`)); err == nil ||
		!strings.Contains(err.Error(), "MIGRATOR_FUNCTION must name the migration function in apply mode") {
		t.Fatalf("the front given a payload: %s %v", out, err)
	}

	// The stack torn down in create mode: the apply function, its VPC and
	// every AWS endpoint are gone. Create cannot be done, and says why;
	// Delete is answered SUCCESS without them.
	_ = apply.Close()
	_ = secrets.Close()
	started := time.Now()
	if got, want := invoke(t, front, request(cfn.RequestDelete, "2", nil)), body("SUCCESS", "nothing deleted: the database, its data and its roles outlive the stack", "req-delete", ""); got != want {
		t.Fatalf("Delete with nothing reachable answered\n%s\nwant\n%s", got, want)
	}
	t.Logf("Delete answered in %v with the apply function and Secrets Manager gone", time.Since(started).Round(time.Millisecond))
	frontIAM := start("MigrationFrontFunction-alone", bins["MigrationFrontFunction"], 30*time.Second,
		"MIGRATOR_MODE=front", "MIGRATOR_ROLES_AUTH=iam", "MIGRATOR_FUNCTION=function", "AWS_ENDPOINT_URL_LAMBDA="+apply.Endpoint(),
		"AWS_ACCESS_KEY_ID=AKIDLOCAL", "AWS_SECRET_ACCESS_KEY=local")
	if got := invoke(t, frontIAM, request(cfn.RequestCreate, "4", map[string]any{"Auth": "iam"})); !strings.Contains(got, `"Status":"FAILED"`) ||
		!strings.Contains(got, "Create failed: could not invoke the migration function function") {
		t.Fatalf("Create with the apply function gone answered %s", got)
	}

	// No password in any log line.
	for _, name := range []string{"MigrationFunction", "MigrationFrontFunction", "MigrationFunction-blocked", "MigrationFrontFunction-blocked", "MigrationFrontFunction-alone"} {
		b, err := os.ReadFile(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		for _, pw := range append(values(passwords), append(values(old), "master-password-Qq7")...) {
			if strings.Contains(string(b), pw) {
				t.Fatalf("the %s log holds a password", name)
			}
		}
	}
}
