// Command operator is the operator function: the operator API
// (shared/operatorapi) over operations.Service, behind a Lambda function
// URL with AuthType AWS_IAM, so that webhookctl and the console on an
// operator's laptop reach a deployed stack with nothing but the operator's
// AWS credentials. Lambda verifies each request's SigV4 signature and
// hands the function the caller's principal (requestContext.authorizer.iam),
// which every action records as its operator. The template deploys it
// twice: OPERATOR_ACCESS=read, whose database role may only read, and
// OPERATOR_ACCESS=act, for operators the stack's OperatorActPolicy admits.
package main

import (
	"context"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdadb"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdahttp"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdastart"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

func main() {
	lambdastart.Start("operator", setup)
}

// setup reads the configuration and builds the Lambda handler. The pool is
// made once per container, at init, and so is the archive's client (which
// makes no request until an archive request needs it).
func setup(ctx context.Context, getenv func(string) string) (_ func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), _ func(), err error) {
	c, err := lambdadb.Connect(ctx, getenv, envFrom, func(e env, db storage.PoolConfig) storage.PoolConfig { return e.cfg.Pool(db) })
	if err != nil {
		return nil, nil, err
	}
	defer c.CloseOnError(&err)
	c.Ping(ctx, "operator")
	env, log, pool := c.Config, c.Log, c.Pool
	cfg := env.cfg
	deps := operations.Deps{Store: storage.New(pool), Logger: log}
	if cfg.Access == operations.AccessAct {
		// A requeue or replay wakes the processor, which runs only when
		// woken.
		if deps.Wake, err = wake.Open(ctx, env.waking); err != nil {
			return nil, nil, err
		}
	}
	if cfg.Access == operations.AccessAct {
		// A re-ingest verifies quarantined deliveries with the sources as
		// they are at that moment: read again from where the receiver
		// reads them (the relay's S3 copy when deployed).
		if deps.Sources, err = sourcesReader(ctx, getenv); err != nil {
			return nil, nil, err
		}
	}
	if cfg.Archive != nil {
		// Opening the bucket makes no request: a cold start that serves
		// no archive request pays only for the client.
		if deps.Blobs, err = blobstore.Open(ctx, env.s3); err != nil {
			return nil, nil, err
		}
	}
	svc, err := operations.New(cfg, deps)
	if err != nil {
		return nil, nil, err
	}
	h, err := operatorapi.New(operatorapi.Deps{API: svc, Caller: caller, RequestID: lambdahttp.RequestID, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	log.Info("operator: ready", "access", cfg.Access, "archive", cfg.Archive != nil)
	return lambdahttp.Handler(h, h), pool.Close, nil
}

// sourcesReader reads the sources document afresh for each re-ingest
// (secrets.SourcesReader: the file, the S3 copy or the secret), or once
// where it is inline (WEBHOOK_SOURCES: a running container's environment
// never changes); nil where none is configured.
func sourcesReader(ctx context.Context, getenv func(string) string) (func(context.Context) (*source.Set, error), error) {
	read, err := secrets.SourcesReader(ctx, getenv)
	switch {
	case err != nil:
		return nil, err
	case read != nil:
		return func(ctx context.Context) (*source.Set, error) {
			doc, err := read(ctx)
			if err != nil {
				return nil, err
			}
			return source.Parse(doc)
		}, nil
	case getenv(source.EnvSources) != "":
		return func(context.Context) (*source.Set, error) { return source.Load(getenv) }, nil
	}
	return nil, nil
}

// caller is the principal Lambda verified for the request: the function
// URL's AWS_IAM authorizer, which no client can write.
func caller(r *http.Request) (operatorapi.Caller, bool) {
	iam, ok := lambdahttp.IAMCaller(r)
	if !ok {
		return operatorapi.Caller{}, false
	}
	return operatorapi.Caller{UserARN: iam.UserARN, UserID: iam.UserID, AccountID: iam.AccountID, AccessKey: iam.AccessKey}, true
}

// env is what the operator function reads from its environment: its
// settings, and what its dependencies are opened from.
type env struct {
	cfg    operations.Config
	s3     blobstore.Config
	waking wake.Config
}

// envFrom reads env with getenv, every problem at once, each once (the
// archive's and the operator's settings share ARCHIVE_MIN_AGE). The bucket
// is read only where the archive is configured.
func envFrom(getenv func(string) string) (e env, err error) {
	err = settings.ReadAll(getenv, settings.Into(&e.cfg, operations.ConfigFromEnv), settings.Into(&e.waking, wake.ConfigFromEnv),
		settings.If(operations.ArchiveConfigured(getenv), settings.Into(&e.s3, blobstore.ConfigFromEnv)))
	return e, err
}
