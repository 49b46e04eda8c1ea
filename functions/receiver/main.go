// Command receiver is the webhook receiver Lambda: API Gateway HTTP API
// (payload 2.0) in front, the shared receiver http.Handler behind.
package main

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdahttp"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdastart"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

func main() {
	lambdastart.Start("receiver", func(ctx context.Context, getenv func(string) string) (any, func(), error) {
		return setup(ctx, getenv)
	})
}

// setup reads the configuration and builds the Lambda handler. The pool is
// made once per container, at init, and reused by every invocation.
func setup(ctx context.Context, getenv func(string) string) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), func(), error) {
	getenv, creds, err := secrets.Environment(ctx, getenv)
	if err != nil {
		return nil, nil, err
	}
	env, log, err := lambdastart.Configure(getenv, envFrom)
	if err != nil {
		return nil, nil, err
	}
	db := env.cfg.Pool(env.db)
	db.Credentials = creds
	pool, err := db.Open(ctx)
	if err != nil {
		return nil, nil, err
	}
	// Connect at init so the first webhook does not pay for it. A database
	// that is down now is not fatal: requests answer 503 until it is back.
	pingCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		log.Warn("receiver: database not reachable at init; requests will answer 503 until it is", "cause", inbox.CauseDatabaseUnavailable, "err", err)
	}
	waker, err := wake.Open(ctx, env.waking)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	h, err := receiver.New(env.cfg, receiver.Deps{
		Sources: env.sources, Store: storage.New(pool), Wake: waker, Logger: log, RequestID: lambdahttp.RequestID,
	})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	// At shutdown (SIGTERM), the rejection records still queued are
	// written before the pool closes; Lambda allows about 500 ms.
	shutdown := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			log.Warn("receiver: rejection records still queued at shutdown were dropped", "err", err)
		}
		pool.Close()
	}
	// The receiver answers what the adapter refuses and what panics, by its
	// one status table.
	return lambdahttp.Handler(h, h), shutdown, nil
}

// env is what the receiver reads from its environment: its settings, and
// what its dependencies are opened from.
type env struct {
	cfg     receiver.Config
	db      storage.PoolConfig
	sources *source.Set
	waking  wake.Config
}

// envFrom reads env with getenv, every problem at once.
func envFrom(getenv func(string) string) (env, error) {
	var e env
	var errs [4]error
	e.cfg, errs[0] = receiver.ConfigFromEnv(getenv)
	e.db, errs[1] = storage.PoolConfigFromEnv(getenv)
	e.sources, errs[2] = source.Load(getenv)
	e.waking, errs[3] = wake.ConfigFromEnv(getenv)
	return e, errors.Join(errs[:]...)
}
