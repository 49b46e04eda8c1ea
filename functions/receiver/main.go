// Command receiver is the webhook receiver Lambda: API Gateway HTTP API
// (payload 2.0) in front, the shared receiver http.Handler behind.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/webhook-inbox/webhook-inbox/shared/lambdahttp"
	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func main() {
	h, closePool, err := setup(context.Background(), os.Getenv)
	if err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("receiver: start-up failed", "err", err)
		os.Exit(1)
	}
	lambda.StartWithOptions(h, lambda.WithEnableSIGTERM(closePool))
}

// setup reads the configuration and builds the Lambda handler. The pool is
// made once per container, at init, and reused by every invocation.
func setup(ctx context.Context, getenv func(string) string) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), func(), error) {
	getenv, password, err := secrets.Environment(ctx, getenv)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := settings.LoadReceiver(getenv)
	if err != nil {
		return nil, nil, err
	}
	log := settings.Logger(cfg.LogLevel)
	// A container serves one request at a time: two connections cover the
	// insert and the rare mismatch record without holding more of the
	// database's connection budget than the function's concurrency needs.
	pool, err := storage.OpenPool(ctx, cfg.Database.URL, storage.PoolOptions{
		ApplicationName: "webhook-inbox-receiver", MaxConns: 2, ConnectTimeout: 3 * time.Second,
		QueryMode: cfg.Database.QueryMode, Password: password,
	})
	if err != nil {
		return nil, nil, err
	}
	// Connect at init so the first webhook does not pay for it. A database
	// that is down now is not fatal: requests answer 503 until it is back.
	pingCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		log.Warn("receiver: database not reachable at init; requests will answer 503 until it is", "cause", "database_unavailable", "err", err)
	}
	h, err := receiver.New(receiver.Config{
		Sources:      cfg.Sources,
		Store:        storage.New(pool),
		Logger:       log,
		MaxBodyBytes: cfg.MaxBodyBytes,
		StoreTimeout: cfg.StoreTimeout,
		RequestID:    lambdahttp.RequestID,
		Metrics:      metrics.Emitter{Namespace: cfg.MetricsNamespace},
	})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return lambdahttp.Handler(h), pool.Close, nil
}
