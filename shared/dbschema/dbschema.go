// Package dbschema brings a database to the schema this build of
// webhook-inbox needs: the core tables' migrations (shared/storage/migrate),
// the handler packages' own (the processor.HandlerSchema it is given: the
// application's handlers.Schemas in every entry point, those plus the tests'
// own handler in the tests), and, with Apply, the functions' database roles
// holding exactly the privileges their statements use.
//
// The migration function (functions/migrator, at each deploy), `make dev`
// (with local passwords, then each component connects as its role) and
// the tests' template databases run Apply, so every test and the dev
// stack run on the deployed schema and grants; `webhookctl migrate up`
// runs Migrate, as the owner, with no roles. Nothing else changes the
// schema: the functions' roles cannot.
package dbschema

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// Versions are the schema versions reached: the core's, and each handler
// package's own.
type Versions struct {
	Core     int64
	Handlers map[string]int64 // by processor.HandlerSchema.Name
}

// String says it in one line: "5 (squareorders 1, stripedunning 1)".
func (v Versions) String() string {
	names := make([]string, 0, len(v.Handlers))
	for n := range v.Handlers {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, v.Handlers[n])
	}
	if len(parts) == 0 {
		return fmt.Sprint(v.Core)
	}
	return fmt.Sprintf("%d (%s)", v.Core, strings.Join(parts, ", "))
}

// Migrate applies every pending migration, the core's then each of
// schemas' (usually handlers.Schemas), and returns the versions reached. It is
// idempotent, and concurrent runs take turns (goose's advisory lock).
func Migrate(ctx context.Context, pool *pgxpool.Pool, schemas []processor.HandlerSchema) (Versions, error) {
	core, err := migrate.Up(ctx, pool)
	if err != nil {
		return Versions{}, err
	}
	v := Versions{Core: core, Handlers: map[string]int64{}}
	for _, t := range schemas {
		hv, err := migrate.FS(ctx, pool, t.Migrations, t.Dir, t.VersionTable)
		if err != nil {
			return v, fmt.Errorf("handler package %s: %w", t.Name, err)
		}
		v.Handlers[t.Name] = hv
	}
	return v, nil
}

// Grants returns every privilege of the function roles: the core tables'
// (migrate.CoreGrants) and, for the processor's role, what each of
// schemas declares, with USAGE on the sequences of the tables it may insert into
// (migrate.Grant.Sequences; migrate.OwnedSequences names them from the
// catalogue).
func Grants(schemas []processor.HandlerSchema) []migrate.Grant {
	grants := migrate.CoreGrants()
	for _, t := range schemas {
		tables := make([]string, 0, len(t.Grants))
		for table := range t.Grants {
			tables = append(tables, table)
		}
		slices.Sort(tables) // one order, so that every run issues the same statements
		for _, table := range tables {
			// Sequences: the sequences the table owns (serial and identity
			// columns) get USAGE with its INSERT, so that a
			// HandlerSchema lists tables only.
			grants = append(grants, migrate.Grant{Role: migrate.RoleProcessor, On: table, Privileges: t.Grants[table], Sequences: true})
		}
	}
	return grants
}

// RolesOptions are how the function roles authenticate (see
// migrate.RolesOptions); their privileges are always the Grants of the
// schemas applied.
type RolesOptions struct {
	Auth      migrate.Auth
	Passwords map[string]string // by role, with migrate.AuthPassword
}

// Apply runs Migrate with schemas, then sets up the function roles
// (migrate.Roles) with Grants(schemas). It needs a user that owns the
// schema's tables and may create roles.
func Apply(ctx context.Context, pool *pgxpool.Pool, schemas []processor.HandlerSchema, o RolesOptions) (Versions, error) {
	v, err := Migrate(ctx, pool, schemas)
	if err != nil {
		return v, err
	}
	err = migrate.Roles(ctx, pool, migrate.RolesOptions{Auth: o.Auth, Passwords: o.Passwords, Grants: Grants(schemas)})
	return v, err
}
