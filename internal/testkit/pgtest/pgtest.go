// Package pgtest gives each test its own migrated PostgreSQL database: on
// the server named by DATABASE_URL when set, otherwise on a throwaway
// cluster started with localpg. Each database holds the deployed schema
// (dbschema.Apply: the core and handler tables, and the three functions'
// roles with their grants), so a test can connect as a function's role
// (RoleURL) and find a missing grant before a deploy does.
//
// Migrating once and copying is what keeps a database per test cheap: the
// first test to ask creates a template database and migrates it, and every
// test then gets CREATE DATABASE ... TEMPLATE, a file copy on the server.
// Nothing starts until a test asks, so packages whose selected tests need no
// database pay nothing.
//
// DATABASE_URL must name an existing database on PostgreSQL 13 or later
// (DROP DATABASE ... WITH (FORCE)), as a role allowed to create databases
// and roles. Roles belong to the whole server: the function roles
// (webhook_receiver, ...) are created there, with RolePassword, and stay.
// Each test process creates databases named wi_tmpl_<hex> and wi_<hex>
// there and drops them when it ends, so parallel packages can share it; a
// process killed mid-run leaves its databases behind.
//
// A package using it calls Main from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Only _test.go files should import it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localpg"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testhandler"
	"github.com/webhook-inbox/webhook-inbox/shared/dbschema"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// Schemas are the handler packages every test database is migrated with,
// and whose privileges its processor role holds: the application's
// (handlers.Schemas, whatever a fork registers), the tests' own
// (testhandler), which the project's processing tests register instead of
// the application's handlers, and those given to Main.
var Schemas = testhandler.With(handlers.Schemas)

// RolePassword is the function roles' password on the tests' servers. A
// throwaway cluster trusts every local connection and ignores it; a
// DATABASE_URL server that asks for passwords gets it.
const RolePassword = "webhook-inbox-test-role"

// setupTimeout bounds starting a cluster or connecting, plus migrating the
// template: generous, since a cold machine can take seconds.
const setupTimeout = 2 * time.Minute

// opTimeout bounds one CREATE or DROP DATABASE.
const opTimeout = time.Minute

var (
	mainCalled atomic.Bool

	setupOnce sync.Once
	shared    *server // set by setupOnce, possibly half built when setupErr != nil
	setupErr  error

	teardownOnce sync.Once
)

// server is the database server the tests of this process share.
type server struct {
	cluster  *localpg.Cluster    // nil when DATABASE_URL names the server
	urlFor   func(string) string // connection URL of a database on the server
	admin    *pgxpool.Pool       // on the database DATABASE_URL names, or postgres
	template string              // "" until created

	// createMu serialises CREATE DATABASE, as a precaution: Postgres
	// refuses to copy a template while any session is connected to it
	// ("source database is being accessed by other users"). Concurrent
	// copies with no one connected work on PostgreSQL 15, but a copy takes
	// ~10ms on a cluster in memory, so one at a time costs little.
	createMu sync.Mutex

	mu   sync.Mutex
	live map[string]bool // databases this process created and has not dropped
}

// Main runs the tests and then drops the databases and stops the cluster
// that they used, before exiting with their result. Call it from TestMain.
//
// schemas are handler packages' schemas the tests' databases need besides
// Schemas: a handler package passes its own, so that its tests hold whether
// or not shared/handlers registers it (a fork may keep an example's code
// and drop its registration).
func Main(m *testing.M, schemas ...processor.HandlerSchema) {
	mainCalled.Store(true)
	for _, s := range schemas {
		if !slices.ContainsFunc(Schemas, func(have processor.HandlerSchema) bool { return have.Name == s.Name }) {
			Schemas = append(slices.Clone(Schemas), s)
		}
	}
	code := m.Run()
	if err := teardown(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: teardown: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func teardown() error {
	var err error
	teardownOnce.Do(func() {
		// Marking setup done keeps a goroutine a test left behind from
		// starting a server that nothing would stop.
		setupOnce.Do(func() { setupErr = errors.New("pgtest: torn down") })
		if shared != nil {
			err = shared.close()
		}
	})
	return err
}

// Pool returns a pool on a fresh database of its own, migrated to the
// latest schema. The test's cleanup closes the pool and drops the database.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dbURL := URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatalf("pgtest: connect to the test database: %v", err)
	}
	// Registered after URL's cleanup, so it runs before it: the database
	// is dropped once the pool no longer uses it.
	t.Cleanup(pool.Close)
	return pool
}

// URL returns the connection URL of a fresh database of its own, migrated
// to the latest schema, for code that builds its own pool. The test's
// cleanup drops the database, closing any connection still open to it.
func URL(t testing.TB) string {
	t.Helper()
	return newURL(t, false)
}

// Empty returns the connection URL of a fresh database of its own with no
// schema at all, as a first deploy finds it, on the shared server (whose
// function roles exist, with RolePassword: a test that sets them up again
// must keep that password). The test's cleanup drops it.
func Empty(t testing.TB) string {
	t.Helper()
	return newURL(t, true)
}

func newURL(t testing.TB, empty bool) string {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("pgtest: call pgtest.Main(m) from TestMain, which drops the databases and stops the server the tests used")
	}
	s, err := sharedServer()
	if err != nil {
		t.Fatalf("pgtest: no database server: %v", err)
	}
	name, err := s.createDatabase(empty)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.dropDatabase(name); err != nil {
			// Main tries again; the test itself did nothing wrong.
			t.Logf("pgtest: %v", err)
		}
	})
	return s.urlFor(name)
}

// sharedServer returns the shared server, starting or connecting to it on
// first use. A failure is kept, so that every test reports it at once instead
// of each retrying a slow start.
func sharedServer() (*server, error) {
	setupOnce.Do(func() { shared, setupErr = setup() })
	return shared, setupErr
}

func setup() (*server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	s := &server{live: map[string]bool{}}
	adminURL := os.Getenv("DATABASE_URL")
	if adminURL != "" {
		s.urlFor = func(db string) string { return withDatabase(adminURL, db) }
	} else {
		c, err := localpg.Start(ctx, localpg.Options{})
		if err != nil {
			return nil, err
		}
		s.cluster = c
		s.urlFor = c.URL
		adminURL = c.URL("postgres")
	}
	cfg, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		return s, fmt.Errorf("DATABASE_URL: %w", err)
	}
	cfg.MaxConns = 4 // CREATE DATABASE is serialised anyway
	if s.admin, err = pgxpool.NewWithConfig(ctx, cfg); err == nil {
		err = s.admin.Ping(ctx)
	}
	if err != nil {
		return s, fmt.Errorf("connect to %s: %w", redact(adminURL), err)
	}

	tmpl := "wi_tmpl_" + randomHex()
	if err := s.exec(ctx, "CREATE DATABASE "+ident(tmpl)); err != nil {
		return s, fmt.Errorf("create template database: %w", err)
	}
	s.track(tmpl, true)
	s.template = tmpl
	if err := migrateDB(ctx, s.urlFor(tmpl)); err != nil {
		return s, fmt.Errorf("migrate template database %s: %w", tmpl, err)
	}
	// No one may connect to the template from now on: a session on it
	// would make every CREATE DATABASE ... TEMPLATE fail.
	if err := s.exec(ctx, "ALTER DATABASE "+ident(tmpl)+" ALLOW_CONNECTIONS false"); err != nil {
		return s, fmt.Errorf("lock template database: %w", err)
	}
	return s, nil
}

// migrateDB applies the deployed schema, roles included, to the database
// at dbURL, closing every connection it opened before returning.
func migrateDB(ctx context.Context, dbURL string) error {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	passwords := map[string]string{}
	for _, r := range migrate.FunctionRoles() {
		passwords[r] = RolePassword
	}
	_, err = dbschema.Apply(ctx, pool, Schemas, dbschema.RolesOptions{Auth: migrate.AuthPassword, Passwords: passwords})
	return err
}

// RoleURL returns dbURL (a URL from URL or MigratedURL) connecting as a
// function's role (migrate.RoleReceiver, ...) with RolePassword.
func RoleURL(t testing.TB, dbURL, role string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("pgtest: RoleURL needs a postgres:// URL")
	}
	u.User = url.UserPassword(role, RolePassword)
	return u.String()
}

// As returns a pool on the database of pool (from Pool) connected as a
// function's role, closed by the test's cleanup: the function's statements
// run with its grants, while the test seeds and checks through pool, as
// the owner.
func As(t testing.TB, pool *pgxpool.Pool, role string) *pgxpool.Pool {
	t.Helper()
	as, err := pgxpool.New(context.Background(), RoleURL(t, pool.Config().ConnString(), role))
	if err != nil {
		t.Fatalf("pgtest: connect as %s: %v", role, err)
	}
	t.Cleanup(as.Close)
	return as
}

func (s *server) createDatabase(empty bool) (string, error) {
	name := "wi_" + randomHex()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	stmt := "CREATE DATABASE " + ident(name) + " TEMPLATE " + ident(s.template)
	if empty {
		stmt = "CREATE DATABASE " + ident(name)
	}
	s.createMu.Lock()
	err := s.exec(ctx, stmt)
	s.createMu.Unlock()
	if err != nil {
		return "", fmt.Errorf("create test database: %w", err)
	}
	s.track(name, true)
	if !empty {
		// A copy takes the template's schema, grants and default
		// privileges, but not the database's own privileges, which are
		// the server's (pg_database): those migrate.Roles set on the
		// template are set here again, as the database deployed has them.
		roles := make([]string, 0, len(migrate.FunctionRoles()))
		for _, r := range migrate.FunctionRoles() {
			roles = append(roles, ident(r))
		}
		for _, stmt := range []string{
			"REVOKE CONNECT, TEMPORARY ON DATABASE " + ident(name) + " FROM PUBLIC",
			"GRANT CONNECT ON DATABASE " + ident(name) + " TO " + strings.Join(roles, ", "),
		} {
			if err := s.exec(ctx, stmt); err != nil {
				return "", fmt.Errorf("create test database: %s: %w", stmt, err)
			}
		}
	}
	return name, nil
}

// dropDatabase drops a database, closing the sessions still on it: a test
// may end with connections its code forgot to close.
func (s *server) dropDatabase(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := s.exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	s.track(name, false)
	return nil
}

// close drops what this process created on a DATABASE_URL server, which
// other processes share, or simply closes the throwaway cluster.
func (s *server) close() error {
	var errs []error
	if s.cluster == nil && s.admin != nil {
		s.mu.Lock()
		names := make([]string, 0, len(s.live))
		for name := range s.live {
			names = append(names, name)
		}
		s.mu.Unlock()
		for _, name := range names {
			if err := s.dropDatabase(name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if s.admin != nil {
		s.admin.Close()
	}
	if s.cluster != nil {
		if err := s.cluster.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *server) exec(ctx context.Context, sql string) error {
	_, err := s.admin.Exec(ctx, sql)
	return err
}

func (s *server) track(name string, live bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if live {
		s.live[name] = true
	} else {
		delete(s.live, name)
	}
}

// Cluster starts a throwaway cluster for this test alone, even when
// DATABASE_URL is set: outage tests stop and restart it, which they must
// not do to a server other tests use; Passwords makes it check passwords.
// The test's cleanup closes it. Use MigratedURL for a database on it.
func Cluster(t testing.TB, opts ...ClusterOption) *localpg.Cluster {
	t.Helper()
	var o localpg.Options
	for _, opt := range opts {
		opt(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	c, err := localpg.Start(ctx, o)
	if err != nil {
		t.Fatalf("pgtest: start a cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return c
}

// ClusterOption shapes the cluster Cluster starts.
type ClusterOption func(*localpg.Options)

// Passwords makes the cluster check passwords over TCP for every role but
// postgres (localpg.Options.Passwords), as a managed database does: what
// tests of credentials and of their rotation need. LoginRole makes a role
// that logs in with one.
func Passwords() ClusterOption {
	return func(o *localpg.Options) { o.Passwords = true }
}

// TLS makes the cluster offer TLS with cert (localpg.Options.TLS), for
// tests of how a client checks the server's certificate. Its URL still
// says sslmode=disable: a test writes the sslmode it means.
func TLS(cert localpg.ServerCert) ClusterOption {
	return func(o *localpg.Options) { o.TLS = &cert }
}

// LoginRole creates, on the server of dbURL (a database of Cluster's, as
// MigratedURL returns), a role of its own that logs in with password and
// may read and write every table and sequence of that database, as a
// function's role may, and returns its name. Roles belong to the server,
// not the database, so a cluster of the test's own is the place for one.
func LoginRole(t testing.TB, dbURL, password string) string {
	t.Helper()
	role := "wi_role_" + randomHex()
	// The password is a literal: utility statements take no parameters.
	for _, sql := range []string{
		"CREATE ROLE " + ident(role) + " LOGIN PASSWORD " + literal(password),
		// PUBLIC may not connect to a migrated database (migrate.Roles):
		// a role connects by its own grant, as the functions' roles do.
		"GRANT CONNECT ON DATABASE " + ident(dbName(dbURL)) + " TO " + ident(role),
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO " + ident(role),
		"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO " + ident(role),
	} {
		onServer(t, dbURL, "create role "+role, func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, sql)
			return err
		})
	}
	return role
}

// dbName is the database dbURL names.
func dbName(dbURL string) string {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return ""
	}
	return cfg.Database
}

// SetPassword changes role's password on the server of dbURL, as a
// rotation does (ALTER ROLE ... PASSWORD): sessions already logged in
// stay, new ones need the new password.
func SetPassword(t testing.TB, dbURL, role, password string) {
	t.Helper()
	onServer(t, dbURL, "set the password of "+role, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "ALTER ROLE "+ident(role)+" PASSWORD "+literal(password))
		return err
	})
}

// EndSessions ends every session of role on the server of dbURL
// (pg_terminate_backend), as a failover, a proxy or an idle timeout ends
// them: the role's pools must log in again. It returns how many it ended.
func EndSessions(t testing.TB, dbURL, role string) int {
	t.Helper()
	var n int
	onServer(t, dbURL, "end the sessions of "+role, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = $1", role).Scan(&n)
	})
	return n
}

// onServer runs do on a connection of its own to dbURL, failing t with
// what when it fails.
func onServer(t testing.TB, dbURL, what string, do func(ctx context.Context, conn *pgx.Conn) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", redact(dbURL), err)
	}
	defer conn.Close(ctx)
	if err := do(ctx, conn); err != nil {
		t.Fatalf("pgtest: %s: %v", what, err)
	}
}

// MigratedURL creates a database on c, applies the deployed schema to it
// (roles with RolePassword) and returns its URL. The database lives as long
// as the cluster; a test may stop the server at any time, so nothing tries
// to drop it.
func MigratedURL(t testing.TB, c *localpg.Cluster) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	u := EmptyURL(t, c)
	if err := migrateDB(ctx, u); err != nil {
		t.Fatalf("pgtest: migrate database: %v", err)
	}
	return u
}

// EmptyURL creates a database on c with no schema at all, as a first deploy
// finds it, and returns its URL (as the cluster's superuser).
func EmptyURL(t testing.TB, c *localpg.Cluster) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	name := "wi_" + randomHex()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatalf("pgtest: connect to the cluster: %v", err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+ident(name))
	conn.Close(ctx)
	if err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	return c.URL(name)
}

// randomHex names databases: random, so that test processes sharing a
// DATABASE_URL (go test runs packages in parallel) never collide, and
// lowercase hex, so that the names need no quoting anywhere.
func randomHex() string {
	b := make([]byte, 8)
	rand.Read(b) // never fails; see crypto/rand.Read
	return hex.EncodeToString(b)
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// literal quotes s as an SQL string literal (standard_conforming_strings
// is on, so only quotes need doubling).
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// withDatabase returns connString, a URL or a keyword/value string, with
// its database replaced by db.
func withDatabase(connString, db string) string {
	if u, err := url.Parse(connString); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + db
		u.RawPath = ""
		q := u.Query()
		q.Del("dbname")
		q.Del("database")
		u.RawQuery = q.Encode()
		return u.String()
	}
	// In a keyword/value string the last occurrence of a keyword wins.
	return connString + " dbname=" + db
}

// redact hides the password of a URL for error messages.
func redact(connString string) string {
	if u, err := url.Parse(connString); err == nil && u.User != nil {
		return u.Redacted()
	}
	if strings.Contains(connString, "password") {
		return "DATABASE_URL"
	}
	return connString
}
