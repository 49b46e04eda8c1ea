package pgtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestPoolMigrated(t *testing.T) {
	begin := time.Now()
	pool := pgtest.Pool(t)
	t.Logf("first Pool (server, template, migration, copy) took %v", time.Since(begin))
	var table *string
	if err := pool.QueryRow(t.Context(), "SELECT to_regclass('webhook_events')::text").Scan(&table); err != nil {
		t.Fatal(err)
	}
	if table == nil {
		t.Fatal("webhook_events does not exist in the test database")
	}
}

func TestPoolIsolated(t *testing.T) {
	ctx := t.Context()
	a, b := pgtest.Pool(t), pgtest.Pool(t)
	factory.Event(ctx, t, storage.New(a), &factory.EventOpts{Source: "p", EventID: "e1"})
	count := func(pool interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) int {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM webhook_events").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(a); n != 1 {
		t.Errorf("database a holds %d events, want 1", n)
	}
	if n := count(b); n != 0 {
		t.Errorf("database b holds %d events written to a, want 0", n)
	}
	// A third database after the write: the template itself stayed clean.
	if n := count(pgtest.Pool(t)); n != 0 {
		t.Errorf("a later database holds %d events, want 0", n)
	}
}

func TestPoolParallel(t *testing.T) {
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			begin := time.Now()
			pool := pgtest.Pool(t)
			t.Logf("Pool took %v", time.Since(begin))
			factory.Event(t.Context(), t, storage.New(pool), &factory.EventOpts{Source: "p", EventID: fmt.Sprint(i)})
			var n int
			if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM webhook_events").Scan(&n); err != nil || n != 1 {
				t.Fatalf("count = %d, err = %v; want 1, nil", n, err)
			}
		})
	}
}

// TestPoolConcurrent asks for many databases at the same instant, beyond
// what -parallel (GOMAXPROCS by default) lets TestPoolParallel do: subtests
// started from separate goroutines all run at once.
func TestPoolConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				var one int
				if err := pgtest.Pool(t).QueryRow(t.Context(), "SELECT 1 FROM webhook_events LIMIT 1").Scan(&one); !errors.Is(err, pgx.ErrNoRows) {
					t.Fatalf("query on an empty webhook_events: %v, want no rows", err)
				}
			})
		})
	}
	wg.Wait()
}

// TestDropped checks that a test's database is gone after its cleanup, even
// with a connection left open.
func TestDropped(t *testing.T) {
	var dbURL string
	t.Run("user", func(t *testing.T) {
		dbURL = pgtest.URL(t)
		conn, err := pgx.Connect(t.Context(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn // left open on purpose
	})
	if conn, err := pgx.Connect(t.Context(), dbURL); err == nil {
		conn.Close(t.Context())
		t.Errorf("database %s still accepts connections after the test", dbURL)
	}
}

// TestProcessesShareADatabaseURLServer: test processes running at once on
// the server DATABASE_URL names (as under webhookdev postgres) each get
// their own databases, and leave none behind when they end.
func TestProcessesShareADatabaseURLServer(t *testing.T) {
	tier.Heavy(t, "starts a cluster of its own and runs this package's tests again, twice at once")
	c := pgtest.Cluster(t)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			child := exec.Command(os.Args[0], "-test.run", "^TestPoolParallel$", "-test.count", "1")
			child.Env = append(os.Environ(), "DATABASE_URL="+c.URL("postgres"))
			if out, err := child.CombinedOutput(); err != nil {
				t.Errorf("process %d: %v\n%s", i, err, out)
			}
		})
	}
	wg.Wait()
	conn, err := pgx.Connect(t.Context(), c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var left []string
	if err := conn.QueryRow(t.Context(), `SELECT coalesce(array_agg(datname), '{}') FROM pg_database WHERE datname LIKE 'wi\_%'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("databases left on the shared server: %v", left)
	}
	// Roles stay (they belong to the server): the processes did use it.
	var roles int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_roles WHERE rolname = $1`, migrate.RoleReceiver).Scan(&roles); err != nil || roles != 1 {
		t.Errorf("role %s on the shared server: %d, %v; want 1", migrate.RoleReceiver, roles, err)
	}
}

func TestClusterOutage(t *testing.T) {
	tier.Heavy(t, "a database outage")
	ctx := t.Context()
	c := pgtest.Cluster(t)
	dbURL := pgtest.MigratedURL(t, c)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	factory.Event(ctx, t, storage.New(pool), &factory.EventOpts{Source: "p", EventID: "e1"})
	pool.Close()

	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if conn, err := pgx.Connect(ctx, dbURL); err == nil {
		conn.Close(ctx)
		t.Fatal("connected while the server is stopped")
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM webhook_events").Scan(&n); err != nil || n != 1 {
		t.Fatalf("after restart: count = %d, err = %v; want 1, nil", n, err)
	}
}

func BenchmarkPool(b *testing.B) {
	pgtest.Pool(b) // the first call pays for the server and the template
	for b.Loop() {
		pgtest.URL(b)
	}
}

// refused reports whether err is the server refusing a password.
func refused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "28P01"
}

// TestPasswordCluster: on a Passwords cluster a LoginRole logs in with its
// password only and may write the tables; SetPassword changes it for new
// sessions while the open one goes on, until EndSessions ends it.
func TestPasswordCluster(t *testing.T) {
	tier.Heavy(t, "starts a cluster of its own")
	t.Parallel()
	ctx := t.Context()
	c := pgtest.Cluster(t, pgtest.Passwords())
	admin := pgtest.MigratedURL(t, c)
	role := pgtest.LoginRole(t, admin, "it's-one")
	as := func(password string) (*pgx.Conn, error) {
		cfg, err := pgx.ParseConfig(admin)
		if err != nil {
			t.Fatal(err)
		}
		cfg.User, cfg.Password = role, password
		return pgx.ConnectConfig(ctx, cfg)
	}
	conn, err := as("it's-one")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	pcfg, err := pgxpool.ParseConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.ConnConfig.User, pcfg.ConnConfig.Password = role, "it's-one"
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	factory.Event(ctx, t, storage.New(pool), &factory.EventOpts{Source: "p", EventID: "by-role"})
	// Closed at once: the sessions the test counts below are conn's.
	pool.Close()
	if _, err := as("wrong"); !refused(err) {
		t.Fatalf("a wrong password: %v", err)
	}

	pgtest.SetPassword(t, admin, role, "two")
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("the open session after the change: %v", err)
	}
	if _, err := as("it's-one"); !refused(err) {
		t.Fatalf("the old password after the change: %v", err)
	}
	other, err := as("two")
	if err != nil {
		t.Fatal(err)
	}
	other.Close(ctx)
	// The closed one may still be on its way out, hence at least one.
	if n := pgtest.EndSessions(t, admin, role); n < 1 {
		t.Fatalf("ended %d sessions, want the open one", n)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("the session goes on after EndSessions")
	}
}
