package dbschema_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testhandler"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/dbschema"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// passwords are the roles' passwords on the shared test server.
func passwords() map[string]string {
	pw := map[string]string{}
	for _, r := range migrate.FunctionRoles() {
		pw[r] = pgtest.RolePassword
	}
	return pw
}

func apply(ctx context.Context, pool *pgxpool.Pool) (dbschema.Versions, error) {
	return dbschema.Apply(ctx, pool, pgtest.Schemas, dbschema.RolesOptions{Auth: migrate.AuthPassword, Passwords: passwords()})
}

// TestApplyIsIdempotentAndKeepsVersionsApart: applied again (pgtest applied
// it once), nothing changes; each handler package's migrations are recorded
// in its own version table, never in the core's.
func TestApplyIsIdempotentAndKeepsVersionsApart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.Pool(t)
	v, err := apply(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	st, err := migrate.Status(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if want := st[len(st)-1].Version; v.Core != want {
		t.Fatalf("core version = %d, want the latest, %d", v.Core, want)
	}
	var core int64
	if err := pool.QueryRow(ctx, `SELECT max(version_id) FROM goose_db_version`).Scan(&core); err != nil || core != v.Core {
		t.Fatalf("goose_db_version = %d, %v: the handlers' migrations leaked into it", core, err)
	}
	if len(v.Handlers) != len(pgtest.Schemas) {
		t.Fatalf("handler versions = %v", v.Handlers)
	}
	for _, tb := range pgtest.Schemas {
		var hv int64
		if err := pool.QueryRow(ctx, `SELECT max(version_id) FROM `+pgx.Identifier{tb.VersionTable}.Sanitize()).Scan(&hv); err != nil || hv != v.Handlers[tb.Name] || hv < 1 {
			t.Errorf("%s: version table says %d (%v), Apply %d", tb.Name, hv, err, v.Handlers[tb.Name])
		}
		for table := range tb.Grants {
			var exists bool
			if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil || !exists {
				t.Errorf("%s: table %s missing (%v)", tb.Name, table, err)
			}
		}
	}
	if got := v.String(); !strings.HasPrefix(got, fmt.Sprintf("%d (", v.Core)) || !strings.Contains(got, "testhandler 1") {
		t.Fatalf("Versions.String() = %q", got)
	}
}

// privilege is one row of a role's privileges: on a table, or on one
// column when col is set.
type privilege struct{ rel, col, priv string }

// held reads from the catalogue what role holds on the current schema's
// relations and their columns.
func held(t *testing.T, pool *pgxpool.Pool, role string) []privilege {
	t.Helper()
	rows, err := pool.Query(t.Context(), `
		SELECT c.relname::text, '', a.privilege_type
		  FROM pg_class c, aclexplode(c.relacl) a
		 WHERE c.relnamespace = current_schema()::regnamespace AND a.grantee = $1::regrole
		UNION ALL
		SELECT c.relname::text, att.attname::text, a.privilege_type
		  FROM pg_class c JOIN pg_attribute att ON att.attrelid = c.oid, aclexplode(att.attacl) a
		 WHERE c.relnamespace = current_schema()::regnamespace AND a.grantee = $1::regrole
		ORDER BY 1, 2, 3`, role)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (privilege, error) {
		var p privilege
		err := r.Scan(&p.rel, &p.col, &p.priv)
		return p, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// expected is what Grants says role holds, in held's shape, with the
// sequences the declared tables own (migrate.OwnedSequences).
func expected(t *testing.T, pool *pgxpool.Pool, role string) []privilege {
	t.Helper()
	grants, err := migrate.OwnedSequences(t.Context(), pool, dbschema.Grants(pgtest.Schemas))
	if err != nil {
		t.Fatal(err)
	}
	var out []privilege
	for _, g := range grants {
		if g.Role != role {
			continue
		}
		for _, p := range g.Privileges {
			if len(g.Columns) == 0 {
				out = append(out, privilege{g.On, "", p})
			}
			for _, c := range g.Columns {
				out = append(out, privilege{g.On, c, p})
			}
		}
	}
	slices.SortFunc(out, func(a, b privilege) int {
		return strings.Compare(a.rel+"\x00"+a.col+"\x00"+a.priv, b.rel+"\x00"+b.col+"\x00"+b.priv)
	})
	return out
}

// TestRolesHoldExactlyTheirGrants: the catalogue holds, for each role,
// exactly the privileges Grants lists (table and column ACLs), even after
// someone granted it more: Apply revokes what is not listed.
func TestRolesHoldExactlyTheirGrants(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.Pool(t)
	// Extra privileges a hand or an older release left behind.
	for _, stmt := range []string{
		`GRANT SELECT ON webhook_dead_letters TO webhook_receiver`,
		`GRANT SELECT (body) ON webhook_events TO webhook_receiver`,
		`GRANT DELETE, TRUNCATE ON webhook_events TO webhook_processor`,
		`GRANT UPDATE ON goose_db_version TO webhook_archiver`,
		`GRANT CREATE ON SCHEMA public TO webhook_archiver`,
		`GRANT INSERT, UPDATE ON webhook_events TO webhook_operator_read`,
		`GRANT SELECT ON ` + testhandler.Table + ` TO webhook_operator_read`,
		`GRANT UPDATE (event_id, body_sha256) ON webhook_events TO webhook_operator`,
		`GRANT DELETE ON webhook_operator_actions TO webhook_operator`,
		`GRANT CREATE, TEMPORARY ON DATABASE ` + pgx.Identifier{pool.Config().ConnConfig.Database}.Sanitize() + ` TO webhook_receiver`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := apply(ctx, pool); err != nil {
		t.Fatal(err)
	}
	for _, role := range migrate.FunctionRoles() {
		got, want := held(t, pool, role), expected(t, pool, role)
		if !slices.Equal(got, want) {
			t.Errorf("%s holds\n%v\nwant\n%v", role, got, want)
		}
		var create, dbCreate bool
		err := pool.QueryRow(ctx, `SELECT has_schema_privilege($1, current_schema(), 'CREATE'), has_database_privilege($1, current_database(), 'CREATE')`, role).Scan(&create, &dbCreate)
		if err != nil || create || dbCreate {
			t.Errorf("%s may create in the schema: %v, in the database: %v (%v)", role, create, dbCreate, err)
		}
	}
	// The processor's grants include every handler package's declaration.
	for _, tb := range pgtest.Schemas {
		for table, privs := range tb.Grants {
			for _, p := range privs {
				var ok bool
				if err := pool.QueryRow(ctx, `SELECT has_table_privilege($1, $2, $3)`, migrate.RoleProcessor, table, p).Scan(&ok); err != nil || !ok {
					t.Errorf("processor lacks %s on %s (%v)", p, table, err)
				}
			}
		}
	}
}

// TestPublicMayNotCreate: PUBLIC may not create in the schema after Apply,
// even where the server let it (PostgreSQL 14 and older did, on public).
func TestPublicMayNotCreate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.Pool(t)
	var create bool
	if err := pool.QueryRow(ctx, `SELECT has_schema_privilege('public', current_schema(), 'CREATE')`).Scan(&create); err != nil || create {
		t.Fatalf("PUBLIC may create after Apply: %v %v", create, err)
	}
	if _, err := pool.Exec(ctx, `GRANT CREATE ON SCHEMA public TO PUBLIC`); err != nil { // PostgreSQL 14's default
		t.Fatal(err)
	}
	if _, err := apply(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT has_schema_privilege('public', current_schema(), 'CREATE')`).Scan(&create); err != nil || create {
		t.Fatalf("PUBLIC may still create: %v %v", create, err)
	}
}

// TestApplyConcurrently: migrators running at once, on one database and on
// several databases of one server (whose roles they share), all succeed.
func TestApplyConcurrently(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// Two on each of two databases: the fewest that race both ways. Each
	// run takes the server's roles in turn, so more only take longer.
	pools := []*pgxpool.Pool{pgtest.Pool(t), pgtest.Pool(t)}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		pool := pools[i%len(pools)]
		wg.Go(func() {
			if _, err := apply(ctx, pool); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestApplyRefusesABadGrant: a grant on a table that does not exist, or of
// a privilege no function may hold, fails Apply's transaction and changes
// nothing.
func TestApplyRefusesABadGrant(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.Pool(t)
	for _, c := range []struct {
		g    migrate.Grant
		want string
	}{
		{migrate.Grant{Role: migrate.RoleProcessor, On: "no_such_table", Privileges: []string{"SELECT"}}, "no such table"},
		{migrate.Grant{Role: migrate.RoleProcessor, On: "webhook_events", Privileges: []string{"TRUNCATE"}}, `"TRUNCATE"`},
		{migrate.Grant{Role: migrate.RoleProcessor, On: "webhook_events", Privileges: []string{"TRIGGER"}}, `"TRIGGER"`},
		{migrate.Grant{Role: "postgres", On: "webhook_events", Privileges: []string{"SELECT"}}, "not a function role"},
		{migrate.Grant{Role: migrate.RoleReceiver, On: "webhook_events_id_seq", Privileges: []string{"USAGE"}, Columns: []string{"x"}}, "names columns"},
	} {
		err := migrate.Roles(ctx, pool, migrate.RolesOptions{Auth: migrate.AuthPassword, Passwords: passwords(),
			Grants: append(dbschema.Grants(pgtest.Schemas), c.g)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v, want %q", c.g, err, c.want)
		}
	}
	if got := held(t, pool, migrate.RoleProcessor); !slices.Equal(got, expected(t, pool, migrate.RoleProcessor)) {
		t.Fatalf("a failed Apply changed the grants: %v", got)
	}
	if err := migrate.Roles(ctx, pool, migrate.RolesOptions{Auth: migrate.AuthPassword}); err == nil || !strings.Contains(err.Error(), "no password for") {
		t.Fatalf("no passwords: %v", err)
	}
	if err := migrate.Roles(ctx, pool, migrate.RolesOptions{Auth: "trust"}); err == nil {
		t.Fatal("an unknown authentication was accepted")
	}
	bad := passwords()
	bad[migrate.RoleArchiver] = "pässword"
	if err := migrate.Roles(ctx, pool, migrate.RolesOptions{Auth: migrate.AuthPassword, Passwords: bad}); err == nil || strings.Contains(err.Error(), "pässword") {
		t.Fatalf("a non-ASCII password: %v", err)
	}
}

// TestRolesAuthentication, on a server of its own that checks passwords
// (roles belong to the whole server, and this test changes them): each
// role logs in with its password and no other; Apply with new passwords
// rotates them; a role made superuser, able to create databases or a
// member of another role is brought back to what a function needs; IAM
// mode grants rds_iam where the server has it and clears the password, and
// password mode takes rds_iam away again.
func TestRolesAuthentication(t *testing.T) {
	tier.Heavy(t, "starts a cluster of its own")
	t.Parallel()
	ctx := t.Context()
	c := pgtest.Cluster(t, pgtest.Passwords())
	dbURL := pgtest.EmptyURL(t, c)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pw := func(gen string) map[string]string {
		m := map[string]string{}
		for _, r := range migrate.FunctionRoles() {
			m[r] = r + "-" + gen + `-p@ss'w:rd"$\`
		}
		return m
	}
	login := func(role, password string) error {
		u := strings.Replace(dbURL, "postgres@", role+":"+strings.NewReplacer("@", "%40", "'", "%27", ":", "%3A", `"`, "%22", "$", "%24", `\`, "%5C").Replace(password)+"@", 1)
		conn, err := pgx.Connect(ctx, u)
		if err == nil {
			conn.Close(ctx)
		}
		return err
	}
	refused := func(err error) bool {
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == "28P01" // invalid_password
	}

	// A first deploy, on an empty database.
	if _, err := dbschema.Apply(ctx, pool, pgtest.Schemas, dbschema.RolesOptions{Auth: migrate.AuthPassword, Passwords: pw("one")}); err != nil {
		t.Fatal(err)
	}
	for _, r := range migrate.FunctionRoles() {
		if err := login(r, pw("one")[r]); err != nil {
			t.Errorf("%s with its password: %v", r, err)
		}
		if err := login(r, "wrong"); !refused(err) {
			t.Errorf("%s with a wrong password: %v", r, err)
		}
	}
	var stored string
	if err := pool.QueryRow(ctx, `SELECT rolpassword FROM pg_authid WHERE rolname = $1`, migrate.RoleReceiver).Scan(&stored); err != nil || !strings.HasPrefix(stored, "SCRAM-SHA-256$4096:") {
		t.Fatalf("stored password = %.20q, %v: want a SCRAM verifier", stored, err)
	}

	// What an operator may have done by hand.
	for _, stmt := range []string{
		`ALTER ROLE webhook_receiver SUPERUSER`,
		`ALTER ROLE webhook_processor CREATEDB CREATEROLE BYPASSRLS REPLICATION`,
		`CREATE ROLE some_group`,
		`GRANT some_group TO webhook_archiver`,
		`GRANT some_group TO webhook_operator_read`,
		`ALTER ROLE webhook_operator CREATEROLE`,
		`GRANT pg_read_all_data TO webhook_receiver`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	// A rotation: the next deploy sets the secrets' new passwords.
	if _, err := dbschema.Apply(ctx, pool, pgtest.Schemas, dbschema.RolesOptions{Auth: migrate.AuthPassword, Passwords: pw("two")}); err != nil {
		t.Fatal(err)
	}
	for _, r := range migrate.FunctionRoles() {
		if err := login(r, pw("two")[r]); err != nil {
			t.Errorf("%s with its new password: %v", r, err)
		}
		if err := login(r, pw("one")[r]); !refused(err) {
			t.Errorf("%s with its old password: %v", r, err)
		}
		var super, createDB, createRole, bypass, repl, canLogin bool
		var members int
		err := pool.QueryRow(ctx, `SELECT rolsuper, rolcreatedb, rolcreaterole, rolbypassrls, rolreplication, rolcanlogin,
			(SELECT count(*) FROM pg_auth_members WHERE member = r.oid) FROM pg_roles r WHERE rolname = $1`, r).
			Scan(&super, &createDB, &createRole, &bypass, &repl, &canLogin, &members)
		if err != nil || super || createDB || createRole || bypass || repl || !canLogin || members != 0 {
			t.Errorf("%s: super=%v createdb=%v createrole=%v bypassrls=%v replication=%v login=%v memberships=%d (%v)",
				r, super, createDB, createRole, bypass, repl, canLogin, members, err)
		}
	}

	// IAM on RDS: rds_iam exists there.
	if _, err := pool.Exec(ctx, `CREATE ROLE rds_iam`); err != nil {
		t.Fatal(err)
	}
	if _, err := dbschema.Apply(ctx, pool, pgtest.Schemas, dbschema.RolesOptions{Auth: migrate.AuthIAM}); err != nil {
		t.Fatal(err)
	}
	for _, r := range migrate.FunctionRoles() {
		var iam bool
		var password *string
		if err := pool.QueryRow(ctx, `SELECT pg_has_role($1, 'rds_iam', 'MEMBER'), (SELECT rolpassword FROM pg_authid WHERE rolname = $1)`, r).Scan(&iam, &password); err != nil || !iam || password != nil {
			t.Errorf("%s in IAM mode: member of rds_iam %v, password set %v (%v)", r, iam, password != nil, err)
		}
		if err := login(r, pw("two")[r]); err == nil {
			t.Errorf("%s still logs in with a password in IAM mode", r)
		}
	}
	// Back to passwords: rds_iam goes, or RDS would refuse them.
	if _, err := dbschema.Apply(ctx, pool, pgtest.Schemas, dbschema.RolesOptions{Auth: migrate.AuthPassword, Passwords: pw("three")}); err != nil {
		t.Fatal(err)
	}
	for _, r := range migrate.FunctionRoles() {
		var iam bool
		if err := pool.QueryRow(ctx, `SELECT pg_has_role($1, 'rds_iam', 'MEMBER')`, r).Scan(&iam); err != nil || iam {
			t.Errorf("%s still a member of rds_iam: %v %v", r, iam, err)
		}
		if err := login(r, pw("three")[r]); err != nil {
			t.Errorf("%s with its password: %v", r, err)
		}
	}
}

// TestIAMWithoutRDSIAM: a server without rds_iam (not RDS) still gets the
// roles, without their passwords, and Apply does not fail.
func TestIAMWithoutRDSIAM(t *testing.T) {
	tier.Heavy(t, "starts a cluster of its own")
	t.Parallel()
	c := pgtest.Cluster(t)
	pool, err := pgxpool.New(t.Context(), pgtest.EmptyURL(t, c))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := dbschema.Apply(t.Context(), pool, pgtest.Schemas, dbschema.RolesOptions{Auth: migrate.AuthIAM}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_roles WHERE rolname = ANY($1) AND rolcanlogin`, migrate.FunctionRoles()).Scan(&n); err != nil || n != len(migrate.FunctionRoles()) {
		t.Fatalf("login roles = %d, %v", n, err)
	}
}
