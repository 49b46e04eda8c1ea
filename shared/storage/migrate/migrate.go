// Package migrate applies webhook-inbox's schema: the embedded, numbered
// goose migrations of the core tables (Up), the separate migration sets of
// handler packages (FS), and the functions' database roles with exactly
// their privileges (Roles, CoreGrants). It is apart from package
// storage so that what runs queries (the functions) does not link goose;
// shared/dbschema puts the pieces together for the migration function.
package migrate

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the embedded, versioned migration files.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embed pattern above guarantees the folder exists
	}
	return sub
}

// newLocker is the Postgres session advisory lock that serialises
// migrators, so several processes (tests, the migration function, the dev
// stack) may start at once without racing on the schema. A waiting
// migrator asks every second (goose's default is every 5 s), for up to 5
// minutes or its context's end.
func newLocker() (lock.SessionLocker, error) {
	return lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
}

// newMigrator builds a goose provider over the pool, under newLocker's lock.
func newMigrator(pool *pgxpool.Pool) (*goose.Provider, func() error, error) {
	locker, err := newLocker()
	if err != nil {
		return nil, nil, fmt.Errorf("migration lock: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	p, err := goose.NewProvider(goose.DialectPostgres, db, Migrations(), goose.WithSessionLocker(locker))
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migrations: %w", err)
	}
	return p, db.Close, nil
}

// Up applies every pending migration and returns the schema version.
func Up(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	p, closeDB, err := newMigrator(pool)
	if err != nil {
		return 0, err
	}
	defer closeDB()
	if _, err := p.Up(ctx); err != nil {
		return 0, fmt.Errorf("apply migrations: %w", err)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// MigrationStatus is one migration and whether it is applied.
type MigrationStatus struct {
	Version int64
	Source  string
	Applied bool
}

// Status reports every known migration and whether it is applied.
func Status(ctx context.Context, pool *pgxpool.Pool) ([]MigrationStatus, error) {
	p, closeDB, err := newMigrator(pool)
	if err != nil {
		return nil, err
	}
	defer closeDB()
	st, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	out := make([]MigrationStatus, 0, len(st))
	for _, s := range st {
		out = append(out, MigrationStatus{Version: s.Source.Version, Source: s.Source.Path, Applied: s.State == goose.StateApplied})
	}
	return out, nil
}

// FS applies the goose SQL migrations in folder dir of fsys (an
// embed.FS, typically with dir "migrations"), recording them in
// their own version table, and returns the version reached. It serves
// schemas that live beside the core one but are not part of it, such as
// the business tables of the processor's handlers: a separate table keeps
// their numbering independent of shared/storage/migrate/migrations. The same
// session advisory lock as Up serialises concurrent migrators.
func FS(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS, dir, versionTable string) (int64, error) {
	fsys, err := fs.Sub(fsys, dir)
	if err != nil {
		return 0, fmt.Errorf("migrations of %s: %w", versionTable, err)
	}
	locker, err := newLocker()
	if err != nil {
		return 0, fmt.Errorf("migration lock: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithSessionLocker(locker), goose.WithTableName(versionTable))
	if err != nil {
		return 0, fmt.Errorf("migrations of %s: %w", versionTable, err)
	}
	if _, err := p.Up(ctx); err != nil {
		return 0, fmt.Errorf("apply migrations of %s: %w", versionTable, err)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("read schema version of %s: %w", versionTable, err)
	}
	return v, nil
}
