// Command migrator is the migration function: CloudFormation invokes it for
// the stack's custom resource DatabaseSchema (Custom::DatabaseSchema) on
// create and on every deploy, before the functions that depend on it. It brings the database to this build's schema (the core and handler
// migrations) and sets up the functions' database roles with exactly their
// grants, then answers CloudFormation SUCCESS or FAILED (which rolls the
// deploy back). It is the only code that changes the schema; it connects
// as the database's admin (DATABASE_SECRET_ARN). See shared/schemaresource.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/webhook-inbox/webhook-inbox/shared/memlimit"
	"github.com/webhook-inbox/webhook-inbox/shared/schemaresource"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
)

func main() {
	// First, so that init already runs under the limit.
	_, memErr := memlimit.Apply(os.Getenv)
	h, closePool, err := setup(context.Background(), os.Getenv)
	if err != nil {
		// Unlike the other functions it does not exit: CloudFormation would
		// wait for an answer an exited function never sends (the resource's
		// ServiceTimeout, an hour by default). It answers FAILED at once.
		log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
		log.Error("migrator: start-up failed; every Create and Update is answered FAILED", "err", err)
		h, closePool = schemaresource.Failing(err, log), func() {}
	}
	if memErr != nil {
		// Slog's default is the function's JSON logger once setup ran.
		slog.Warn("migrator: the memory limit is left to the runtime's default", "err", memErr)
	}
	lambda.StartWithOptions(h.Handle, lambda.WithEnableSIGTERM(closePool))
}

// setup reads the configuration and builds the handler. The pool is made
// once per container, at init; it connects at the first request.
func setup(ctx context.Context, getenv func(string) string) (*schemaresource.Handler, func(), error) {
	getenv, creds, err := secrets.Environment(ctx, getenv)
	if err != nil {
		return nil, nil, err
	}
	log, logErr := settings.LoggerFromEnv(getenv)
	cfg, cfgErr := schemaresource.ConfigFromEnv(getenv)
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
	cfg.Pool, cfg.Logger = pool, log
	h, err := schemaresource.New(cfg)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return h, pool.Close, nil
}
