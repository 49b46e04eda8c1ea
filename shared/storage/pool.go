package storage

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The database's environment variables, read by PoolConfigFromEnv.
const (
	// EnvDatabaseURL is the PostgreSQL URL (secrets.Environment fills it in,
	// without a password, from DATABASE_SECRET_ARN, DATABASE_HOST and the
	// like when those are used instead).
	EnvDatabaseURL = "DATABASE_URL"
	// EnvDatabaseQueryMode is how statements are sent (QueryModes); "exec"
	// behind RDS Proxy or PgBouncer.
	EnvDatabaseQueryMode = "DATABASE_QUERY_MODE"
	// EnvDatabaseSSLMode (tls.go) is the weakest TLS accepted.
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

// PoolConfig is how one component connects to the database. URL,
// QueryMode and SSLMode come from the environment (PoolConfigFromEnv); the rest is the
// pool's shape, which is the component's choice: each component's
// ConfigFromEnv sets its own, so every entry point (Lambda, operator CLI,
// dev stack) opens the same pool for the same component.
type PoolConfig struct {
	// URL is the PostgreSQL URL. It may hold a password: never log it
	// (String redacts it).
	URL string
	// SSLMode is the weakest TLS the pool accepts, one of SSLModes, and
	// the sslmode of a URL that names none; "" is DefaultSSLMode
	// (verify-full). Open refuses a URL whose own sslmode, or any host's
	// fallback, is weaker (a *TLSError), but for the local servers
	// secureTLS lets through, and checks certificates against rdsca.Pool
	// unless the URL names its own sslrootcert.
	SSLMode string
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
	// Credentials, when set, log each new connection in: its user and
	// password are asked for every time, so that a rotated password (read
	// again from its secret when the server refuses the old one) or a
	// fresh RDS IAM token (they last 15 minutes) is used without a
	// restart. Connections already open are not touched: PostgreSQL keeps
	// a session whose password changed. secrets.Environment returns them.
	Credentials Credentials
	// RuntimeParams are session settings sent at connect (for example the
	// processor's statement_timeout and idle_in_transaction_session_timeout).
	RuntimeParams map[string]string
	// CancelOnContext makes a context that ends during a statement cancel
	// that statement on the server (a CancelRequest), and keep the
	// connection and its transaction, instead of pgx's default of closing
	// the connection. The processor runs many events in one transaction: a
	// handler that outlives its time limit must fail alone, not lose its
	// neighbours' work. A server that does not act on the cancel (RDS Proxy
	// passes none) still has the connection closed after cancelGrace.
	CancelOnContext bool
}

// cancelGrace is how long a cancelled statement has to end before its
// connection is closed anyway (PoolConfig.CancelOnContext).
const cancelGrace = 2 * time.Second

// Credentials log a pool's new connections in (PoolConfig.Credentials).
type Credentials interface {
	// Login returns the user and password of a new connection to
	// host:port (the endpoint the pool dials: the database's, or its RDS
	// Proxy's); user is the one the URL names.
	Login(ctx context.Context, host string, port uint16, user string) (loginUser, password string, err error)
	// Refused tells that the server refused password, the one Login gave,
	// so that the next Login looks for a new one (IsAuthFailure).
	Refused(password string)
}

// IsAuthFailure reports whether err is the server refusing to log a
// connection in: SQLSTATE 28P01 (invalid_password: a wrong password, or a
// role that does not exist) or 28000 (invalid_authorization_specification:
// no pg_hba.conf entry, or an IAM token refused, which RDS reports as a
// PAM failure).
func IsAuthFailure(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "28P01" || pgErr.Code == "28000")
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
// secrets.Environment when one is used), DATABASE_QUERY_MODE and
// DATABASE_SSLMODE, reporting every problem at once, each naming its
// variable: a URL whose TLS DATABASE_SSLMODE does not accept fails here,
// at start-up, rather than at the first query. The pool's shape gets
// the defaults of a process that is not a Lambda; components replace it.
func PoolConfigFromEnv(getenv func(string) string) (PoolConfig, error) {
	var errs []error
	c := PoolConfig{
		URL:             getenv(EnvDatabaseURL),
		QueryMode:       getenv(EnvDatabaseQueryMode),
		SSLMode:         getenv(EnvDatabaseSSLMode),
		ApplicationName: DefaultApplicationName,
		ConnectTimeout:  DefaultConnectTimeout,
	}
	if c.URL == "" {
		errs = append(errs, fmt.Errorf("%s (or DATABASE_SECRET_ARN) is not set, nor DATABASE_IAM_AUTH=true with DATABASE_USER and DATABASE_HOST", EnvDatabaseURL))
	}
	if _, ok := QueryModes[c.QueryMode]; c.QueryMode != "" && !ok {
		errs = append(errs, fmt.Errorf("%s must be one of cache_statement, cache_describe, describe_exec, exec, simple_protocol; got %q", EnvDatabaseQueryMode, c.QueryMode))
	}
	if err := CheckSSLMode(c.SSLMode); err != nil {
		errs = append(errs, err)
	} else if c.URL != "" {
		// Only the TLS verdict: a URL that does not parse fails in Open,
		// as it always has.
		var tlsErr *TLSError
		if err := CheckTLS(c.URL, c.SSLMode); errors.As(err, &tlsErr) {
			errs = append(errs, fmt.Errorf("%s: %w", EnvDatabaseURL, err))
		}
	}
	return c, errors.Join(errs...)
}

// String describes the configuration with the URL's password redacted, so
// that printing a configuration (a log line, a test failure) leaks nothing.
func (c PoolConfig) String() string {
	return fmt.Sprintf("storage.PoolConfig{URL: %s, QueryMode: %q, SSLMode: %q, ApplicationName: %q, MaxConns: %d, ConnectTimeout: %s, Credentials: %v, RuntimeParams: %v, CancelOnContext: %v}",
		RedactURL(c.URL), c.QueryMode, c.SSLMode, c.ApplicationName, c.MaxConns, c.ConnectTimeout, c.Credentials != nil, c.RuntimeParams, c.CancelOnContext)
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
// start while it is down. It refuses a URL whose TLS SSLMode does not
// accept (a *TLSError), and gives every TLS host the embedded RDS roots.
func (c PoolConfig) Open(ctx context.Context) (*pgxpool.Pool, error) {
	if err := CheckSSLMode(c.SSLMode); err != nil {
		return nil, err
	}
	connString, written, err := withSSLMode(c.URL, c.SSLMode)
	if err != nil {
		return nil, fmt.Errorf("database URL is not valid (check %s): %w", EnvDatabaseURL, err)
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		// pgx's parse errors can echo the URL, password included.
		return nil, fmt.Errorf("database URL is not valid (check %s)", EnvDatabaseURL)
	}
	if err := secureTLS(&cfg.ConnConfig.Config, c.SSLMode, written); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvDatabaseURL, err)
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
	if c.CancelOnContext {
		cfg.ConnConfig.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: cancelGrace}
		}
	}
	if c.Credentials != nil {
		creds := c.Credentials
		cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
			user, password, err := creds.Login(ctx, cc.Host, cc.Port, cc.User)
			if err != nil {
				return fmt.Errorf("database credentials: %w", err)
			}
			cc.User, cc.Password = user, password
			// cc is this connection's own copy: its tracer reports to
			// creds whether the server refused this very password.
			cc.Tracer = refusals{creds: creds, password: password}
			return nil
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	return pool, nil
}

// refusals is a connection's tracer: when the server refuses to log it
// in, it tells the credentials that gave its password. pgx calls a
// connect tracer from the connection's own config, which is the one
// place where the outcome of every dial the pool makes is seen, whichever
// query wanted the connection. It traces nothing else.
type refusals struct {
	creds    Credentials
	password string
}

func (refusals) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (refusals) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (refusals) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return ctx
}

func (r refusals) TraceConnectEnd(_ context.Context, data pgx.TraceConnectEndData) {
	if IsAuthFailure(data.Err) {
		r.creds.Refused(r.password)
	}
}
