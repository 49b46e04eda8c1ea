// Command processor is the processor Lambda. Nothing runs it on a clock:
// it is woken (shared/wake) by the receiver after each stored event (an
// asynchronous invoke, or an S3 marker that EventBridge turns into one),
// by the one-time schedules the relay arms for a retry, a lease's end or
// the sweep after a receipt, and by an operator's requeue or replay. Each
// invocation drains the due events (shared/processor), keeps polling for
// PROCESSOR_RUN_FOR after it started (so a receiver's debounced wake-up
// loses nothing), and arms the wake-ups its work left behind: when
// nothing waits, nothing is armed, and the stack stays idle. The event
// that started it is only a signal: whatever its shape, it is ignored.
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
	"encoding/json"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdastart"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

func main() {
	lambdastart.Start("processor", func(ctx context.Context, getenv func(string) string) (any, func(), error) {
		h, pool, err := setup(ctx, getenv)
		if err != nil {
			return nil, nil, err
		}
		return h, pool.Close, nil
	})
}

// handlerFunc is the Lambda handler: the event is only a wake-up; the
// stats it returns show in a manual invoke and in tests.
type handlerFunc = func(context.Context, json.RawMessage) (processor.Stats, error)

// setup reads the configuration and builds the Lambda handler. The pool is
// made once per container, at init, and reused by every invocation.
func setup(ctx context.Context, getenv func(string) string) (handlerFunc, *pgxpool.Pool, error) {
	return setupWith(ctx, getenv, handlers.Register)
}

// setupWith is setup with the handlers register wires (tests give their
// own).
func setupWith(ctx context.Context, getenv func(string) string, register func(*processor.Registry)) (handlerFunc, *pgxpool.Pool, error) {
	// The handlers first: a route registered twice fails start-up with one
	// line naming both registrations, before any connection is made.
	reg := processor.NewRegistry()
	register(reg)
	if err := reg.Err(); err != nil {
		return nil, nil, err
	}
	getenv, creds, err := secrets.Environment(ctx, getenv)
	if err != nil {
		return nil, nil, err
	}
	cfg, log, err := lambdastart.Configure(getenv, processor.ConfigFromEnv)
	if err != nil {
		return nil, nil, err
	}
	cfg.Database.Credentials = creds
	pool, err := cfg.Database.Open(ctx)
	if err != nil {
		return nil, nil, err
	}
	cfg.Pool, cfg.Registry, cfg.Logger = pool, reg, log
	waker, err := wake.Open(ctx, cfg.Waking)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	cfg.Wake = waker
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

	h := func(ctx context.Context, _ json.RawMessage) (processor.Stats, error) {
		st, err := p.Invocation(ctx)
		if err != nil {
			log.Error("processor: invocation failed", "cause", inbox.CauseDatabaseUnavailable, "err", err, "stats", st)
			return st, err
		}
		// The run logged its stats and metrics ("processor: run metrics",
		// or "processor: drain metrics" with PROCESSOR_RUN_FOR=0).
		return st, nil
	}
	return h, pool, nil
}
