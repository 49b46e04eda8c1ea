// Command archiver is the archiver Lambda. It runs on no schedule: the
// processor arms a run for when what it processed becomes old enough to
// archive, and each run arms the next one for whatever it left (shared/wake,
// one-time schedules the relay makes). Each invocation archives the
// payloads of events processed long enough ago to S3 (package archive)
// until none is left or the invocation's deadline is near; the event that
// started it is only a signal.
package main

import (
	"context"
	"encoding/json"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdastart"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

func main() {
	lambdastart.Start("archiver", func(ctx context.Context, getenv func(string) string) (any, func(), error) {
		return setup(ctx, getenv)
	})
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

// Handler runs one archive run per wake-up.
type Handler func(context.Context, json.RawMessage) (Summary, error)

// setup reads the configuration and builds the handler. The pool and the S3
// client are made once per container, at init, and reused.
func setup(ctx context.Context, getenv func(string) string) (Handler, func(), error) {
	getenv, creds, err := secrets.Environment(ctx, getenv)
	if err != nil {
		return nil, nil, err
	}
	cfg, log, err := lambdastart.Configure(getenv, archive.ConfigFromEnv)
	if err != nil {
		return nil, nil, err
	}
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
	waker, err := wake.Open(ctx, cfg.Waking)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	cfg.Store, cfg.Blobs, cfg.Logger, cfg.Wake = storage.New(pool), blobs, log, waker
	a, err := archive.New(cfg)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	h := func(ctx context.Context, _ json.RawMessage) (Summary, error) {
		// RunOnce stops starting batches when ctx's deadline (the
		// invocation's) is near, and logs the run and its metrics; then
		// the next run is armed. An error fails the invocation, which
		// Lambda's Errors metric counts and its retries try again; nothing
		// is lost.
		res, err := a.Invocation(ctx)
		return Summary{
			Events: res.Events, Objects: res.Batches, ObjectBytes: res.ObjectBytes,
			BodyBytes: res.BodyBytes, Swept: res.Swept, Truncated: res.Truncated,
		}, err
	}
	return h, pool.Close, nil
}
