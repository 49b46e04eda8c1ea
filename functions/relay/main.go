// Command relay is the relay function: outside the VPC, it does what the
// functions inside cannot do without an interface endpoint. It arms the
// one-time EventBridge Scheduler schedules that wake the processor and the
// archiver when a marker appears under wake/arm/ in the control bucket,
// copies the sources secret to the control bucket when its AWSCURRENT
// version changes, and answers CloudFormation for Custom::SourcesCopy
// (copy on Create and Update; on Delete, delete the copy and empty the
// bucket's wake/ and config/ prefixes). See shared/relay.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/cfnresponse"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdastart"
	"github.com/webhook-inbox/webhook-inbox/shared/relay"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
)

func main() {
	// Like the migration function, it does not exit: it answers
	// CloudFormation for Custom::SourcesCopy, which would otherwise wait an
	// hour for an answer an exited function never sends.
	lambdastart.StartAnswering("relay", func(ctx context.Context, getenv func(string) string) (any, func(), error) {
		h, err := setup(ctx, getenv)
		return h, nil, err
	}, "every event fails, and CloudFormation's requests are answered", func(cause error, log *slog.Logger) any {
		return failing(cause, log)
	})
}

// handler takes every event the relay is sent (relay.Relay.Handle).
type handler func(context.Context, json.RawMessage) (relay.Outcome, error)

// setup reads the configuration and builds the handler; the AWS clients
// are made once per container, at init, and make no request until used.
func setup(ctx context.Context, getenv func(string) string) (handler, error) {
	env, log, err := lambdastart.Configure(getenv, envFrom)
	if err != nil {
		return nil, err
	}
	// The AWS SDK's default configuration: the function's role and
	// region.
	aws, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("relay: load AWS configuration: %w", err)
	}
	r, err := relay.Open(ctx, env.cfg, env.conn, relay.Deps{
		Secrets: secretsmanager.NewFromConfig(aws), Scheduler: scheduler.NewFromConfig(aws), Logger: log,
	})
	if err != nil {
		return nil, err
	}
	return r.Handle, nil
}

// env is what the relay reads from its environment: its settings, and how
// it reaches the control bucket.
type env struct {
	cfg  relay.Config
	conn blobstore.Config
}

// envFrom reads env with getenv, every problem at once.
func envFrom(getenv func(string) string) (e env, err error) {
	err = settings.ReadAll(getenv, settings.Into(&e.cfg, relay.ConfigFromEnv), settings.Into(&e.conn, blobstore.ConnectionFromEnv))
	return e, err
}

// failing is the handler of a relay whose start-up failed: every event
// fails with the cause, and a CloudFormation request is first answered
// (Create and Update FAILED with the cause; Delete SUCCESS, so the stack
// can still be deleted, though the control bucket is not emptied).
func failing(cause error, log *slog.Logger) handler {
	return func(ctx context.Context, raw json.RawMessage) (relay.Outcome, error) {
		var req cfnresponse.Request
		if json.Unmarshal(raw, &req) != nil || req.RequestType == "" || req.ResponseURL == "" {
			return relay.Outcome{}, errors.Join(errors.New("relay: start-up failed"), cause)
		}
		resp := cfnresponse.For(req, relay.PhysicalResourceID)
		resp.Status, resp.Reason = cfnresponse.StatusFailed, string(req.RequestType)+" failed: the relay did not start: "+cause.Error()
		if string(req.RequestType) == cfnresponse.RequestDelete {
			resp.Status, resp.Reason = cfnresponse.StatusSuccess, "the relay did not start, so the control bucket was not emptied: "+cause.Error()
		}
		if _, err := (cfnresponse.Sender{}).Send(ctx, req.ResponseURL, resp); err != nil {
			log.Error("relay: the custom resource's answer could not be delivered", "cause", relay.CauseAnswerFailed, "err", err)
			return relay.Outcome{Event: "custom_resource", Status: resp.Status}, err
		}
		return relay.Outcome{Event: "custom_resource", Status: resp.Status}, nil
	}
}
