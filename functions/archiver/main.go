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
	"github.com/webhook-inbox/webhook-inbox/shared/lambdadb"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdastart"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

func main() {
	lambdastart.Start("archiver", setup)
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
func setup(ctx context.Context, getenv func(string) string) (_ Handler, _ func(), err error) {
	c, err := lambdadb.Connect(ctx, getenv, envFrom, func(e env, db storage.PoolConfig) storage.PoolConfig { return e.cfg.Pool(db) })
	if err != nil {
		return nil, nil, err
	}
	defer c.CloseOnError(&err)
	env := c.Config
	blobs, err := blobstore.Open(ctx, env.s3)
	if err != nil {
		return nil, nil, err
	}
	waker, err := wake.Open(ctx, env.waking)
	if err != nil {
		return nil, nil, err
	}
	a, err := archive.New(env.cfg, archive.Deps{Store: storage.New(c.Pool), Blobs: blobs, Logger: c.Log, Wake: waker})
	if err != nil {
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
	return h, c.Pool.Close, nil
}

// env is what the archiver reads from its environment beside the
// database's settings: its own, and what its dependencies are opened from.
type env struct {
	cfg    archive.Config
	s3     blobstore.Config
	waking wake.Config
}

// envFrom reads env with getenv, every problem at once.
func envFrom(getenv func(string) string) (e env, err error) {
	err = settings.ReadAll(getenv, settings.Into(&e.cfg, archive.ConfigFromEnv),
		settings.Into(&e.s3, blobstore.ConfigFromEnv), settings.Into(&e.waking, wake.ConfigFromEnv))
	return e, err
}
