// Command migrator is the migration function: CloudFormation invokes it for
// the stack's custom resource DatabaseSchema (Custom::DatabaseSchema) on
// create and on every deploy, before the functions that depend on it. It
// brings the database to this build's schema (the core and handler
// migrations) and sets up the functions' database roles with exactly their
// grants, then answers CloudFormation SUCCESS or FAILED (which rolls the
// deploy back). It is the only code that changes the schema; it connects
// as the database's admin (DATABASE_SECRET_ARN). See shared/migrator.
//
// One binary, three modes (MIGRATOR_MODE): unset (direct), one function
// does it all; front, outside the VPC, answers CloudFormation and invokes
// the function in apply mode (MIGRATOR_FUNCTION) with the secrets it read;
// apply, inside the VPC, migrates with what the front sends. Each mode
// refuses the other's events with an error saying which mode it runs in.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdadb"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdastart"
	"github.com/webhook-inbox/webhook-inbox/shared/migrator"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
)

func main() {
	// Unlike the other functions it does not exit: CloudFormation would
	// wait for an answer an exited function never sends (the resource's
	// ServiceTimeout, an hour by default). It answers FAILED at once (in
	// apply mode, it returns FAILED to the front, which answers).
	lambdastart.StartAnswering("migrator", setup, "every Create and Update is answered FAILED", func(cause error, log *slog.Logger) any {
		return failing(os.Getenv, cause, log)
	})
}

// handler is the function's entry in every mode: each checks the event's
// shape against its mode.
type handler func(context.Context, json.RawMessage) (any, error)

// setup reads the mode and its configuration and builds the handler. In
// the direct mode the pool is made once per container, at init; it
// connects at the first request. The front reads its secrets at each
// request (a rotation between deploys is seen), and the apply mode opens a
// pool per request with the credentials the front sends.
func setup(ctx context.Context, getenv func(string) string) (_ handler, _ func(), err error) {
	mode, modeErr := migrator.ModeFromEnv(getenv)
	switch mode {
	case migrator.ModeFront:
		// modeErr is nil in the front and apply modes: an unknown mode
		// reads as the direct one.
		cfg, log, err := lambdastart.Configure(getenv, migrator.FrontConfigFromEnv)
		if err != nil {
			return nil, nil, err
		}
		// Made here, not at the first request: a failure is answered
		// FAILED (failing), as any start-up failure of this function is.
		awsCfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("migration front: load AWS configuration: %w", err)
		}
		f, err := migrator.NewFront(cfg, migrator.FrontDeps{
			Secrets: secretsmanager.NewFromConfig(awsCfg), Lambda: lambda.NewFromConfig(awsCfg), Logger: log,
		})
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, raw json.RawMessage) (any, error) { return f.HandleEvent(ctx, raw) }, func() {}, nil
	case migrator.ModeApply:
		log, err := settings.LoggerFromEnv(getenv)
		if err != nil {
			return nil, nil, err
		}
		slog.SetDefault(log)
		a := migrator.NewApplier(getenv, handlers.Schemas, log)
		return func(ctx context.Context, raw json.RawMessage) (any, error) { return a.HandleEvent(ctx, raw) }, func() {}, nil
	}
	if modeErr != nil {
		return nil, nil, modeErr
	}
	// As the other functions that connect start: the settings, the
	// logger's and the database's read together, so that a start-up
	// failure's FAILED answer names every problem at once.
	c, err := lambdadb.Connect(ctx, getenv, migrator.ConfigFromEnv, migrator.Config.Pool)
	if err != nil {
		return nil, nil, err
	}
	defer c.CloseOnError(&err)
	h, err := migrator.New(c.Config, migrator.Deps{Pool: c.Pool, Schemas: handlers.Schemas, Logger: c.Log})
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, raw json.RawMessage) (any, error) { return h.HandleEvent(ctx, raw) }, c.Pool.Close, nil
}

// failing is the handler of a function whose start-up failed: in apply
// mode it returns FAILED to the front; otherwise it answers CloudFormation
// (Create and Update FAILED with the cause, Delete SUCCESS).
func failing(getenv func(string) string, cause error, log *slog.Logger) handler {
	if mode, err := migrator.ModeFromEnv(getenv); err == nil && mode == migrator.ModeApply {
		a := migrator.FailingApplier(cause, log)
		return func(ctx context.Context, raw json.RawMessage) (any, error) { return a.HandleEvent(ctx, raw) }
	}
	h := migrator.Failing(cause, log, migrator.LocalResponseURLFromEnv(getenv))
	return func(ctx context.Context, raw json.RawMessage) (any, error) { return h.HandleEvent(ctx, raw) }
}
