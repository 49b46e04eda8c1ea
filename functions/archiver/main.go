// Command archiver is the scheduled archiver Lambda: an EventBridge schedule
// invokes it, and each invocation archives the payloads of events processed
// long enough ago to S3 (package archive) until none is left or the
// invocation's deadline is near.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/memlimit"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func main() {
	// First, so that init already runs under the limit.
	_, memErr := memlimit.Apply(os.Getenv)
	h, closePool, err := setup(context.Background(), os.Getenv)
	if err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("archiver: start-up failed", "err", err)
		os.Exit(1)
	}
	if memErr != nil {
		// Slog's default is the function's JSON logger once setup ran.
		slog.Warn("archiver: the memory limit is left to the runtime's default", "err", memErr)
	}
	lambda.StartWithOptions(h, lambda.WithEnableSIGTERM(closePool))
}

// Summary is what an invocation returns (visible in the Lambda console and
// in test invocations).
type Summary struct {
	Events      int   `json:"events"`
	Objects     int   `json:"objects"`
	ObjectBytes int64 `json:"object_bytes"`
	BodyBytes   int64 `json:"body_bytes"`
	Swept       int   `json:"swept"`
	Truncated   bool  `json:"truncated"`
}

// Handler runs one archive run per scheduled event.
type Handler func(context.Context, events.EventBridgeEvent) (Summary, error)

// setup reads the configuration and builds the handler. The pool and the S3
// client are made once per container, at init, and reused.
func setup(ctx context.Context, getenv func(string) string) (Handler, func(), error) {
	getenv, creds, err := secrets.Environment(ctx, getenv)
	if err != nil {
		return nil, nil, err
	}
	log, logErr := settings.LoggerFromEnv(getenv)
	cfg, cfgErr := archive.ConfigFromEnv(getenv)
	if err := errors.Join(logErr, cfgErr); err != nil {
		return nil, nil, err
	}
	// Every line is JSON, a library's through slog's default included.
	slog.SetDefault(log)
	cfg.Database.Credentials = creds
	pool, err := cfg.Database.Open(ctx)
	if err != nil {
		return nil, nil, err
	}
	blobs, err := blobstore.Open(ctx, cfg.S3)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	cfg.Store, cfg.Blobs, cfg.Logger = storage.New(pool), blobs, log
	a, err := archive.New(cfg)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	h := func(ctx context.Context, ev events.EventBridgeEvent) (Summary, error) {
		// RunOnce stops starting batches when ctx's deadline (the
		// invocation's) is near, and logs the run and its metrics. An
		// error fails the invocation, which Lambda's Errors metric counts;
		// nothing is lost, and the next schedule retries.
		res, err := a.RunOnce(ctx)
		return Summary{
			Events: res.Events, Objects: res.Batches, ObjectBytes: res.ObjectBytes,
			BodyBytes: res.BodyBytes, Swept: res.Swept, Truncated: res.Truncated,
		}, err
	}
	return h, pool.Close, nil
}
