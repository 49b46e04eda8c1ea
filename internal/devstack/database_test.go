package devstack_test

import (
	"bytes"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localpg"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
)

// TestStartDatabaseNeedsTheSuperusersPassword: make dev's own cluster
// (StartDatabase) refuses the superuser without its password, which the
// URL it returns (the stack file's, which webhookctl reads) carries and
// its start-up lines do not show.
func TestStartDatabaseNeedsTheSuperusersPassword(t *testing.T) {
	tier.Heavy(t, "starts the dev stack's cluster")
	t.Parallel()
	if _, err := localpg.BinDir(); err != nil {
		t.Skip(err)
	}
	ctx := t.Context()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		// The server's user must reach the folder.
		base, err := os.MkdirTemp("/tmp", "devstack_test-")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(base) })
		dir = base
	}
	var out bytes.Buffer
	dbURL, stop, err := devstack.StartDatabase(ctx, &out, filepath.Join(dir, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("the URL returned: %v", err)
	}
	conn.Close(ctx)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	if pw == "" || strings.Contains(out.String(), pw) {
		t.Errorf("the password is empty or printed:\n%s", out.String())
	}
	u.User = url.User("postgres")
	conn, err = pgx.Connect(ctx, u.String())
	var pgErr *pgconn.PgError
	if err == nil {
		conn.Close(ctx)
		t.Fatal("postgres without its password logged in")
	}
	// The server's refusal is 28P01; a client that could not even offer a
	// password says so in words (localpg's tests judge it the same way).
	if errors.As(err, &pgErr) {
		if pgErr.Code != "28P01" {
			t.Fatalf("postgres without its password: SQLSTATE %s (%v), want 28P01, the password refused", pgErr.Code, err)
		}
	} else if !strings.Contains(err.Error(), "password") {
		t.Fatalf("postgres without its password: %v, want the password refused", err)
	}
}
