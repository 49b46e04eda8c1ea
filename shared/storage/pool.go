package storage

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The database's environment variables, read by PoolConfigFromEnv.
const (
	// EnvDatabaseURL is the PostgreSQL URL (secrets.Environment fills it in
	// from DATABASE_SECRET_ARN when that is used instead).
	EnvDatabaseURL = "DATABASE_URL"
	// EnvDatabaseQueryMode is how statements are sent (QueryModes); "exec"
	// behind RDS Proxy or PgBouncer.
	EnvDatabaseQueryMode = "DATABASE_QUERY_MODE"
)

// Defaults of PoolConfigFromEnv, for a process that is not a Lambda (the
// operator's CLI); each component's ConfigFromEnv sets its own.
const (
	// DefaultApplicationName names connections nobody named.
	DefaultApplicationName = "webhook-inbox"
	// DefaultConnectTimeout bounds a dial: a database that does not answer
	// in 10 s is not there, and saying so beats hanging.
	DefaultConnectTimeout = 10 * time.Second
)

// PoolConfig is how one component connects to the database. URL and
// QueryMode come from the environment (PoolConfigFromEnv); the rest is the
// pool's shape, which is the component's choice: each component's
// ConfigFromEnv sets its own, so every entry point (Lambda, operator CLI,
// dev stack) opens the same pool for the same component.
type PoolConfig struct {
	// URL is the PostgreSQL URL. It may hold a password: never log it
	// (String redacts it).
	URL string
	// QueryMode is how statements are sent (see QueryModes). The default,
	// "cache_statement", prepares each statement once per connection: the
	// fastest, but RDS Proxy pins a client to its connection when it sees
	// prepared statements and PgBouncer in transaction mode loses them, so
	// behind a pooler use "exec" (unnamed statements, one round trip).
	QueryMode string
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
	// Password, when set, supplies the password for each new connection:
	// RDS IAM authentication tokens last 15 minutes, so they are minted per
	// connection rather than read once (secrets.Environment returns it).
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

// PoolConfigFromEnv reads DATABASE_URL (already resolved from a secret by
// secrets.Environment when one is used) and DATABASE_QUERY_MODE, reporting
// both problems at once, each naming its variable. The pool's shape gets
// the defaults of a process that is not a Lambda; components replace it.
func PoolConfigFromEnv(getenv func(string) string) (PoolConfig, error) {
	var errs []error
	c := PoolConfig{
		URL:             getenv(EnvDatabaseURL),
		QueryMode:       getenv(EnvDatabaseQueryMode),
		ApplicationName: DefaultApplicationName,
		ConnectTimeout:  DefaultConnectTimeout,
	}
	if c.URL == "" {
		errs = append(errs, fmt.Errorf("%s (or DATABASE_SECRET_ARN) is not set", EnvDatabaseURL))
	}
	if _, ok := QueryModes[c.QueryMode]; c.QueryMode != "" && !ok {
		errs = append(errs, fmt.Errorf("%s must be one of cache_statement, cache_describe, describe_exec, exec, simple_protocol; got %q", EnvDatabaseQueryMode, c.QueryMode))
	}
	return c, errors.Join(errs...)
}

// String describes the configuration with the URL's password redacted, so
// that printing a configuration (a log line, a test failure) leaks nothing.
func (c PoolConfig) String() string {
	return fmt.Sprintf("storage.PoolConfig{URL: %s, QueryMode: %q, ApplicationName: %q, MaxConns: %d, ConnectTimeout: %s, Password: %v, RuntimeParams: %v}",
		RedactURL(c.URL), c.QueryMode, c.ApplicationName, c.MaxConns, c.ConnectTimeout, c.Password != nil, c.RuntimeParams)
}

// RedactURL returns a database URL with its password replaced by "xxxxx",
// or a placeholder when it does not parse (pgx also accepts key=value
// strings, which cannot be redacted reliably).
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		if raw == "" {
			return `""`
		}
		return "(a connection string that is not a URL)"
	}
	return u.Redacted()
}

// Open parses the URL, applies the configuration and returns the pool. It
// does not wait for the database: the first query does, so a Lambda can
// start while it is down.
func (c PoolConfig) Open(ctx context.Context) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(c.URL)
	if err != nil {
		// pgx's parse errors can echo the URL, password included.
		return nil, fmt.Errorf("database URL is not valid (check %s)", EnvDatabaseURL)
	}
	if c.ApplicationName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = c.ApplicationName
	}
	if c.MaxConns > 0 {
		cfg.MaxConns = c.MaxConns
	}
	if c.ConnectTimeout > 0 {
		cfg.ConnConfig.ConnectTimeout = c.ConnectTimeout
	}
	if c.QueryMode != "" {
		mode, ok := QueryModes[c.QueryMode]
		if !ok {
			return nil, fmt.Errorf("unknown query mode %q", c.QueryMode)
		}
		cfg.ConnConfig.DefaultQueryExecMode = mode
	}
	for k, v := range c.RuntimeParams {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	if c.Password != nil {
		password := c.Password
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
