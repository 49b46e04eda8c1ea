package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/secretstest"
)

// runIn executes webhookctl with env as its whole environment, looking for
// a make dev from dir, and returns standard output and error apart.
func runIn(t *testing.T, dir string, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	ctx := withStackDir(withEnv(context.Background(), func(k string) string { return env[k] }), dir)
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// checkout returns a folder holding a stack file for pid and dbURL, and a
// folder below it, where an operator would run the command.
func fakeCheckout(t *testing.T, pid int, dbURL string) (sub string) {
	t.Helper()
	root := t.TempDir()
	err := checkout.WriteStack(filepath.Join(root, checkout.StackFile), checkout.Stack{PID: pid, Env: map[string]string{"DATABASE_URL": dbURL}})
	if err != nil {
		t.Fatal(err)
	}
	sub = filepath.Join(root, "docs", "sources")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	return sub
}

// withPassword adds a password to a URL of the test server, whose trust
// authentication ignores it.
func withPassword(url string) string {
	return strings.Replace(url, "postgres://postgres@", "postgres://postgres:hunter2@", 1)
}

// TestRunningDevStackIsUsed: with no database settings, a command uses the
// running make dev's database, found from a sub-folder, and says so on
// standard error, without the password.
func TestRunningDevStackIsUsed(t *testing.T) {
	t.Parallel()
	url := withPassword(pgtest.URL(t))
	dir := fakeCheckout(t, os.Getpid(), url)
	stdout, stderr, err := runIn(t, dir, nil, "migrate", "status")
	if err != nil || !strings.Contains(stdout, "applied") {
		t.Fatalf("migrate status on the dev stack: %v\n%s\n%s", err, stdout, stderr)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "using database postgres://postgres:xxxxx@127.0.0.1:") ||
		!strings.Contains(stderr, "of the running make dev") || !strings.Contains(stderr, checkout.StackFile) {
		t.Errorf("stderr = %q", stderr)
	}
	if strings.Contains(stdout+stderr, "hunter2") {
		t.Errorf("the password was printed:\n%s\n%s", stdout, stderr)
	}
}

// TestStaleDevStackIsIgnored: the file of a dev stack that died is not
// used.
func TestStaleDevStackIsIgnored(t *testing.T) {
	t.Parallel()
	dead := exec.Command(os.Args[0], "-test.run=^$")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	dir := fakeCheckout(t, dead.Process.Pid, pgtest.URL(t))
	_, stderr, err := runIn(t, dir, nil, "migrate", "status")
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL (or DATABASE_SECRET_ARN) is not set") ||
		!strings.Contains(err.Error(), "no make dev is running") {
		t.Fatalf("err = %v", err)
	}
	if stderr != "" {
		t.Errorf("stderr = %q", stderr)
	}
}

// TestExplicitDatabaseWins: DATABASE_URL is used as set, whatever stack
// runs, and so are the settings of IAM authentication (the test server's
// trust authentication takes the token as it would take any password).
func TestExplicitDatabaseWins(t *testing.T) {
	t.Parallel()
	dir := fakeCheckout(t, os.Getpid(), "postgres://nobody@127.0.0.1:1/nothing")
	dbURL := pgtest.URL(t)
	stdout, stderr, err := runIn(t, dir, map[string]string{"DATABASE_URL": dbURL}, "migrate", "status")
	if err != nil || !strings.Contains(stdout, "applied") || stderr != "" {
		t.Fatalf("migrate status with DATABASE_URL: %v\n%s\n%s", err, stdout, stderr)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	iam := map[string]string{
		"DATABASE_IAM_AUTH": "true", "DATABASE_USER": u.User.Username(), "DATABASE_HOST": u.Hostname(), "DATABASE_PORT": u.Port(),
		"DATABASE_NAME": strings.TrimPrefix(u.Path, "/"), "DATABASE_SSLMODE": "disable", "AWS_REGION": secretstest.Region,
	}
	stdout, stderr, err = runIn(t, dir, iam, "migrate", "status")
	if err != nil || !strings.Contains(stdout, "applied") || stderr != "" {
		t.Fatalf("migrate status with IAM authentication: %v\n%s\n%s", err, stdout, stderr)
	}
}
