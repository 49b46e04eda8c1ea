package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// PoolOptions tunes a pool for the function that owns it.
type PoolOptions struct {
	// ApplicationName shows in pg_stat_activity, so an operator can tell
	// the receiver's connections from the processor's.
	ApplicationName string
	// MaxConns caps the pool; 0 keeps pgx's default (or the URL's
	// pool_max_conns). A Lambda container serves one request at a time, so
	// its functions want 1 or 2.
	MaxConns int32
	// ConnectTimeout bounds each dial, so an unreachable database fails a
	// request in time for a 503 rather than after the sender gives up.
	ConnectTimeout time.Duration
}

// OpenPool parses url, applies opts and connects. It does not wait for the
// database: the first query does, so a Lambda can start while it is down.
func OpenPool(ctx context.Context, url string, opts PoolOptions) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors can echo the URL, password included.
		return nil, fmt.Errorf("database URL is not valid (check DATABASE_URL)")
	}
	if opts.ApplicationName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = opts.ApplicationName
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.ConnectTimeout > 0 {
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	return pool, nil
}
