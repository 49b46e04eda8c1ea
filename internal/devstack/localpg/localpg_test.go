package localpg_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localpg"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
)

// start starts a cluster or skips when the machine has no server binaries,
// so the package's tests stay green on machines without PostgreSQL.
func start(t *testing.T, opts localpg.Options) *localpg.Cluster {
	t.Helper()
	if _, err := localpg.BinDir(); err != nil {
		t.Skip(err)
	}
	begin := time.Now()
	c, err := localpg.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster started on port %d in %v", c.Port(), time.Since(begin))
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func connect(ctx context.Context, t *testing.T, c *localpg.Cluster) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestLifecycle(t *testing.T) {
	ctx := t.Context()
	c := start(t, localpg.Options{MaxConnections: 300})

	conn := connect(ctx, t, c)
	var user, maxConn string
	if err := conn.QueryRow(ctx, "SELECT current_user, current_setting('max_connections')").Scan(&user, &maxConn); err != nil {
		t.Fatal(err)
	}
	if user != "postgres" || maxConn != "300" {
		t.Errorf("current_user = %q, max_connections = %s; want postgres, 300", user, maxConn)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}

	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Error("ping after Stop succeeded on the open connection")
	}
	if _, err := pgx.Connect(ctx, c.URL("postgres")); err == nil {
		t.Error("connect after Stop succeeded")
	}

	port := c.Port()
	begin := time.Now()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted in %v", time.Since(begin))
	if c.Port() != port {
		t.Errorf("port changed across restart: %d, then %d", port, c.Port())
	}
	var v int
	if err := connect(ctx, t, c).QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after restart: v=%d, err=%v; want 42, nil", v, err)
	}

	dir := c.Dir()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster folder %s still there after Close (stat: %v)", dir, err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.Start(ctx); err == nil {
		t.Error("Start after Close succeeded")
	}
}

// TestPasswords: with Options.Passwords a role logs in over TCP with its
// password and no other (a wrong one is refused with SQLSTATE 28P01, as
// RDS refuses it), and postgres stays trusted; without it, the default,
// every role is trusted whatever it sends.
func TestPasswords(t *testing.T) {
	tier.Heavy(t, "starts two clusters")
	ctx := t.Context()
	for _, passwords := range []bool{false, true} {
		c := start(t, localpg.Options{Passwords: passwords})
		// postgres connects without a password either way.
		if _, err := connect(ctx, t, c).Exec(ctx, "CREATE ROLE app LOGIN PASSWORD 'right'"); err != nil {
			t.Fatal(err)
		}
		as := func(password string) error {
			u, err := url.Parse(c.URL("postgres"))
			if err != nil {
				t.Fatal(err)
			}
			u.User = url.UserPassword("app", password)
			conn, err := pgx.Connect(ctx, u.String())
			if err == nil {
				conn.Close(ctx)
			}
			return err
		}
		if err := as("right"); err != nil {
			t.Errorf("passwords=%v: the right password: %v", passwords, err)
		}
		err := as("wrong")
		var pgErr *pgconn.PgError
		switch {
		case !passwords && err != nil:
			t.Errorf("the default cluster refused a password: %v", err)
		case passwords && (!errors.As(err, &pgErr) || pgErr.Code != "28P01"):
			t.Errorf("a wrong password: %v, want SQLSTATE 28P01", err)
		}
	}
}

// TestKill checks that an immediate shutdown keeps committed data: outage
// tests rely on it to simulate a crash.
func TestKill(t *testing.T) {
	tier.Heavy(t, "kills a PostgreSQL server")
	ctx := t.Context()
	c := start(t, localpg.Options{})
	if _, err := connect(ctx, t, c).Exec(ctx, "CREATE TABLE kept AS SELECT 7 AS v"); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := connect(ctx, t, c).QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 7 {
		t.Fatalf("after crash recovery: v=%d, err=%v; want 7, nil", v, err)
	}
}

// TestDiedBehindBack checks that Start and Close cope with a server that
// crashed without this package knowing: its PID file stays behind.
func TestDiedBehindBack(t *testing.T) {
	tier.Heavy(t, "kills a PostgreSQL server")
	ctx := t.Context()
	c := start(t, localpg.Options{})
	b, err := os.ReadFile(filepath.Join(c.Dir(), "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.Fields(string(b))[0])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The postmaster stays a zombie until init reaps it, since pg_ctl,
	// its parent, has exited.
	begin := time.Now()
	if reaped, _ := poll.Wait(10*time.Second, func() (bool, string) { return syscall.Kill(pid, 0) != nil, "" }); !reaped {
		t.Skip("init has not reaped the killed postmaster after 10s")
	}
	t.Logf("killed postmaster reaped after %v", time.Since(begin))
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	connect(ctx, t, c)
	if err := c.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	dir := c.Dir()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster folder %s still there after Close (stat: %v)", dir, err)
	}
}

// TestDirReused checks the dev stack's case: a given folder outlives Close
// and a later Start finds the data in it.
func TestDirReused(t *testing.T) {
	tier.Heavy(t, "starts a cluster twice")
	ctx := t.Context()
	dir := clusterDir(t)
	c := start(t, localpg.Options{Dir: dir})
	if _, err := connect(ctx, t, c).Exec(ctx, "CREATE TABLE kept AS SELECT 1 AS v"); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		t.Fatalf("data folder gone after Close of a given Dir: %v", err)
	}

	c = start(t, localpg.Options{Dir: dir})
	var v int
	if err := connect(ctx, t, c).QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 1 {
		t.Fatalf("after reopening: v=%d, err=%v; want 1, nil", v, err)
	}
}

// clusterDir is a folder for a cluster of a given Dir, reachable by the
// server's user.
func clusterDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return filepath.Join(t.TempDir(), "pg")
	}
	// t.TempDir may sit under a root-only TMPDIR; the server user must
	// reach the folder.
	base, err := os.MkdirTemp("/tmp", "localpg_test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	return filepath.Join(base, "pg")
}

// TestPortRemembered checks the dev stack's stable address: a cluster of
// a given Dir starts again on the port it had, and when another process
// holds that port it starts on a fresh one and says so (PortMoved), then
// keeps the new one.
func TestPortRemembered(t *testing.T) {
	tier.Heavy(t, "starts a cluster three times")
	t.Parallel()
	ctx := t.Context()
	dir := clusterDir(t)
	c := start(t, localpg.Options{Dir: dir})
	first := c.Port()
	if c.PortMoved() != 0 {
		t.Errorf("first start: PortMoved = %d, want 0", c.PortMoved())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c = start(t, localpg.Options{Dir: dir})
	if c.Port() != first || c.PortMoved() != 0 {
		t.Fatalf("restarted on port %d (moved from %d), want %d again", c.Port(), c.PortMoved(), first)
	}
	connect(ctx, t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// Someone else takes the port while the cluster is down.
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(first)))
	if err != nil {
		t.Skipf("port %d taken by another process meanwhile: %v", first, err)
	}
	defer l.Close()
	c = start(t, localpg.Options{Dir: dir})
	if c.Port() == first || c.PortMoved() != first {
		t.Fatalf("with port %d taken: started on %d, PortMoved %d", first, c.Port(), c.PortMoved())
	}
	connect(ctx, t, c)
	second := c.Port()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	c = start(t, localpg.Options{Dir: dir})
	if c.Port() != second {
		t.Errorf("after the move: started on %d, want the new port %d", c.Port(), second)
	}
}

// TestPortTaken checks that a fixed port already in use fails with the
// server's reason rather than hanging or starting elsewhere.
func TestPortTaken(t *testing.T) {
	if _, err := localpg.BinDir(); err != nil {
		t.Skip(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	c, err := localpg.Start(t.Context(), localpg.Options{Port: port})
	if err == nil {
		c.Close()
		t.Fatalf("Start on taken port %d succeeded", port)
	}
	t.Logf("error (expected): %v", err)
}

// TestStaleReaped checks that a cluster whose creating process died is
// stopped and removed by the next Start.
func TestStaleReaped(t *testing.T) {
	tier.Heavy(t, "kills a PostgreSQL server")
	if _, err := localpg.BinDir(); err != nil {
		t.Skip(err)
	}
	if os.Getenv("LOCALPG_ORPHAN") != "" {
		// Child: start a cluster, print its folder and die without Close.
		c, err := localpg.Start(context.Background(), localpg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString(c.Dir() + "\n" + strconv.Itoa(c.Port()) + "\n")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStaleReaped$")
	cmd.Env = append(os.Environ(), "LOCALPG_ORPHAN=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	fields := strings.Fields(string(out))
	if len(fields) < 2 {
		t.Fatalf("child printed %q, want folder and port", out)
	}
	dir := fields[0]
	port, _ := strconv.Atoi(fields[1])
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("orphan folder %q: %v", dir, err)
	}
	orphan, err := pgx.Connect(t.Context(), "postgres://postgres@127.0.0.1:"+strconv.Itoa(port)+"/postgres?sslmode=disable")
	if err != nil {
		t.Fatalf("orphan server not running: %v", err)
	}
	orphan.Close(t.Context())

	start(t, localpg.Options{})
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("orphan folder %s still there (stat: %v)", dir, err)
	}
	if conn, err := pgx.Connect(t.Context(), "postgres://postgres@127.0.0.1:"+strconv.Itoa(port)+"/postgres?sslmode=disable&connect_timeout=2"); err == nil {
		conn.Close(t.Context())
		t.Error("orphan server still accepts connections")
	}
}

func TestBinDirEnv(t *testing.T) {
	t.Setenv("PG_BINDIR", t.TempDir())
	_, err := localpg.BinDir()
	if !errors.Is(err, localpg.ErrNoServerBinaries) {
		t.Fatalf("BinDir with an empty PG_BINDIR: %v, want ErrNoServerBinaries", err)
	}
}

func BenchmarkStart(b *testing.B) {
	if _, err := localpg.BinDir(); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		c, err := localpg.Start(b.Context(), localpg.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSuperuserPassword: with Options.SuperuserPassword the superuser
// logs in over TCP with the generated password only (any local user could
// otherwise connect as postgres and run COPY ... TO PROGRAM), which URL
// carries and the cluster folder keeps (mode 0600) for the next Start; a
// cluster created before, whose postgres was trusted, gets it too.
func TestSuperuserPassword(t *testing.T) {
	tier.Heavy(t, "starts a cluster twice")
	t.Parallel()
	ctx := t.Context()
	dir := clusterDir(t)
	// A dev cluster as make dev left it before: postgres trusted.
	c := start(t, localpg.Options{Dir: dir, Passwords: true})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		c := start(t, localpg.Options{Dir: dir, Passwords: true, SuperuserPassword: true})
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err != nil {
			t.Fatalf("run %d: URL: %v", run, err)
		}
		conn.Close(ctx)
		u, err := url.Parse(c.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		pw, ok := u.User.Password()
		if !ok || len(pw) < 20 {
			t.Fatalf("run %d: URL carries no password of at least 20 characters", run)
		}
		for _, wrong := range []*url.Userinfo{url.User("postgres"), url.UserPassword("postgres", "wrong")} {
			u.User = wrong
			if conn, err := pgx.Connect(ctx, u.String()); !refusedPassword(err) {
				if err == nil {
					conn.Close(ctx)
				}
				_, with := wrong.Password()
				t.Errorf("run %d: postgres with a wrong password (or none: %v): %v, want it refused", run, !with, err)
			}
		}
		fi, err := os.Stat(filepath.Join(c.Dir(), "superuser-password"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("run %d: the password file: %v %v, want mode 0600", run, fi, err)
		}
		if b, err := os.ReadFile(c.LogPath()); err != nil || strings.Contains(string(b), pw) {
			t.Errorf("run %d: the server log holds the password (or cannot be read: %v)", run, err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// refusedPassword: err is the server refusing a login for its password
// (a wrong one, or none where one is needed).
func refusedPassword(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "28P01"
	}
	return err != nil && strings.Contains(err.Error(), "password")
}
