// Command processor is the scheduled processor Lambda: an EventBridge
// schedule invokes it, and each invocation processes webhook_events (see
// shared/processor) in real time: it drains, and polls for new events
// every PROCESSOR_POLL_INTERVAL, for PROCESSOR_RUN_FOR (a little longer
// than the schedule's period, so the next invocation is polling before
// this one stops), and while events are still due, until less than
// PROCESSOR_SAFETY_MARGIN is left before the invocation's deadline. With
// PROCESSOR_RUN_FOR=0 each invocation drains once and returns: the
// schedule alone, for a database that must be left idle between ticks.
// Invocations overlap: processors claim disjoint batches, and each event
// is applied once whatever runs.
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

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
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
	if cfg.Archive.Bucket != "" {
		if cfg.Bodies, err = archive.OpenBodies(ctx, cfg.Archive, pool); err != nil {
			pool.Close()
			return nil, nil, err
		}
	}
	p, err := processor.New(cfg)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}

	h := func(ctx context.Context, _ events.EventBridgeEvent) (processor.Stats, error) {
		st, err := p.Invocation(ctx)
		if err != nil {
			log.Error("processor: invocation failed", "cause", inbox.CauseDatabaseUnavailable, "err", err, "stats", st)
			return st, err
		}
		// The run logged its stats and metrics ("processor: run metrics",
		// or "processor: drain metrics" with real time off).
		return st, nil
	}
	return h, pool, nil
}
