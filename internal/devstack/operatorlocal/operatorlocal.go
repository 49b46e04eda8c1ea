// Package operatorlocal serves the operator API on this machine as a
// stack serves it through its two function URLs: the real handler
// (shared/operatorapi over operations.Service), read-only at one address
// and acting at the other, each behind iamlocal's stand-in for Lambda's
// AWS_IAM authorization, with two local identities that the stack's two
// managed policies would make: a viewer that may only read, and an
// operator that may also act. make dev serves it, and the tests of the
// CLI and the console reach it with the real client
// (internal/operatorclient), signing with SigV4, so the path a deployed
// stack takes is the one tested here. It is development-only: no Lambda
// and no webhookctl links it.
package operatorlocal

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/iamlocal"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The targets: what the stack's OperatorReadPolicy lets invoke (the
// read-only function's URL), and what only its OperatorActPolicy does.
const (
	TargetRead = "read"
	TargetAct  = "act"
)

// Region is the region the local identities sign for: a local URL is no
// function URL, whose host would name it.
const Region = "us-east-1"

// Config is what the endpoints serve.
type Config struct {
	// Store is the database. Required.
	Store *storage.Store
	// ReadStore, when set, is the read-only endpoint's database (the dev
	// stack's pool as webhook_operator_read, as the template deploys it);
	// nil is Store.
	ReadStore *storage.Store
	// Archive is the archiver's configuration, or nil; Blobs is its
	// bucket.
	Archive *archive.Config
	Blobs   *blobstore.Store
	// Logger gets the operator API's lines and the stand-in's refusals.
	Logger *slog.Logger
	// Sources reads the sources document for a re-ingest
	// (operations.Deps.Sources); nil: a re-ingest is refused.
	Sources func(context.Context) (*source.Set, error)
}

// Endpoints are the two handlers and who may call them.
type Endpoints struct {
	// Read serves the read-only operator API, Act the acting one.
	Read, Act http.Handler
	// Operator may call both; Viewer only Read.
	Operator, Viewer iamlocal.Identity
}

// New makes the endpoints, with fresh identities.
func New(cfg Config) (*Endpoints, error) {
	if cfg.Store == nil {
		return nil, errors.New("operatorlocal: Store is required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	op, err := iamlocal.NewIdentity("operator", TargetRead, TargetAct)
	if err != nil {
		return nil, err
	}
	viewer, err := iamlocal.NewIdentity("viewer", TargetRead)
	if err != nil {
		return nil, err
	}
	v, err := iamlocal.NewVerifier(Region, op, viewer)
	if err != nil {
		return nil, err
	}
	e := &Endpoints{Operator: op, Viewer: viewer}
	if e.Read, err = endpoint(cfg, operations.AccessRead, TargetRead, v, log); err != nil {
		return nil, err
	}
	if e.Act, err = endpoint(cfg, operations.AccessAct, TargetAct, v, log); err != nil {
		return nil, err
	}
	return e, nil
}

// endpoint is one function URL: the stand-in's check, then the handler,
// over a Service of the given access.
func endpoint(cfg Config, access operations.Access, target string, v *iamlocal.Verifier, log *slog.Logger) (http.Handler, error) {
	store := cfg.Store
	if access == operations.AccessRead && cfg.ReadStore != nil {
		store = cfg.ReadStore
	}
	svc, err := operations.New(operations.Config{Access: access, Archive: cfg.Archive}, operations.Deps{Store: store, Blobs: cfg.Blobs, Logger: log, Sources: cfg.Sources})
	if err != nil {
		return nil, err
	}
	h, err := operatorapi.New(operatorapi.Deps{API: svc, Caller: caller, Logger: log})
	if err != nil {
		return nil, err
	}
	return iamlocal.Middleware(target, v, log, func(w http.ResponseWriter, r *http.Request, iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, *iam)))
	}), nil
}

type callerKey struct{}

// caller is the principal the stand-in verified, as lambdahttp.IAMCaller
// reads Lambda's in the function.
func caller(r *http.Request) (operatorapi.Caller, bool) {
	iam, ok := r.Context().Value(callerKey{}).(events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription)
	if !ok {
		return operatorapi.Caller{}, false
	}
	return operatorapi.Caller{UserARN: iam.UserARN, UserID: iam.UserID, AccountID: iam.AccountID, AccessKey: iam.AccessKey}, true
}
