package storage

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

// newMigrator builds a goose provider over the pool. A Postgres session
// advisory lock serialises migrators, so several processes (tests, Lambdas,
// the dev stack) may start at once without racing on the schema.
func newMigrator(pool *pgxpool.Pool) (*goose.Provider, func() error, error) {
	locker, err := lock.NewPostgresSessionLocker()
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

// Migrate applies every pending migration and returns the schema version.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
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

// MigrateStatus reports every known migration and whether it is applied.
func MigrateStatus(ctx context.Context, pool *pgxpool.Pool) ([]MigrationStatus, error) {
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
