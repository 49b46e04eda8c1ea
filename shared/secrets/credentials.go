package secrets

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/rds/auth"

	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// How often the database secret may be read again after the database
// refused its password. A rotation changes the password in the database
// first and in the secret a moment later (typically seconds; up to a
// minute for an RDS-managed secret), so a re-read may still find the
// refused password: each such re-read (or one that fails) doubles the wait
// before the next, up to RefreshMaxWait, so that a wrong password costs
// each container at most one GetSecretValue every 10 s rather than one
// per request. The wait is RefreshWait again once the secret holds
// something new.
const (
	RefreshWait    = time.Second
	RefreshMaxWait = 10 * time.Second
	// refreshTimeout bounds one re-read: it runs while a connection is
	// being made, which the request that wanted it no longer waits for.
	refreshTimeout = 5 * time.Second
)

// secretCredentials are the user and password of the database secret,
// kept in memory and read again when the database refuses them
// (storage.Credentials). The connection's URL is fixed at init: a
// rotation changes the password (and, with alternating users, the user),
// not where the database is.
type secretCredentials struct {
	sm  Getter
	arn string
	now func() time.Time

	mu       sync.Mutex
	user     string
	password string
	stale    bool          // the database refused password: read the secret again
	next     time.Time     // not before then (zero: at once)
	wait     time.Duration // between re-reads that find nothing new
}

func newSecretCredentials(sm Getter, arn, user, password string) *secretCredentials {
	// The first re-read waits for nothing: the read at init was not
	// prompted by a refusal, and a rotation may have come just after it.
	return &secretCredentials{sm: sm, arn: arn, now: time.Now, user: user, password: password, wait: RefreshWait}
}

// Login returns the secret's user and password, first reading the secret
// again when the database refused them and the wait is over. A re-read
// that fails fails this connection (the request answers 503) and is tried
// again after the wait.
func (c *secretCredentials) Login(ctx context.Context, _ string, _ uint16, _ string) (string, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stale && !c.now().Before(c.next) {
		if err := c.reread(ctx); err != nil {
			return "", "", err
		}
	}
	return c.user, c.password, nil
}

// reread reads the secret again; c.mu is held, so connections being made
// meanwhile wait for it rather than read it too.
func (c *secretCredentials) reread(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	v, err := Fetch(ctx, c.sm, c.arn)
	var s DatabaseSecret
	if err == nil {
		s, err = ParseDatabaseSecret(v)
		switch {
		case err != nil:
			err = fmt.Errorf("the secret %s: %w", c.arn, err)
		case s.Username == "" || s.Password == "":
			err = fmt.Errorf("the secret %s has no username or no password", c.arn)
		}
	}
	now := c.now()
	unchanged := err == nil && s.Username == c.user && s.Password == c.password
	if err != nil || unchanged {
		c.wait = min(2*c.wait, RefreshMaxWait)
	} else {
		c.wait = RefreshWait
	}
	c.next = now.Add(c.wait)
	if err != nil {
		slog.Warn("database: could not read the credentials secret again; new connections fail until it can be", "secret", c.arn, "retry_in", c.wait.String(), "err", err)
		return fmt.Errorf("read the database credentials again: %w", err)
	}
	c.stale = false
	if unchanged {
		// Still what the database refused: a rotation has changed the
		// database and not yet the secret, or the password is wrong.
		slog.Warn("database: the credentials secret still holds the refused password; new connections fail until it changes", "secret", c.arn, "next_read_in", c.wait.String())
		return nil
	}
	c.user, c.password = s.Username, s.Password
	slog.Info("database: new credentials from the secret; new connections use them", "secret", c.arn)
	return nil
}

// Refused marks the credentials stale when the password refused is the
// one they hold: a connection that was already being made with an older
// one does not make them read the secret again.
func (c *secretCredentials) Refused(password string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if password != c.password || c.stale {
		return
	}
	c.stale = true
	slog.Warn("database: the server refused the password from the credentials secret; reading it again", "secret", c.arn)
}

// iamCredentials mint an RDS IAM authentication token for each new
// connection (storage.Credentials): tokens last 15 minutes, so one is
// minted per connection rather than read once. The token is signed for
// the host and port the connection goes to, which is what RDS checks,
// directly or through an RDS Proxy (whose endpoint is then the host).
type iamCredentials struct{ cfg aws.Config }

// IAMCredentials returns credentials that mint RDS IAM authentication
// tokens with cfg's region and AWS credentials.
func IAMCredentials(cfg aws.Config) storage.Credentials { return iamCredentials{cfg: cfg} }

func (c iamCredentials) Login(ctx context.Context, host string, port uint16, user string) (string, string, error) {
	token, err := auth.BuildAuthToken(ctx, fmt.Sprintf("%s:%d", host, port), c.cfg.Region, user, c.cfg.Credentials)
	if err != nil {
		return "", "", fmt.Errorf("mint an RDS IAM authentication token for %s: %w", user, err)
	}
	return user, token, nil
}

// Refused does nothing: every connection has a fresh token already, and a
// refused one means a missing grant (rds_iam, rds-db:connect), which no
// retry mends.
func (iamCredentials) Refused(string) {}
