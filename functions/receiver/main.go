// Command receiver is the webhook receiver Lambda: API Gateway HTTP API
// (payload 2.0) in front, the shared receiver http.Handler behind.
package main

import (
	"context"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/webhook-inbox/webhook-inbox/shared/lambdadb"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdahttp"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdastart"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

func main() {
	lambdastart.Start("receiver", setup)
}

// setup reads the configuration and builds the Lambda handler. The pool is
// made once per container, at init, and reused by every invocation.
func setup(ctx context.Context, getenv func(string) string) (_ func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), _ func(), err error) {
	c, err := lambdadb.Connect(ctx, getenv, envFrom, func(e env, db storage.PoolConfig) storage.PoolConfig { return e.cfg.Pool(db) })
	if err != nil {
		return nil, nil, err
	}
	defer c.CloseOnError(&err)
	c.Ping(ctx, "receiver")
	env, log := c.Config, c.Log
	waker, err := wake.Open(ctx, env.waking)
	if err != nil {
		return nil, nil, err
	}
	// The sources are read again from where they were read at init (the
	// relay's S3 copy when deployed), with a client made now.
	readSources, err := secrets.SourcesReader(ctx, getenv)
	if err != nil {
		return nil, nil, err
	}
	h, err := receiver.New(env.cfg, receiver.Deps{
		Sources: env.sources, ReadSources: readSources, Store: storage.New(c.Pool), Wake: waker, Logger: log, RequestID: lambdahttp.RequestID,
	})
	if err != nil {
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
		c.Pool.Close()
	}
	// The receiver answers what the adapter refuses and what panics, by its
	// one status table.
	return lambdahttp.Handler(h, h), shutdown, nil
}

// env is what the receiver reads from its environment beside the
// database's settings: its own, and what its dependencies are opened from.
type env struct {
	cfg     receiver.Config
	sources *source.Set
	waking  wake.Config
}

// envFrom reads env with getenv, every problem at once.
func envFrom(getenv func(string) string) (e env, err error) {
	err = settings.ReadAll(getenv, settings.Into(&e.cfg, receiver.ConfigFromEnv),
		settings.Into(&e.sources, source.Load), settings.Into(&e.waking, wake.ConfigFromEnv))
	return e, err
}
