package dbschema_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/dbschema"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// seqtestInvoices is a handler package's Schema as a user writes it: one
// table with an identity column and a serial one, declared with the
// privileges of its statements and nothing about its sequences.
func seqtestInvoices(privileges ...string) processor.HandlerSchema {
	return processor.HandlerSchema{
		Name: "seqtest", Dir: "migrations", VersionTable: "seqtest_goose_db_version",
		Migrations: fstest.MapFS{"migrations/00001_seqtest_invoices.sql": {Data: []byte(`-- +goose Up
CREATE TABLE seqtest_invoices (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	seq bigserial NOT NULL,
	invoice_id text NOT NULL UNIQUE
);
-- +goose Down
DROP TABLE seqtest_invoices;
`)}},
		Grants: map[string][]string{"seqtest_invoices": privileges},
	}
}

// setRolesFor applies the roles with the test databases' Schemas and
// extra, as the migration function would with extra registered.
func setRolesFor(t *testing.T, pool *pgxpool.Pool, extra ...processor.HandlerSchema) {
	t.Helper()
	schemas := append(slices.Clone(pgtest.Schemas), extra...)
	if err := migrate.Roles(t.Context(), pool, migrate.RolesOptions{Auth: migrate.AuthPassword, Passwords: passwords(), Grants: dbschema.Grants(schemas)}); err != nil {
		t.Fatal(err)
	}
}

func sequencePrivilege(t *testing.T, pool *pgxpool.Pool, seq string) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(t.Context(), `SELECT has_sequence_privilege($1, $2, 'USAGE')`, migrate.RoleProcessor, seq).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestSchemaSequencesAreGrantedWithTheirTable: a handler table with an
// identity and a serial column, declared in its Schema with INSERT and no
// word of its sequences, takes inserts as the processor's role; the
// catalogue holds exactly the declared grants plus USAGE on the two
// sequences; a table declared without INSERT gets no sequence; and when
// the table leaves its Schema, its grants and its sequences' go with it.
func TestSchemaSequencesAreGrantedWithTheirTable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.Pool(t)
	tb := seqtestInvoices("SELECT", "INSERT")
	if _, err := migrate.FS(ctx, pool, tb.Migrations, tb.Dir, tb.VersionTable); err != nil {
		t.Fatal(err)
	}
	as := pgtest.As(t, pool, migrate.RoleProcessor)
	insert := func(id string) error {
		_, err := as.Exec(ctx, `INSERT INTO seqtest_invoices (invoice_id) VALUES ($1)`, id)
		return err
	}
	denied := func(err error, object string) bool {
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == "42501" && strings.Contains(pgErr.Message, object)
	}

	setRolesFor(t, pool, tb)
	if err := insert("in_1"); err != nil {
		t.Fatalf("insert as the processor with the table declared: %v", err)
	}
	for _, seq := range []string{"seqtest_invoices_id_seq", "seqtest_invoices_seq_seq"} {
		if !sequencePrivilege(t, pool, seq) {
			t.Errorf("the processor lacks USAGE on %s", seq)
		}
	}
	grants, err := migrate.OwnedSequences(ctx, pool, dbschema.Grants(append(slices.Clone(pgtest.Schemas), tb)))
	if err != nil {
		t.Fatal(err)
	}
	var want []privilege
	for _, g := range grants {
		if g.Role != migrate.RoleProcessor {
			continue
		}
		for _, p := range g.Privileges {
			if len(g.Columns) == 0 {
				want = append(want, privilege{g.On, "", p})
			}
			for _, c := range g.Columns {
				want = append(want, privilege{g.On, c, p})
			}
		}
	}
	slices.SortFunc(want, func(a, b privilege) int {
		return strings.Compare(a.rel+"\x00"+a.col+"\x00"+a.priv, b.rel+"\x00"+b.col+"\x00"+b.priv)
	})
	if got := held(t, pool, migrate.RoleProcessor); !slices.Equal(got, want) {
		t.Errorf("the processor holds\n%v\nwant\n%v", got, want)
	}
	for _, p := range []privilege{{"seqtest_invoices_id_seq", "", "USAGE"}, {"seqtest_invoices_seq_seq", "", "USAGE"}, {"seqtest_invoices", "", "INSERT"}} {
		if !slices.Contains(want, p) {
			t.Errorf("OwnedSequences does not list %v", p)
		}
	}

	// Without INSERT, nothing calls nextval: no sequence.
	setRolesFor(t, pool, seqtestInvoices("SELECT"))
	if sequencePrivilege(t, pool, "seqtest_invoices_id_seq") || sequencePrivilege(t, pool, "seqtest_invoices_seq_seq") {
		t.Error("a table declared with SELECT only gave its sequences USAGE")
	}
	if err := insert("in_2"); !denied(err, "seqtest_invoices") {
		t.Errorf("insert without INSERT: %v", err)
	}

	// The table no longer declared: its grants and its sequences' are
	// revoked, as every grant not listed is.
	setRolesFor(t, pool)
	if sequencePrivilege(t, pool, "seqtest_invoices_id_seq") || sequencePrivilege(t, pool, "seqtest_invoices_seq_seq") {
		t.Error("the sequences kept USAGE after their table left its Schema")
	}
	if err := insert("in_3"); !denied(err, "seqtest_invoices") {
		t.Errorf("insert into an undeclared table: %v", err)
	}
}

// TestIdentityAndSerialNeeds records what PostgreSQL checks, which the
// docs say: an INSERT into a table with a serial column needs USAGE on its
// sequence (nextval in the column's default), an identity column's
// sequence is not checked, and a foreign key's check reads the referenced
// table as its owner, so the writer needs no privilege on it (nor
// REFERENCES, which only creating the key takes).
func TestIdentityAndSerialNeeds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.Pool(t)
	for _, stmt := range []string{
		`CREATE TABLE ident_only (id bigint GENERATED ALWAYS AS IDENTITY, v text)`,
		`CREATE TABLE serial_only (id bigserial, v text)`,
		`CREATE TABLE fk_parent (id int PRIMARY KEY)`,
		`INSERT INTO fk_parent VALUES (1)`,
		`CREATE TABLE fk_child (parent_id int NOT NULL REFERENCES fk_parent (id))`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	// INSERT on both tables, no sequence: Sequences off, as a hand would.
	grants := append(dbschema.Grants(pgtest.Schemas),
		migrate.Grant{Role: migrate.RoleProcessor, On: "ident_only", Privileges: []string{"INSERT"}},
		migrate.Grant{Role: migrate.RoleProcessor, On: "serial_only", Privileges: []string{"INSERT"}},
		migrate.Grant{Role: migrate.RoleProcessor, On: "fk_child", Privileges: []string{"INSERT"}})
	if err := migrate.Roles(ctx, pool, migrate.RolesOptions{Auth: migrate.AuthPassword, Passwords: passwords(), Grants: grants}); err != nil {
		t.Fatal(err)
	}
	as := pgtest.As(t, pool, migrate.RoleProcessor)
	if _, err := as.Exec(ctx, `INSERT INTO ident_only (v) VALUES ('x')`); err != nil {
		t.Errorf("identity column without USAGE: %v", err)
	}
	if _, err := as.Exec(ctx, `INSERT INTO fk_child VALUES (1)`); err != nil {
		t.Errorf("a foreign key to a table the role may not read: %v", err)
	}
	var pgErr *pgconn.PgError
	if _, err := as.Exec(ctx, `INSERT INTO fk_child VALUES (2)`); !errors.As(err, &pgErr) || pgErr.Code != "23503" {
		t.Errorf("a foreign key still checks: %v", err)
	}
	if _, err := as.Exec(ctx, `INSERT INTO serial_only (v) VALUES ('x')`); !errors.As(err, &pgErr) || pgErr.Code != "42501" || !strings.Contains(pgErr.Message, "sequence serial_only_id_seq") {
		t.Errorf("serial column without USAGE: %v", err)
	}
}
