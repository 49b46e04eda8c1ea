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
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdadb"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdastart"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
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
func setupWith(ctx context.Context, getenv func(string) string, register func(*processor.Registry)) (_ handlerFunc, _ *pgxpool.Pool, err error) {
	// The handlers first: a route registered twice fails start-up with one
	// line naming both registrations, before any connection is made.
	reg := processor.NewRegistry()
	register(reg)
	if err := reg.Err(); err != nil {
		return nil, nil, err
	}
	c, err := lambdadb.Connect(ctx, getenv, configFromEnv, func(c config, db storage.PoolConfig) storage.PoolConfig { return c.processor.Pool(db) })
	if err != nil {
		return nil, nil, err
	}
	defer c.CloseOnError(&err)
	cfg, log := c.Config, c.Log
	deps := processor.Deps{Pool: c.Pool, Registry: reg, Logger: log}
	if deps.Wake, err = wake.Open(ctx, cfg.waking); err != nil {
		return nil, nil, err
	}
	if cfg.archive.Bucket != "" {
		if deps.Bodies, err = archive.OpenBodies(ctx, cfg.archive, c.Pool); err != nil {
			return nil, nil, err
		}
	}
	p, err := processor.New(cfg.processor, deps)
	if err != nil {
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
	return h, c.Pool, nil
}

// config is what the function reads from its environment beside the
// database's settings: the processor's settings and the connection
// settings of what it runs on.
type config struct {
	processor processor.Config
	// waking is how the wake-ups reach the control bucket or the function.
	waking wake.Config
	// archive is where archived bodies are, for replays; set only when
	// ARCHIVE_BUCKET is.
	archive blobstore.Config
}

// configFromEnv reads config with getenv, reporting every problem at once,
// each once (S3's and the wake-ups' readers share variables).
func configFromEnv(getenv func(string) string) (c config, err error) {
	err = settings.ReadAll(getenv, settings.Into(&c.processor, processor.ConfigFromEnv), settings.Into(&c.waking, wake.ConfigFromEnv),
		settings.If(getenv(blobstore.EnvBucket) != "", settings.Into(&c.archive, blobstore.ConfigFromEnv)))
	return c, err
}
