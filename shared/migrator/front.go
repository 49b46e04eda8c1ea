package migrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/webhook-inbox/webhook-inbox/shared/cfnresponse"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// Invoker is the part of the Lambda client the front uses.
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// FrontConfig configures a Front: settings only (FrontConfigFromEnv reads
// them); the clients it works through are its FrontDeps.
type FrontConfig struct {
	// Function is the migration function in apply mode (MIGRATOR_FUNCTION).
	Function string
	// DatabaseSecretARN is the admin secret read for it (DATABASE_SECRET_ARN).
	DatabaseSecretARN string
	// RolesAuth is how the function roles authenticate
	// (MIGRATOR_ROLES_AUTH); a request whose Auth disagrees fails.
	RolesAuth migrate.Auth
	// LocalResponseURL lets the front answer a loopback ResponseURL
	// (MIGRATOR_LOCAL_RESPONSE_URL): local stacks and tests only.
	LocalResponseURL bool
}

// FrontDeps is what a Front works through and reports to.
type FrontDeps struct {
	// Secrets reads the secrets and Lambda invokes the function. Required:
	// the migration function's main makes them at start-up, where a
	// failure is still answered (FAILED) by the function.
	Secrets secrets.Getter
	Lambda  Invoker
	// Logger gets one line per request and one per answer; nil discards.
	Logger *slog.Logger
}

// Front answers the custom resource's requests outside the VPC: Create and
// Update are done by the apply mode, which it invokes synchronously
// (RequestResponse) with the secrets it read, and whose result it answers;
// Delete is answered SUCCESS at once without invoking anything, so that a
// teardown never waits on the VPC's network (in create mode, the network
// may already be gone).
//
// The invocation is bounded by the front's own deadline less the answer's
// reserve: give the front a longer Timeout than the apply function's, so
// that the apply function's own "ran out of time" answer arrives first. If
// the front gives up first, the apply function may still be migrating: a
// migration runs under goose's lock and is idempotent, so the next deploy
// finishes it.
type Front struct {
	cfg    FrontConfig
	sm     secrets.Getter
	lambda Invoker
	log    *slog.Logger
	send   cfnresponse.Sender
}

// NewFront returns a Front; cfg's Function and deps' clients are required.
func NewFront(cfg FrontConfig, deps FrontDeps) (*Front, error) {
	var missing []error
	if cfg.Function == "" {
		missing = append(missing, fmt.Errorf("the front needs %s, the migration function to invoke", EnvFunction))
	}
	if deps.Secrets == nil {
		missing = append(missing, errors.New("the front needs its Secrets Manager client (FrontDeps.Secrets)"))
	}
	if deps.Lambda == nil {
		missing = append(missing, errors.New("the front needs its Lambda client (FrontDeps.Lambda)"))
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("migrator: %w", errors.Join(missing...))
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &Front{cfg: cfg, sm: deps.Secrets, lambda: deps.Lambda, log: deps.Logger, send: cfnresponse.Sender{}}, nil
}

// HandleEvent is the front's Lambda entry: a CloudFormation request is
// answered (Handle); an apply payload (the front invoking itself: its
// MIGRATOR_FUNCTION names the front) or any other event is refused with an
// error saying so.
func (f *Front) HandleEvent(ctx context.Context, raw json.RawMessage) (Response, error) {
	switch shapeOf(raw) {
	case shapeCloudFormation:
		var req Request
		if err := json.Unmarshal(raw, &req); err != nil {
			return Response{}, fmt.Errorf("schema resource front: the CloudFormation request does not decode: %w", err)
		}
		return f.Handle(ctx, req)
	case shapeApply:
		err := fmt.Errorf("schema resource front: %s=%s takes CloudFormation's requests, and this is a front's payload for the apply mode: "+
			"%s must name the migration function in %s mode, not a front", EnvMode, ModeFront, EnvFunction, ModeApply)
		f.log.Error("schema resource front: refused", "err", err)
		return Response{}, err
	default:
		err := errors.New("schema resource front: the event is not a CloudFormation custom resource request (no RequestType and ResponseURL)")
		f.log.Error("schema resource front: refused", "err", err)
		return Response{}, err
	}
}

// Handle answers one request. The error is the delivery's, never the
// work's: a FAILED answer delivered is a successful invocation.
func (f *Front) Handle(ctx context.Context, req Request) (Response, error) {
	return respond(ctx, f.log, f.send, f.cfg.LocalResponseURL, req, f.createOrUpdate)
}

// createOrUpdate reads the secrets, invokes the apply function and returns
// its result, with every secret value read, for the caller to keep out of
// the answer.
func (f *Front) createOrUpdate(work context.Context, reserve time.Duration, req Request) (ApplyResult, []string) {
	rt := string(req.RequestType)
	props := req.ResourceProperties
	// The direct mode's own checks, before anything is read or invoked.
	if err := checkProps(props, f.cfg.RolesAuth); err != nil {
		return failed(rt + " failed: " + err.Error()), nil
	}
	payload := ApplyRequest{
		ApplyVersion: PayloadVersion, RequestType: rt, RequestID: req.RequestID, StackID: req.StackID,
		LogicalResourceID: req.LogicalResourceID, Properties: props, DatabaseSecretARN: f.cfg.DatabaseSecretARN,
		Secrets: map[string]string{},
	}
	if err := f.readSecrets(work, props, payload.Secrets); err != nil {
		return failed(rt + " failed: " + reason(work, reserve, err)), payload.secretValues()
	}
	values := payload.secretValues()
	body, err := json.Marshal(payload)
	if err != nil {
		return failed(rt + " failed: encode the payload for the migration function: " + err.Error()), values
	}
	if len(body) > MaxPayloadBytes {
		return failed(fmt.Sprintf("%s failed: the payload for the migration function is %d bytes, over the %d allowed (are the secrets that large?)",
			rt, len(body), MaxPayloadBytes)), values
	}
	started := time.Now()
	out, err := f.lambda.Invoke(work, &lambda.InvokeInput{
		FunctionName:   aws.String(f.cfg.Function),
		InvocationType: lambdatypes.InvocationTypeRequestResponse,
		Payload:        body,
	})
	took := time.Since(started).Round(time.Millisecond)
	if err != nil {
		if errors.Is(work.Err(), context.DeadlineExceeded) {
			return failed(fmt.Sprintf("%s failed: the migration function %s did not answer within the front's time (%v; its timeout less %s kept to answer): %v; "+
				"give the front a longer Timeout than the migration function's", rt, f.cfg.Function, took, reserve.Round(time.Millisecond), err)), values
		}
		return failed(fmt.Sprintf("%s failed: could not invoke the migration function %s: %v", rt, f.cfg.Function, err)), values
	}
	f.log.Info("schema resource front: the migration function answered", "function", f.cfg.Function, "request_id", req.RequestID,
		"duration_ms", took.Milliseconds(), "function_error", aws.ToString(out.FunctionError))
	return f.result(rt, out), values
}

// readSecrets reads the admin secret and, in password mode, each role's
// secret named in props into into; errors name the variable or property,
// as the direct mode's do.
func (f *Front) readSecrets(ctx context.Context, props map[string]any, into map[string]string) error {
	var arns []struct{ from, arn string }
	if f.cfg.DatabaseSecretARN != "" {
		arns = append(arns, struct{ from, arn string }{secrets.EnvDatabaseSecretARN, f.cfg.DatabaseSecretARN})
	}
	if f.cfg.RolesAuth == migrate.AuthPassword {
		for _, role := range migrate.FunctionRoles() {
			// An empty one is the apply mode's to refuse, with the direct
			// mode's words.
			if arn := prop(props, secretProps[role]); arn != "" {
				arns = append(arns, struct{ from, arn string }{secretProps[role], arn})
			}
		}
	}
	if len(arns) == 0 {
		return nil
	}
	for _, a := range arns {
		if _, done := into[a.arn]; done {
			continue
		}
		v, err := secrets.Fetch(ctx, f.sm, a.arn)
		if err != nil {
			return fmt.Errorf("%s: %w", a.from, err)
		}
		into[a.arn] = v
	}
	return nil
}

// functionError is the document Lambda returns for a function error.
type functionError struct {
	ErrorType    string `json:"errorType"`
	ErrorMessage string `json:"errorMessage"`
}

// result reads the apply function's answer. A function error (Lambda's
// X-Amz-Function-Error, or its error document without the header, as the
// Runtime Interface Emulator answers) is a FAILED answer naming it.
func (f *Front) result(rt string, out *lambda.InvokeOutput) ApplyResult {
	var fe functionError
	isErr := out.FunctionError != nil
	if json.Unmarshal(out.Payload, &fe) == nil && fe.ErrorMessage != "" && !bytes.Contains(out.Payload, []byte(`"ApplyVersion"`)) {
		isErr = true
	}
	if isErr {
		kind := aws.ToString(out.FunctionError)
		if kind == "" {
			kind = "Unhandled"
		}
		msg := strings.TrimSpace(strings.Join([]string{fe.ErrorType, fe.ErrorMessage}, ": "))
		if fe.ErrorMessage == "" {
			msg = fmt.Sprintf("%d bytes", len(out.Payload))
		}
		return failed(fmt.Sprintf("%s failed: the migration function %s failed (%s): %s", rt, f.cfg.Function, kind, msg))
	}
	var res ApplyResult
	dec := json.NewDecoder(bytes.NewReader(out.Payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil || res.ApplyVersion != PayloadVersion || (res.Status != StatusSuccess && res.Status != StatusFailed) {
		return failed(fmt.Sprintf("%s failed: the migration function %s answered something other than a migration result of version %d (%d bytes): "+
			"is it running with %s=%s, and from the same build as the front?", rt, f.cfg.Function, PayloadVersion, len(out.Payload), EnvMode, ModeApply))
	}
	return res
}
