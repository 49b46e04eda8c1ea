package storage_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// login is the credentials side of the pool's boundary, driven by the
// test: Login gives the password the test set, and Refused records what
// the server refused. The real ones (package secrets) are tested there.
type login struct {
	mu       sync.Mutex
	user     string // "" keeps the URL's
	password string
	err      error
	logins   []string // host:port/user of each Login
	refused  []string
}

func (l *login) Login(_ context.Context, host string, port uint16, user string) (string, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.logins = append(l.logins, fmt.Sprintf("%s:%d/%s", host, port, user))
	if l.user != "" {
		user = l.user
	}
	return user, l.password, l.err
}

func (l *login) Refused(password string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refused = append(l.refused, password)
}

func (l *login) set(password string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.password = password
}

func (l *login) counts() (logins, refused int, last string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.refused) > 0 {
		last = l.refused[len(l.refused)-1]
	}
	return len(l.logins), len(l.refused), last
}

// TestCredentialsLogEachNewConnectionIn: Login is asked once per new
// connection, with the endpoint dialled and the URL's user, and its user
// and password are the ones the connection uses; a Login that fails makes
// no connection and says so.
func TestCredentialsLogEachNewConnectionIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	creds := &login{password: "ignored-by-trust"}
	pool, err := storage.PoolConfig{URL: dbURL, Credentials: creds}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var user string
	if err := pool.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := creds.counts(); n != 1 || user != "postgres" || !strings.HasPrefix(creds.logins[0], "127.0.0.1:") {
		t.Fatalf("logins = %v, current_user = %q; want one, for 127.0.0.1 as postgres", creds.logins, user)
	}
	if err := pool.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := creds.counts(); n != 1 {
		t.Fatalf("logins = %d after reusing the connection, want 1", n)
	}

	failing := &login{err: errors.New("no credentials today")}
	pool2, err := storage.PoolConfig{URL: dbURL, Credentials: failing}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pool2.Close()
	if err := pool2.Ping(ctx); err == nil || !strings.Contains(err.Error(), "database credentials: no credentials today") {
		t.Fatalf("ping with failing credentials: %v", err)
	}
	if _, refused, _ := failing.counts(); refused != 0 {
		t.Fatal("Refused called for a connection never attempted")
	}
}

// TestCredentialsAcrossARotation, on a server that checks passwords: a
// session logged in with the old password keeps working after ALTER ROLE
// (PostgreSQL keeps it, and the pool makes no new connection), a new one
// with the old password is refused and the credentials are told which
// password was refused, and the next connection uses the new one. A
// failure that is not about the password tells them nothing.
func TestCredentialsAcrossARotation(t *testing.T) {
	tier.Heavy(t, "starts a cluster of its own")
	t.Parallel()
	ctx := context.Background()
	c := pgtest.Cluster(t, pgtest.Passwords())
	admin := pgtest.MigratedURL(t, c)
	role := pgtest.LoginRole(t, admin, "old-password")
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	creds := &login{password: "old-password"}
	pool, err := storage.PoolConfig{URL: u.String(), MaxConns: 1, Credentials: creds}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	query := func(p *pgxpool.Pool) error {
		var who string
		err := p.QueryRow(ctx, "SELECT current_user").Scan(&who)
		if err == nil && who != role {
			t.Fatalf("connected as %s, want %s", who, role)
		}
		return err
	}
	if err := query(pool); err != nil {
		t.Fatal(err)
	}

	pgtest.SetPassword(t, admin, role, "new-password")
	if err := query(pool); err != nil {
		t.Fatalf("the session made with the old password, after the change: %v", err)
	}
	if n := pool.Stat().NewConnsCount(); n != 1 {
		t.Fatalf("the pool made %d connections; the first one should still serve", n)
	}
	if _, refused, _ := creds.counts(); refused != 0 {
		t.Fatal("a refusal reported while nothing was refused")
	}

	// The session ends (a failover, a proxy's idle timeout): the pool logs
	// in again, with the password the credentials still hold.
	if n := pgtest.EndSessions(t, admin, role); n != 1 {
		t.Fatalf("ended %d sessions, want 1", n)
	}
	var authErr error
	for range 3 { // the first query may meet the ended session first
		if authErr = query(pool); storage.IsAuthFailure(authErr) {
			break
		}
	}
	if !storage.IsAuthFailure(authErr) {
		t.Fatalf("a new connection with the old password: %v, want an authentication failure", authErr)
	}
	if _, refused, last := creds.counts(); refused != 1 || last != "old-password" {
		t.Fatalf("refusals = %d (last %q), want 1 of the old password", refused, last)
	}

	creds.set("new-password")
	if err := query(pool); err != nil {
		t.Fatalf("with the new password: %v", err)
	}

	// No such database: the server answers, but not about the password.
	u.Path = "/no_such_database"
	other := &login{password: "new-password"}
	pool2, err := storage.PoolConfig{URL: u.String(), Credentials: other}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pool2.Close()
	if err := pool2.Ping(ctx); err == nil || storage.IsAuthFailure(err) {
		t.Fatalf("ping of a missing database: %v", err)
	}
	if _, refused, _ := other.counts(); refused != 0 {
		t.Fatal("a missing database was reported as a refused password")
	}
}
