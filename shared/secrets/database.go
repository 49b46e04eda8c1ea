package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The database's connection variables, besides DATABASE_URL and
// DATABASE_QUERY_MODE (storage.PoolConfigFromEnv). Environment reads them
// and gives the pool a DATABASE_URL without a password, and Credentials
// for each connection.
const (
	// EnvDatabaseSecretARN names the function's own credentials secret:
	// a postgres:// URL, or the JSON document RDS and Secrets Manager
	// write ({"username","password"} and optionally "host", "port",
	// "dbname"; an RDS-managed secret, rds!..., has only the first two).
	EnvDatabaseSecretARN = "DATABASE_SECRET_ARN"
	// EnvDatabaseHost, EnvDatabasePort and EnvDatabaseName fill in what the
	// secret lacks and win over what it says, so that a stack points every
	// role at its RDS Proxy; IAM authentication reads them too.
	EnvDatabaseHost = "DATABASE_HOST"
	EnvDatabasePort = "DATABASE_PORT"
	EnvDatabaseName = "DATABASE_NAME"
	// EnvDatabaseUser is the role to log in as with IAM authentication;
	// with a secret, the secret names it.
	EnvDatabaseUser = "DATABASE_USER"
	// EnvDatabaseSSLMode is the weakest TLS accepted (storage.SSLModes;
	// default verify-full) and the sslmode of a connection built from a
	// JSON secret, for IAM authentication, or from a URL secret that names
	// none. A URL secret's own sslmode is kept only when it is at least as
	// strong: a weaker one fails at init (storage.CheckTLS).
	EnvDatabaseSSLMode = storage.EnvDatabaseSSLMode
	// EnvDatabaseIAMAuth, when "true", makes every new connection log in
	// with an RDS IAM authentication token minted from the function's role
	// instead of a password.
	EnvDatabaseIAMAuth = "DATABASE_IAM_AUTH"
)

// Defaults of what neither the environment nor the secret says.
const (
	DefaultDatabasePort = 5432
	// DefaultDatabaseName is the database every PostgreSQL server has.
	DefaultDatabaseName = "postgres"
	DefaultSSLMode      = storage.DefaultSSLMode
)

// DatabaseSecret is what a database secret holds.
type DatabaseSecret struct {
	Username string
	Password string
	// Host, Port (0 when not given) and DBName are empty in an RDS-managed
	// secret.
	Host   string
	Port   int
	DBName string
	// URL says the secret is a postgres:// URL, whose query string (its
	// sslmode and other settings) Query keeps as written.
	URL   bool
	Query string
}

// rdsSecret is the JSON document RDS and Secrets Manager rotation write;
// the other fields they add (engine, dbClusterIdentifier) are ignored.
type rdsSecret struct {
	Username string          `json:"username"`
	Password string          `json:"password"`
	Host     string          `json:"host"`
	Port     json.RawMessage `json:"port"` // a number, or a string in older secrets
	DBName   string          `json:"dbname"`
}

// ParseDatabaseSecret reads a database secret's value: a postgres:// URL
// or a JSON credentials document. Its errors never quote the value, which
// holds a password.
func ParseDatabaseSecret(value string) (DatabaseSecret, error) {
	v := strings.TrimSpace(value)
	if strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://") {
		u, err := url.Parse(v)
		if err != nil {
			// url's error quotes the URL, password included.
			return DatabaseSecret{}, errors.New("it starts as a postgres:// URL but is not a valid URL")
		}
		s := DatabaseSecret{URL: true, Query: u.RawQuery, DBName: strings.TrimPrefix(u.Path, "/"), Host: u.Host}
		if u.User != nil {
			s.Username = u.User.Username()
			s.Password, _ = u.User.Password()
		}
		// A list of hosts (h1:5432,h2:5432) is kept as written.
		if !strings.Contains(u.Host, ",") {
			s.Host = u.Hostname()
			if p := u.Port(); p != "" {
				if s.Port = portNumber(p); s.Port == 0 {
					return DatabaseSecret{}, errors.New("its port is not a port number")
				}
			}
		}
		return s, nil
	}
	var r rdsSecret
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return DatabaseSecret{}, errors.New("it is neither a postgres:// URL nor a JSON credentials document")
	}
	s := DatabaseSecret{Username: r.Username, Password: r.Password, Host: r.Host, DBName: r.DBName}
	if len(r.Port) > 0 && string(r.Port) != "null" {
		if s.Port = portNumber(strings.Trim(string(r.Port), `"`)); s.Port == 0 {
			return DatabaseSecret{}, errors.New("its port is not a port number")
		}
	}
	return s, nil
}

// portNumber returns s as a TCP port, or 0 when it is not one.
func portNumber(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0
	}
	return n
}

// database is what the environment says of the database's connection.
type database struct {
	url       string // DATABASE_URL, used as is
	secretARN string
	host      string
	port      int // 0 when DATABASE_PORT is unset
	name      string
	user      string
	sslmode   string
	iam       bool
}

// databaseFromEnv reads the connection's variables, reporting every
// problem at once, each naming its variable. A DATABASE_URL is used as it
// is (make dev, tests, an operator's own) and the others are not read,
// but DATABASE_IAM_AUTH.
func databaseFromEnv(getenv func(string) string) (database, error) {
	e := settings.NewEnv(getenv)
	d := database{url: getenv(storage.EnvDatabaseURL), iam: e.Bool(EnvDatabaseIAMAuth, false)}
	if d.url != "" {
		return d, e.Err()
	}
	d.secretARN = getenv(EnvDatabaseSecretARN)
	d.host, d.name, d.user = getenv(EnvDatabaseHost), getenv(EnvDatabaseName), getenv(EnvDatabaseUser)
	d.sslmode = e.String(EnvDatabaseSSLMode, DefaultSSLMode)
	e.Add(storage.CheckSSLMode(d.sslmode))
	if v := getenv(EnvDatabasePort); v != "" {
		if d.port = portNumber(v); d.port == 0 {
			e.Errorf("%s must be a port number from 1 to 65535, got %q", EnvDatabasePort, v)
		}
	}
	switch {
	case d.iam:
		if d.user == "" && d.secretARN == "" {
			e.Errorf("%s=true needs %s, the database role to log in as", EnvDatabaseIAMAuth, EnvDatabaseUser)
		}
		if d.host == "" && d.secretARN == "" {
			e.Errorf("%s=true needs %s, the endpoint of the database or of its RDS Proxy", EnvDatabaseIAMAuth, EnvDatabaseHost)
		}
	case d.secretARN != "":
		if d.user != "" {
			e.Errorf("%s is read only with %s=true: with %s the secret names the user", EnvDatabaseUser, EnvDatabaseIAMAuth, EnvDatabaseSecretARN)
		}
	default:
		for _, k := range []string{EnvDatabaseHost, EnvDatabasePort, EnvDatabaseName, EnvDatabaseUser} {
			if getenv(k) != "" {
				e.Errorf("%s is set, but neither %s nor %s=true says how to log in", k, EnvDatabaseSecretARN, EnvDatabaseIAMAuth)
				break
			}
		}
	}
	return d, e.Err()
}

// resolved reports whether the connection is built here, from a secret or
// for IAM authentication, rather than given as DATABASE_URL.
func (d database) resolved() bool { return d.url == "" && (d.secretARN != "" || d.iam) }

// connection builds the connection URL, without a password, from the
// secret's content s (zero when there is no secret) and the environment,
// which wins. It also returns the user to log in as.
func (d database) connection(s DatabaseSecret) (string, string, error) {
	from := "the secret " + d.secretARN + " (" + EnvDatabaseSecretARN + ")"
	user := s.Username
	if d.iam && d.user != "" {
		user = d.user
	}
	if user == "" && d.iam {
		return "", "", fmt.Errorf("%s is not set and %s has no username", EnvDatabaseUser, from)
	}
	if user == "" {
		return "", "", fmt.Errorf("%s has no username", from)
	}
	if !d.iam && s.Password == "" {
		return "", "", fmt.Errorf("%s has no password", from)
	}
	name := first(d.name, s.DBName, DefaultDatabaseName)
	var hostport string
	switch {
	case d.host != "":
		hostport = net.JoinHostPort(d.host, strconv.Itoa(first(d.port, s.Port, DefaultDatabasePort)))
	case s.Host == "":
		if d.secretARN == "" {
			return "", "", fmt.Errorf("%s is not set", EnvDatabaseHost)
		}
		return "", "", fmt.Errorf("%s is not set and %s names no host", EnvDatabaseHost, from)
	case strings.Contains(s.Host, ","):
		if d.port != 0 {
			return "", "", fmt.Errorf("%s names several hosts, each with its port: set %s too, or not %s", from, EnvDatabaseHost, EnvDatabasePort)
		}
		hostport = s.Host
	default:
		hostport = net.JoinHostPort(s.Host, strconv.Itoa(first(d.port, s.Port, DefaultDatabasePort)))
	}
	query := url.Values{"sslmode": {d.sslmode}}.Encode()
	if s.URL {
		// A URL secret's settings are its own, but for an sslmode it
		// does not give, which is DATABASE_SSLMODE's rather than pgx's
		// prefer (plaintext when TLS fails).
		query = s.Query
		if q, err := url.ParseQuery(s.Query); err == nil && !q.Has("sslmode") {
			query = strings.TrimPrefix(s.Query+"&"+url.Values{"sslmode": {d.sslmode}}.Encode(), "&")
		}
	}
	u := url.URL{Scheme: "postgres", User: url.User(user), Host: hostport, Path: "/" + name, RawQuery: query}
	// The URL holds no password, so pgx's error, which may quote it, can
	// be shown.
	if _, err := pgconn.ParseConfig(u.String()); err != nil {
		return "", "", fmt.Errorf("the database connection from %s and %s/%s/%s is not valid: %w",
			from, EnvDatabaseHost, EnvDatabasePort, EnvDatabaseName, err)
	}
	// A URL secret that asks for less than DATABASE_SSLMODE allows fails
	// here, naming the secret, rather than connecting with less.
	if err := storage.CheckTLS(u.String(), d.sslmode); err != nil {
		return "", "", fmt.Errorf("%s: %w", from, err)
	}
	return u.String(), user, nil
}

// first returns the first of vs that is not the zero value.
func first[T comparable](vs ...T) T {
	var zero T
	for _, v := range vs {
		if v != zero {
			return v
		}
	}
	return zero
}

// resolveDatabase fetches the database secret (when there is one) and
// returns the connection URL and the credentials of every new connection:
// the secret's, read again when the database refuses them, or IAM tokens.
func resolveDatabase(ctx context.Context, d database, sm Getter, iam storage.Credentials) (string, storage.Credentials, error) {
	var s DatabaseSecret
	if d.secretARN != "" {
		v, err := Fetch(ctx, sm, d.secretARN)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", EnvDatabaseSecretARN, err)
		}
		if s, err = ParseDatabaseSecret(v); err != nil {
			return "", nil, fmt.Errorf("the secret %s (%s): %w", d.secretARN, EnvDatabaseSecretARN, err)
		}
	}
	u, user, err := d.connection(s)
	if err != nil {
		return "", nil, err
	}
	if d.iam {
		return u, iam, nil
	}
	return u, newSecretCredentials(sm, d.secretARN, user, s.Password), nil
}
