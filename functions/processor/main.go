// Command processor is the scheduled processor Lambda: an EventBridge
// schedule invokes it, and each invocation drains webhook_events (see
// shared/processor) until no event is due or less than
// PROCESSOR_SAFETY_MARGIN is left before the invocation's deadline.
// Invocations may overlap (a slow drain and the next tick): processors
// claim disjoint batches, and each event is applied once whatever runs.
//
// The business logic is registered in shared/handlers (handlers.Register).
// Its tables are the migration function's business (functions/migrator):
// the processor's database role may read and write them, never create or
// alter them.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/memlimit"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
)

func main() {
	// First, so that init already runs under the limit.
	_, memErr := memlimit.Apply(os.Getenv)
	h, pool, err := setup(context.Background(), os.Getenv)
	if err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("processor: start-up failed", "err", err)
		os.Exit(1)
	}
	if memErr != nil {
		// Slog's default is the function's JSON logger once setup ran.
		slog.Warn("processor: the memory limit is left to the runtime's default", "err", memErr)
	}
	lambda.StartWithOptions(h, lambda.WithEnableSIGTERM(pool.Close))
}

// handlerFunc is the Lambda handler: the scheduled event is only a tick;
// the stats it returns show in a manual invoke and in tests.
type handlerFunc = func(context.Context, events.EventBridgeEvent) (processor.Stats, error)

// setup reads the configuration and builds the Lambda handler. The pool is
// made once per container, at init, and reused by every invocation.
func setup(ctx context.Context, getenv func(string) string) (handlerFunc, *pgxpool.Pool, error) {
	getenv, creds, err := secrets.Environment(ctx, getenv)
	if err != nil {
		return nil, nil, err
	}
	log, logErr := settings.LoggerFromEnv(getenv)
	cfg, cfgErr := processor.ConfigFromEnv(getenv)
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
	reg := processor.NewRegistry()
	handlers.Register(reg)
	cfg.Pool, cfg.Registry, cfg.Logger = pool, reg, log
	p, err := processor.New(cfg)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}

	h := func(ctx context.Context, _ events.EventBridgeEvent) (processor.Stats, error) {
		st, err := p.Drain(ctx)
		if err != nil {
			log.Error("processor: drain stopped", "cause", inbox.CauseDatabaseUnavailable, "err", err, "stats", st)
			return st, err
		}
		// Drain logged its stats and metrics ("processor: drain metrics").
		return st, nil
	}
	return h, pool, nil
}
