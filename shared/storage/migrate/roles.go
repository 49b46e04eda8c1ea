package migrate

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Auth is how the function roles authenticate.
type Auth string

const (
	// AuthPassword: each role logs in with the password of its own secret.
	AuthPassword Auth = "password"
	// AuthIAM: each role logs in with an RDS IAM token; Roles grants it
	// rds_iam when the server has that role (RDS and Aurora do) and clears
	// its password.
	AuthIAM Auth = "iam"
)

// RolesOptions configures Roles.
type RolesOptions struct {
	Auth Auth
	// Passwords holds each role's password (AuthPassword). They are sent to
	// the server as SCRAM-SHA-256 verifiers, never in clear, so a server
	// that logs DDL statements does not log a password.
	Passwords map[string]string
	// Grants is every privilege of the function roles (CoreGrants and the
	// handler packages'); each role ends with exactly these on the current
	// schema's tables and sequences, whatever it held before.
	Grants []Grant
}

// rolesLockKey serialises Roles on one database (an advisory lock is per
// database); it differs from goose's migration lock, which Roles runs after.
const rolesLockKey = 0x77686b5f726f6c65 // "whk_role"

// rolesAttempts bounds the retries of a transaction that lost a race with
// another migrator on another database of the same server: roles are
// shared by the whole server, so CREATE ROLE and ALTER ROLE there collide
// (duplicate key, "tuple concurrently updated") whatever the lock here.
const rolesAttempts = 8

// Roles creates the function roles where missing and sets their attributes,
// authentication and privileges, in one transaction: a function connected
// meanwhile sees the old grants or the new, never a mix. It is idempotent,
// safe to run concurrently with itself, and revokes from the roles
// whatever they hold beyond opts.Grants on the current schema, any role
// membership (rds_iam aside in IAM mode), the right to create in the
// schema, and PUBLIC's default rights where this user may (restrictPublic);
// it fails rather than leave a role a superuser. It needs a user
// that may create roles (CREATEROLE; RDS's master user) and grant on the
// tables (their owner: the user that ran the migrations).
func Roles(ctx context.Context, pool *pgxpool.Pool, opts RolesOptions) error {
	verifiers, err := prepareRoles(opts)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return setRoles(ctx, tx, opts, verifiers) })
		if err == nil || attempt == rolesAttempts || !lostRace(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt*attempt) * 10 * time.Millisecond):
		}
	}
}

// prepareRoles checks the options and computes the password verifiers.
func prepareRoles(opts RolesOptions) (map[string]string, error) {
	verifiers := map[string]string{}
	switch opts.Auth {
	case AuthPassword:
		for _, role := range FunctionRoles() {
			pw := opts.Passwords[role]
			if pw == "" {
				return nil, fmt.Errorf("roles: no password for %s", role)
			}
			v, err := scramVerifier(pw)
			if err != nil {
				return nil, fmt.Errorf("roles: the password of %s: %w", role, err)
			}
			verifiers[role] = v
		}
	case AuthIAM:
	default:
		return nil, fmt.Errorf("roles: authentication must be %q or %q, got %q", AuthPassword, AuthIAM, opts.Auth)
	}
	for _, g := range opts.Grants {
		if !slices.Contains(FunctionRoles(), g.Role) {
			return nil, fmt.Errorf("roles: grant on %s to %q, which is not a function role", g.On, g.Role)
		}
		if g.On == "" || len(g.Privileges) == 0 {
			return nil, fmt.Errorf("roles: grant to %s names no table or no privilege", g.Role)
		}
	}
	return verifiers, nil
}

// lostRace reports an error another migrator's concurrent transaction
// caused, which a new attempt gets past.
func lostRace(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "23505", "42710", "40001", "40P01": // unique_violation (pg_authid), duplicate_object, serialization, deadlock
		return true
	case "XX000":
		return strings.Contains(pgErr.Message, "tuple concurrently updated")
	}
	return false
}

// roleState is a role's row in pg_roles.
type roleState struct {
	exists                                              bool
	super, createRole, createDB, replication, bypassRLS bool
}

func setRoles(ctx context.Context, tx pgx.Tx, opts RolesOptions, verifiers map[string]string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(rolesLockKey)); err != nil {
		return fmt.Errorf("roles: lock: %w", err)
	}
	var schema, database string
	var iamRole bool
	if err := tx.QueryRow(ctx, `SELECT current_schema(), current_database(), to_regrole('rds_iam') IS NOT NULL`).Scan(&schema, &database, &iamRole); err != nil {
		return fmt.Errorf("roles: read the current schema: %w", err)
	}
	kinds, err := relationKinds(ctx, tx, opts.Grants)
	if err != nil {
		return err
	}
	grants, err := OwnedSequences(ctx, tx, opts.Grants)
	if err != nil {
		return err
	}
	for _, g := range grants {
		if _, ok := kinds[g.On]; !ok {
			kinds[g.On] = "S" // an owned sequence OwnedSequences added
		}
	}
	for _, role := range FunctionRoles() {
		if err := setRole(ctx, tx, role, opts.Auth, verifiers[role], iamRole); err != nil {
			return err
		}
		if err := setPrivileges(ctx, tx, role, schema, database, kinds, grants); err != nil {
			return err
		}
	}
	if err := restrictPublic(ctx, tx, schema); err != nil {
		return err
	}
	// PostgreSQL 15 and later no longer let PUBLIC create in the public
	// schema; on older servers (or a schema created so) every role could,
	// the function roles included.
	var publicCreate bool
	if err := tx.QueryRow(ctx, `SELECT has_schema_privilege('public', $1, 'CREATE')`, schema).Scan(&publicCreate); err != nil {
		return fmt.Errorf("roles: read the privileges of schema %s: %w", schema, err)
	}
	if publicCreate {
		if err := exec(ctx, tx, "REVOKE CREATE ON SCHEMA "+ident(schema)+" FROM PUBLIC"); err != nil {
			return fmt.Errorf("roles: revoke CREATE on schema %s from PUBLIC: %w", schema, err)
		}
		if err := tx.QueryRow(ctx, `SELECT has_schema_privilege('public', $1, 'CREATE')`, schema).Scan(&publicCreate); err != nil {
			return fmt.Errorf("roles: read the privileges of schema %s: %w", schema, err)
		}
		if publicCreate {
			// REVOKE only warns when the grant was someone else's.
			return fmt.Errorf("roles: PUBLIC may create in schema %s and this user cannot revoke it: run REVOKE CREATE ON SCHEMA %s FROM PUBLIC as the schema's owner", schema, schema)
		}
	}
	return nil
}

// maintenanceDatabases are the databases every PostgreSQL server has and
// PUBLIC may connect to by default (template0 takes no connections).
var maintenanceDatabases = []string{"postgres", "template1"}

// restrictPublic takes from PUBLIC, and so from the function roles, which
// hold PUBLIC's rights whatever is revoked from them by name, what
// PostgreSQL gives every role by default and no function needs:
//
//   - on the current database, CONNECT and TEMPORARY (setPrivileges grants
//     CONNECT to each function role by name), and on the server's
//     maintenance databases CONNECT, each only where this user owns the
//     database (RDS's master user owns the stack's database, which RDS
//     creates for it): a database of another owner, as on a shared server,
//     is left as it is;
//   - EXECUTE on the functions of the schema this user owns (a handler
//     package's migration may create some; an extension's are left to it),
//     and by default on those it creates later.
//
// Each is changed only when PUBLIC still holds it: the databases' rows are
// shared by the whole server, and migrators on its other databases would
// otherwise collide on them at every run.
func restrictPublic(ctx context.Context, tx pgx.Tx, schema string) error {
	rows, err := tx.Query(ctx, `
		SELECT d.datname::text, d.datname = current_database(),
		       has_database_privilege('public', d.oid, 'CONNECT'), has_database_privilege('public', d.oid, 'TEMPORARY')
		  FROM pg_catalog.pg_database d
		 WHERE (d.datname = current_database() OR d.datname = ANY($1)) AND d.datallowconn
		   AND pg_catalog.pg_has_role(current_user, d.datdba, 'USAGE')
		 ORDER BY 1`, maintenanceDatabases)
	if err != nil {
		return fmt.Errorf("roles: read the databases' privileges: %w", err)
	}
	type dbRights struct {
		name                  string
		current, connect, tmp bool
	}
	dbs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dbRights, error) {
		var d dbRights
		err := r.Scan(&d.name, &d.current, &d.connect, &d.tmp)
		return d, err
	})
	if err != nil {
		return fmt.Errorf("roles: read the databases' privileges: %w", err)
	}
	for _, d := range dbs {
		var rights []string
		if d.connect {
			rights = append(rights, "CONNECT")
		}
		if d.current && d.tmp {
			rights = append(rights, "TEMPORARY")
		}
		if len(rights) == 0 {
			continue
		}
		stmt := "REVOKE " + strings.Join(rights, ", ") + " ON DATABASE " + ident(d.name) + " FROM PUBLIC"
		if err := exec(ctx, tx, stmt); err != nil {
			return fmt.Errorf("roles: %s: %w", stmt, err)
		}
	}

	rows, err = tx.Query(ctx, `
		SELECT p.oid::regprocedure::text
		  FROM pg_catalog.pg_proc p
		 WHERE p.pronamespace = to_regnamespace($1) AND p.proowner = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
		   AND has_function_privilege('public', p.oid, 'EXECUTE')
		   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend e
		                    WHERE e.classid = 'pg_catalog.pg_proc'::regclass AND e.objid = p.oid AND e.deptype = 'e')
		 ORDER BY 1`, schema)
	if err != nil {
		return fmt.Errorf("roles: read the functions of schema %s: %w", schema, err)
	}
	funcs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("roles: read the functions of schema %s: %w", schema, err)
	}
	for _, f := range funcs {
		// regprocedure's text is the routine's name (qualified when
		// outside the search path) and argument types, quoted as needed.
		if err := exec(ctx, tx, "REVOKE EXECUTE ON ROUTINE "+f+" FROM PUBLIC"); err != nil {
			return fmt.Errorf("roles: revoke EXECUTE on %s from PUBLIC: %w", f, err)
		}
	}
	// Global, not IN SCHEMA: a schema's default privileges only add to the
	// global ones, which grant EXECUTE to PUBLIC. They cover what this user
	// creates in this database.
	if err := exec(ctx, tx, "ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON ROUTINES FROM PUBLIC"); err != nil {
		return fmt.Errorf("roles: revoke EXECUTE on the functions created later from PUBLIC: %w", err)
	}
	return nil
}

// relationKinds returns the kind of each relation the grants name ('r' a
// table, 'S' a sequence, ...), failing on one that does not exist.
func relationKinds(ctx context.Context, tx pgx.Tx, grants []Grant) (map[string]string, error) {
	kinds := map[string]string{}
	for _, g := range grants {
		if _, ok := kinds[g.On]; ok {
			continue
		}
		var kind *string
		err := tx.QueryRow(ctx, `SELECT relkind::text FROM pg_catalog.pg_class WHERE oid = to_regclass(quote_ident($1))`, g.On).Scan(&kind)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && kind == nil) {
			return nil, fmt.Errorf("roles: grant to %s on %s: no such table or sequence in the current schema (is its migration applied?)", g.Role, g.On)
		}
		if err != nil {
			return nil, fmt.Errorf("roles: look up %s: %w", g.On, err)
		}
		kinds[g.On] = *kind
	}
	return kinds, nil
}

// Querier runs a query: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// OwnedSequences returns grants with, after each table grant that sets
// Sequences and holds INSERT, a USAGE grant to the same role on each
// sequence the table owns: a serial column's (an automatic dependency,
// deptype 'a') and an identity column's (an internal one, 'i'). A serial
// column's default calls nextval, which needs USAGE; PostgreSQL does not
// check it for an identity column, which gets it all the same, so that a
// table's sequences are granted alike whichever way they were declared and
// a later change from one to the other needs no new grant. Roles grants
// what it returns; the tests read it to know what the catalogue must hold.
func OwnedSequences(ctx context.Context, q Querier, grants []Grant) ([]Grant, error) {
	out := make([]Grant, 0, len(grants))
	seen := map[[2]string]bool{}
	for _, g := range grants {
		out = append(out, g)
		if !g.Sequences || !slices.ContainsFunc(g.Privileges, func(p string) bool { return strings.EqualFold(strings.TrimSpace(p), "INSERT") }) {
			continue
		}
		rows, err := q.Query(ctx, `
			SELECT s.relname::text
			  FROM pg_catalog.pg_depend d
			  JOIN pg_catalog.pg_class s ON s.oid = d.objid AND s.relkind = 'S'
			  JOIN pg_catalog.pg_class t ON t.oid = d.refobjid
			 WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.refclassid = 'pg_catalog.pg_class'::regclass
			   AND d.refobjid = to_regclass(quote_ident($1)) AND d.deptype IN ('a', 'i')
			   AND s.relnamespace = t.relnamespace
			 ORDER BY 1`, g.On)
		if err != nil {
			return nil, fmt.Errorf("roles: read the sequences of %s: %w", g.On, err)
		}
		seqs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("roles: read the sequences of %s: %w", g.On, err)
		}
		for _, seq := range seqs {
			if seen[[2]string{g.Role, seq}] {
				continue
			}
			seen[[2]string{g.Role, seq}] = true
			out = append(out, Grant{Role: g.Role, On: seq, Privileges: []string{"USAGE"}})
		}
	}
	return out, nil
}

// setRole creates the role if missing and sets its attributes and
// authentication.
func setRole(ctx context.Context, tx pgx.Tx, role string, auth Auth, verifier string, iamRole bool) error {
	var st roleState
	err := tx.QueryRow(ctx, `SELECT true, rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls FROM pg_catalog.pg_roles WHERE rolname = $1`, role).
		Scan(&st.exists, &st.super, &st.createRole, &st.createDB, &st.replication, &st.bypassRLS)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("roles: read role %s: %w", role, err)
	}
	r := ident(role)
	if !st.exists {
		// NOLOGIN until its authentication is set below, in this same
		// transaction; the defaults are NOSUPERUSER NOCREATEDB NOCREATEROLE
		// NOREPLICATION NOBYPASSRLS.
		if err := exec(ctx, tx, "CREATE ROLE "+r+" NOLOGIN"); err != nil {
			return fmt.Errorf("roles: create role %s: %w", role, err)
		}
	}
	// Only what differs is named: changing SUPERUSER, REPLICATION or
	// BYPASSRLS needs a superuser, which RDS's master user is not, even to
	// set what is already so.
	var clear []string
	for _, a := range []struct {
		set  bool
		name string
	}{{st.super, "NOSUPERUSER"}, {st.createRole, "NOCREATEROLE"}, {st.createDB, "NOCREATEDB"}, {st.replication, "NOREPLICATION"}, {st.bypassRLS, "NOBYPASSRLS"}} {
		if a.set {
			clear = append(clear, a.name)
		}
	}
	if len(clear) > 0 {
		if err := exec(ctx, tx, "ALTER ROLE "+r+" "+strings.Join(clear, " ")); err != nil {
			return fmt.Errorf("roles: role %s has more than a function needs, and clearing it (%s) failed: %w", role, strings.Join(clear, " "), err)
		}
	}

	// Memberships: a function role inherits nothing, but rds_iam in IAM
	// mode. In password mode rds_iam must go too: RDS refuses a password
	// to a member of rds_iam.
	rows, err := tx.Query(ctx, `SELECT m.roleid::regrole::text FROM pg_catalog.pg_auth_members m WHERE m.member = $1::regrole ORDER BY 1`, role)
	if err != nil {
		return fmt.Errorf("roles: read the memberships of %s: %w", role, err)
	}
	member, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("roles: read the memberships of %s: %w", role, err)
	}
	for _, m := range member {
		if auth == AuthIAM && m == "rds_iam" {
			continue
		}
		if err := exec(ctx, tx, "REVOKE "+ident(m)+" FROM "+r); err != nil {
			return fmt.Errorf("roles: revoke membership of %s in %s: %w", role, m, err)
		}
	}

	switch auth {
	case AuthPassword:
		// The verifier holds only base64, '$' and ':': nothing to escape.
		if _, err := tx.Exec(ctx, "ALTER ROLE "+r+" LOGIN PASSWORD '"+verifier+"'"); err != nil {
			// A syntax error's message quotes the statement, verifier
			// included: such a message is dropped, the code kept (Roles
			// retries on some codes).
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) {
				safe := &pgconn.PgError{Severity: pgErr.Severity, Code: pgErr.Code, Message: pgErr.Message}
				if strings.HasPrefix(pgErr.Code, "42") {
					safe.Message = "the statement was refused"
				}
				return fmt.Errorf("roles: set the password of %s: %w", role, safe)
			}
			return fmt.Errorf("roles: set the password of %s: connection failed", role)
		}
	case AuthIAM:
		if err := exec(ctx, tx, "ALTER ROLE "+r+" LOGIN PASSWORD NULL"); err != nil {
			return fmt.Errorf("roles: set %s to log in with IAM: %w", role, err)
		}
		if iamRole && !slices.Contains(member, "rds_iam") {
			if err := exec(ctx, tx, "GRANT rds_iam TO "+r); err != nil {
				return fmt.Errorf("roles: grant rds_iam to %s: %w", role, err)
			}
		}
	}
	return nil
}

// setPrivileges revokes everything the role holds on the schema's tables
// and sequences and grants exactly its grants.
func setPrivileges(ctx context.Context, tx pgx.Tx, role, schema, database string, kinds map[string]string, grants []Grant) error {
	r, s := ident(role), ident(schema)
	for _, stmt := range []string{
		"GRANT CONNECT ON DATABASE " + ident(database) + " TO " + r,
		"REVOKE CREATE, TEMPORARY ON DATABASE " + ident(database) + " FROM " + r,
		"GRANT USAGE ON SCHEMA " + s + " TO " + r,
		"REVOKE CREATE ON SCHEMA " + s + " FROM " + r,
		// A table-level REVOKE takes the column privileges with it.
		"REVOKE ALL ON ALL TABLES IN SCHEMA " + s + " FROM " + r,
		"REVOKE ALL ON ALL SEQUENCES IN SCHEMA " + s + " FROM " + r,
	} {
		if err := exec(ctx, tx, stmt); err != nil {
			return fmt.Errorf("roles: %s: %w", stmt, err)
		}
	}
	for _, g := range grants {
		if g.Role != role {
			continue
		}
		stmt, err := grantStatement(g, kinds[g.On])
		if err != nil {
			return err
		}
		if err := exec(ctx, tx, stmt); err != nil {
			return fmt.Errorf("roles: %s: %w", stmt, err)
		}
	}
	return nil
}

// grantStatement writes g as a GRANT, refusing a privilege a function role
// never needs.
func grantStatement(g Grant, kind string) (string, error) {
	var allowed []string
	object := "TABLE "
	switch kind {
	case "r", "p", "v":
		allowed = []string{"SELECT", "INSERT", "UPDATE", "DELETE"}
	case "S":
		allowed = []string{"USAGE", "SELECT", "UPDATE"}
		object = "SEQUENCE "
		if len(g.Columns) > 0 {
			return "", fmt.Errorf("roles: grant on sequence %s names columns", g.On)
		}
	default:
		return "", fmt.Errorf("roles: %s is neither a table nor a sequence (relkind %s)", g.On, kind)
	}
	cols := ""
	if len(g.Columns) > 0 {
		quoted := make([]string, len(g.Columns))
		for i, c := range g.Columns {
			quoted[i] = ident(c)
		}
		cols = " (" + strings.Join(quoted, ", ") + ")"
	}
	privs := make([]string, len(g.Privileges))
	for i, p := range g.Privileges {
		p = strings.ToUpper(strings.TrimSpace(p))
		if !slices.Contains(allowed, p) {
			return "", fmt.Errorf("roles: privilege %q on %s is not one a function role may hold (%s)", p, g.On, strings.Join(allowed, ", "))
		}
		privs[i] = p + cols
	}
	return "GRANT " + strings.Join(privs, ", ") + " ON " + object + ident(g.On) + " TO " + ident(g.Role), nil
}

func exec(ctx context.Context, tx pgx.Tx, stmt string) error {
	_, err := tx.Exec(ctx, stmt)
	return err
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// scramIterations is PostgreSQL's own default (scram_iterations).
const scramIterations = 4096

// scramVerifier computes the SCRAM-SHA-256 verifier PostgreSQL stores for
// password (RFC 5802, RFC 7677), which ALTER ROLE ... PASSWORD takes as is.
// PostgreSQL first normalises a password with SASLprep, which changes
// nothing in ASCII (and control characters make it use the password as
// is); a password with other characters is refused here rather than
// hashed differently from what the server would compare.
func scramVerifier(password string) (string, error) {
	for i := 0; i < len(password); i++ {
		if password[i] >= 0x80 || password[i] == 0 {
			return "", errors.New("a password must be ASCII without NUL (generated secrets are)")
		}
	}
	salt := make([]byte, 16)
	rand.Read(salt) // never fails; see crypto/rand.Read
	return scramVerifierWith(password, salt, scramIterations)
}

func scramVerifierWith(password string, salt []byte, iterations int) (string, error) {
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", err
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	server := mac(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(stored[:]), b64(server)), nil
}
