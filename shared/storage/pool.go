package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
	// QueryMode is how statements are sent (see QueryModes). The default,
	// "cache_statement", prepares each statement once per connection: the
	// fastest, but RDS Proxy pins a client to its connection when it sees
	// prepared statements and PgBouncer in transaction mode loses them, so
	// behind a pooler use "exec" (unnamed statements, one round trip).
	QueryMode string
	// Password, when set, supplies the password for each new connection:
	// RDS IAM authentication tokens last 15 minutes, so they are minted per
	// connection rather than read once.
	Password func(ctx context.Context, host string, port uint16, user string) (string, error)
	// RuntimeParams are session settings sent at connect (for example the
	// processor's statement_timeout and idle_in_transaction_session_timeout).
	RuntimeParams map[string]string
}

// QueryModes maps the names accepted in DATABASE_QUERY_MODE to pgx modes.
var QueryModes = map[string]pgx.QueryExecMode{
	"cache_statement": pgx.QueryExecModeCacheStatement,
	"cache_describe":  pgx.QueryExecModeCacheDescribe,
	"describe_exec":   pgx.QueryExecModeDescribeExec,
	"exec":            pgx.QueryExecModeExec,
	"simple_protocol": pgx.QueryExecModeSimpleProtocol,
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
	if opts.QueryMode != "" {
		mode, ok := QueryModes[opts.QueryMode]
		if !ok {
			return nil, fmt.Errorf("unknown query mode %q", opts.QueryMode)
		}
		cfg.ConnConfig.DefaultQueryExecMode = mode
	}
	for k, v := range opts.RuntimeParams {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	if opts.Password != nil {
		password := opts.Password
		cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
			pw, err := password(ctx, cc.Host, cc.Port, cc.User)
			if err != nil {
				return fmt.Errorf("database password: %w", err)
			}
			cc.Password = pw
			return nil
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	return pool, nil
}
