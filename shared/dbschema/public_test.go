package dbschema_test

import (
	"context"
	"net/url"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// The tests of this file check that the function roles hold nothing of
// what PostgreSQL gives PUBLIC by default beyond their grants: no
// temporary tables, no connection to the server's other databases, no
// function of the schema. Everything the
// functions need is the ...RunsAsItsRole tests'.

// publicFixture is an empty database with one function in its schema
// created before Apply and one after, as a handler package's migration
// would create them.
type publicFixture struct {
	owner *pgxpool.Pool
	url   string
}

func setupPublic(t *testing.T) publicFixture {
	t.Helper()
	ctx := t.Context()
	dbURL := pgtest.Empty(t)
	owner, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owner.Close)
	if _, err := owner.Exec(ctx, `CREATE FUNCTION webhook_before() RETURNS int LANGUAGE sql AS 'SELECT 1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := apply(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `CREATE FUNCTION webhook_after() RETURNS int LANGUAGE sql AS 'SELECT 1'`); err != nil {
		t.Fatal(err)
	}
	return publicFixture{owner: owner, url: dbURL}
}

// connectAs connects to database db (the fixture's when "") of the
// fixture's server as role.
func (f publicFixture) connectAs(t *testing.T, role, db string) (*pgx.Conn, error) {
	t.Helper()
	u, err := url.Parse(pgtest.RoleURL(t, f.url, role))
	if err != nil {
		t.Fatal(err)
	}
	if db != "" {
		u.Path = "/" + db
	}
	conn, err := pgx.Connect(t.Context(), u.String())
	if err == nil {
		t.Cleanup(func() { conn.Close(context.Background()) })
	}
	return conn, err
}

// TestRolesHoldNoPublicRights: as each function role, a temporary table,
// a connection to the server's maintenance databases, a function of the
// schema (created before Apply or after) and another role's large object
// are refused with SQLSTATE 42501.
func TestRolesHoldNoPublicRights(t *testing.T) {
	t.Parallel()
	f := setupPublic(t)
	ctx := t.Context()
	var loid uint32
	if err := f.owner.QueryRow(ctx, `SELECT lo_from_bytea(0, 'owner''s object')`).Scan(&loid); err != nil {
		t.Fatal(err)
	}
	for _, role := range migrate.FunctionRoles() {
		t.Run(role, func(t *testing.T) {
			t.Parallel()
			conn, err := f.connectAs(t, role, "")
			if err != nil {
				t.Fatalf("connect to its own database: %v", err)
			}
			for _, c := range []struct{ what, sql string }{
				{"a temporary table", `CREATE TEMPORARY TABLE scratch (n int)`},
				{"a function of the schema created before Apply", `SELECT webhook_before()`},
				{"a function of the schema created after Apply", `SELECT webhook_after()`},
				{"reading another role's large object", `SELECT lo_get(` + strconv.FormatUint(uint64(loid), 10) + `)`},
			} {
				if _, err := conn.Exec(ctx, c.sql); !insufficientPrivilege(err) {
					t.Errorf("%s: %v, want SQLSTATE 42501", c.what, err)
				}
			}
			for _, db := range []string{"postgres", "template1"} {
				if _, err := f.connectAs(t, role, db); !insufficientPrivilege(err) {
					t.Errorf("connect to database %s: %v, want SQLSTATE 42501", db, err)
				}
			}
		})
	}
}

// TestTestDatabasesHoldNoPublicRights: a pgtest database, a copy of the
// migrated template (which does not copy the database's own privileges),
// refuses a temporary table too, and lets every function role connect.
func TestTestDatabasesHoldNoPublicRights(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.Pool(t)
	for _, role := range migrate.FunctionRoles() {
		as := pgtest.As(t, pool, role)
		if _, err := as.Exec(ctx, `CREATE TEMPORARY TABLE scratch (n int)`); !insufficientPrivilege(err) {
			t.Errorf("%s: a temporary table: %v, want SQLSTATE 42501", role, err)
		}
	}
	var public bool
	if err := pool.QueryRow(ctx, `SELECT has_database_privilege('public', current_database(), 'CONNECT')`).Scan(&public); err != nil || public {
		t.Errorf("PUBLIC may connect to a test database: %v %v", public, err)
	}
}
