// Package lambdadb is the start of every Lambda function that connects to
// the database at start-up (the receiver, the processor, the archiver, the
// operator function and the migration function in its direct mode),
// written once: the function's secrets resolved (secrets.Environment), its
// configuration, its logger's and the database's read together so that
// every problem is said at once (lambdastart.Configure), and its pool
// opened as its own database role (the migration function's: the admin).
// What the function then builds on the pool is its main's.
package lambdadb

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdastart"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Conn is a connected function's start: its configuration, its logger
// (slog's default too) and its pool.
type Conn[C any] struct {
	Config C
	Log    *slog.Logger
	Pool   *pgxpool.Pool
}

// Connect resolves the secrets of getenv, reads the function's
// configuration with read and the database's settings
// (storage.PoolConfigFromEnv) with the logger's, and opens the pool as
// pool tunes the database's settings for this function (its component's
// Config.Pool), logging in with the resolved credentials. No connection is
// made yet: see Ping.
func Connect[C any](ctx context.Context, getenv func(string) string,
	read func(getenv func(string) string) (C, error),
	pool func(C, storage.PoolConfig) storage.PoolConfig) (*Conn[C], error) {
	getenv, creds, err := secrets.Environment(ctx, getenv)
	if err != nil {
		return nil, err
	}
	type both struct {
		cfg C
		db  storage.PoolConfig
	}
	env, log, err := lambdastart.Configure(getenv, func(getenv func(string) string) (b both, err error) {
		err = settings.ReadAll(getenv, settings.Into(&b.cfg, read), settings.Into(&b.db, storage.PoolConfigFromEnv))
		return b, err
	})
	if err != nil {
		return nil, err
	}
	db := pool(env.cfg, env.db)
	db.Credentials = creds
	p, err := db.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &Conn[C]{Config: env.cfg, Log: log, Pool: p}, nil
}

// CloseOnError closes the pool when *err is set: a setup defers it, so
// that a start that fails after Connect leaves no connection behind.
func (c *Conn[C]) CloseOnError(err *error) {
	if *err != nil {
		c.Pool.Close()
	}
}

// pingTimeout bounds Ping: a cold start waits no longer for a database
// that does not answer.
const pingTimeout = 3 * time.Second

// Ping connects at init, so that the first request does not pay for it. A
// database down now is not fatal, and is logged: requests answer 503 (the
// sender retries) until it is back. name is the function's, for the line.
func (c *Conn[C]) Ping(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := c.Pool.Ping(ctx); err != nil {
		c.Log.Warn(name+": database not reachable at init; requests will answer 503 until it is",
			"cause", inbox.CauseDatabaseUnavailable, "err", err)
	}
}
