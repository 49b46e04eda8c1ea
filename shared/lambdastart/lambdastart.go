// Package lambdastart starts a Lambda function: what every main in
// functions/ does around its own wiring, written once. Start sets the Go
// runtime's memory limit from the function's memory (first, so that init
// already runs under it), builds the handler with the function's setup,
// logs a start-up failure as one JSON line and exits (or, for a function
// that answers CloudFormation, serves a handler that answers the failure),
// and starts the Lambda runtime with the shutdown hook run on SIGTERM.
// Configure is the start of each setup: the logger's and the component's
// configuration read together, and the logger set as slog's default.
//
// It links no database and no secret reader, so that the relay, outside
// the VPC, may use it; the mains that connect resolve their secrets
// (secrets.Environment) before Configure.
package lambdastart

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/webhook-inbox/webhook-inbox/shared/memlimit"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
)

// Setup builds a function's Lambda handler (H: any shape lambda.Start
// takes) from its environment, and the hook run at shutdown (SIGTERM;
// nil for none).
type Setup[H any] func(ctx context.Context, getenv func(string) string) (handler H, shutdown func(), err error)

// Failing builds the handler a function serves when its setup failed,
// instead of exiting: a function that answers CloudFormation must answer,
// or the stack waits for the resource's whole ServiceTimeout (an hour by
// default). log is the start-up's JSON logger on stderr.
type Failing func(cause error, log *slog.Logger) any

// Start runs the function called name: a start-up failure is logged and
// the process exits with status 1.
func Start[H any](name string, setup Setup[H]) {
	start(name, erase(setup), "", nil)
}

// StartAnswering is Start for a function that answers CloudFormation: a
// start-up failure is logged, followed by consequence (what the failing
// handler does), and failing's handler is served.
func StartAnswering[H any](name string, setup Setup[H], consequence string, failing Failing) {
	start(name, erase(setup), consequence, failing)
}

// erase is setup with its handler's type left to lambda.Start.
func erase[H any](setup Setup[H]) Setup[any] {
	return func(ctx context.Context, getenv func(string) string) (any, func(), error) {
		return setup(ctx, getenv)
	}
}

func start(name string, setup Setup[any], consequence string, failing Failing) {
	// First, so that init already runs under the limit.
	_, memErr := memlimit.Apply(os.Getenv)
	h, shutdown, err := setup(context.Background(), os.Getenv)
	if err != nil {
		log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
		msg := name + ": start-up failed"
		if failing == nil {
			log.Error(msg, "err", err)
			os.Exit(1)
		}
		log.Error(msg+"; "+consequence, "err", err)
		h, shutdown = failing(err, log), func() {}
	}
	if memErr != nil {
		// Slog's default is the function's JSON logger once setup ran.
		slog.Warn(name+": the memory limit is left to the runtime's default", "err", memErr)
	}
	if shutdown == nil {
		shutdown = func() {}
	}
	lambda.StartWithOptions(h, lambda.WithEnableSIGTERM(shutdown))
}

// Configure reads the logger's configuration and the component's (with
// configFromEnv), reporting both errors together, and sets the logger as
// slog's default, so that every line is JSON, a library's included.
func Configure[C any](getenv func(string) string, configFromEnv func(func(string) string) (C, error)) (C, *slog.Logger, error) {
	log, logErr := settings.LoggerFromEnv(getenv)
	cfg, cfgErr := configFromEnv(getenv)
	if err := errors.Join(logErr, cfgErr); err != nil {
		var zero C
		return zero, nil, err
	}
	slog.SetDefault(log)
	return cfg, log, nil
}
