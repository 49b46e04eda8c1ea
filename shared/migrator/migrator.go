// Package migrator is the migration function's logic: it answers
// CloudFormation's requests for the stack's custom resource
// Custom::DatabaseSchema (logical id DatabaseSchema), which the functions
// depend on, so that new code never serves before its schema.
//
//   - Create and Update bring the database to this build's schema and
//     roles (dbschema.Apply: the core and handler migrations, the
//     function roles, their authentication and exactly their grants) and
//     answer SUCCESS with Data {"SchemaVersion": "<core version>"}. The
//     stack sends Update at every deploy of new code (its Release property
//     changes), so migrations run at each deploy.
//   - Delete changes nothing (the database, its data and its roles outlive
//     the stack) and answers SUCCESS.
//   - Anything that fails answers FAILED, with a Reason naming what failed
//     and holding no secret, so that CloudFormation rolls the deploy back.
//
// The one binary runs in one of three modes (MIGRATOR_MODE, mode.go):
//
//   - direct (MIGRATOR_MODE unset): one function, the resource's
//     ServiceToken, reads the admin secret and the roles' secrets from
//     Secrets Manager, connects and answers CloudFormation (Handler).
//   - front and apply: the work is split between two deployments of the
//     binary so that neither a deploy nor a teardown depends on the VPC's
//     network reaching anything but the database. The front (Front), outside
//     the VPC, is the ServiceToken: it reads the secrets, invokes the apply
//     deployment inside the VPC synchronously with the values (ApplyRequest),
//     and answers CloudFormation with its result (ApplyResult); Delete is
//     answered at once without invoking anything. The apply deployment
//     (Applier) connects and migrates, and calls nothing but the database.
//
// Answers go through shared/cfnresponse: an HTTP PUT to the request's
// pre-signed ResponseURL, after work bounded by the invocation's deadline
// less a reserve, so the answer always goes out before Lambda ends the
// invocation: an invocation that ends without one leaves CloudFormation
// waiting for the resource's whole ServiceTimeout (an hour by default).
// The handler returns an error only when the answer could not be delivered,
// so that Lambda's retries of the asynchronous invocation try again.
//
// Why not aws-lambda-go's cfn.LambdaWrap, which also turns a function's
// result into the PUT (lambdawrap_test.go runs both against the same
// response server and shows each difference):
//
//   - LambdaWrap PUTs once: an answer the ResponseURL refuses (a 5xx, a
//     reset connection) is lost, and CloudFormation waits the resource's
//     whole ServiceTimeout. Here the PUT is retried (cfnresponse.Sender).
//   - LambdaWrap gives the function the invocation's whole deadline: work
//     that runs until then ends with the invocation, before any answer is
//     sent. Here the work ends a reserve before it (cfnresponse.WorkContext)
//     and FAILED goes out in time.
//   - LambdaWrap sends the error's text as the Reason, whole: a reason over
//     CloudFormation's 4096-byte document is refused, and nothing keeps a
//     secret out of it. Here the reason is built without secrets, redacted
//     of every secret value read, and cut to fit (cfnresponse.Encode).
//   - LambdaWrap PUTs to whatever ResponseURL the event names. Here only
//     CloudFormation's response bucket is answered (CheckResponseURL):
//     whoever may invoke the function may forge a request.
//
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-requests.html
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html
package migrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/cfnresponse"
	"github.com/webhook-inbox/webhook-inbox/shared/dbschema"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// Request is CloudFormation's request to the custom resource.
type Request = cfnresponse.Request

// The request types.
const (
	RequestCreate = cfnresponse.RequestCreate
	RequestUpdate = cfnresponse.RequestUpdate
	RequestDelete = cfnresponse.RequestDelete
)

// The resource's properties (ResourceProperties), besides ServiceToken and
// ServiceTimeout, which CloudFormation passes too.
const (
	// PropAuth is "password" or "iam" (migrate.AuthPassword, AuthIAM).
	PropAuth = "Auth"
	// PropReceiverSecretArn, PropProcessorSecretArn, PropArchiverSecretArn,
	// PropOperatorReadSecretArn and PropOperatorSecretArn name each role's
	// own secret, {"username": "<role>", "password": "..."}, in password
	// mode; the migrator sets each role's password from it. Ignored in IAM
	// mode.
	PropReceiverSecretArn     = "ReceiverSecretArn"
	PropProcessorSecretArn    = "ProcessorSecretArn"
	PropArchiverSecretArn     = "ArchiverSecretArn"
	PropOperatorReadSecretArn = "OperatorReadSecretArn"
	PropOperatorSecretArn     = "OperatorSecretArn"
	// PropRelease changes with every deploy of new code, so that
	// CloudFormation sends Update, and the migrations run, at each deploy.
	// Its value means nothing here; it is logged.
	PropRelease = "Release"
	// PropNetworkPath lists the network resources between the function and
	// S3 and Secrets Manager. It is not read: naming them makes
	// CloudFormation keep them until the resource's Delete is answered.
	PropNetworkPath = "NetworkPath"
)

// secretProps maps each role to the property naming its secret.
var secretProps = map[string]string{
	migrate.RoleReceiver:     PropReceiverSecretArn,
	migrate.RoleProcessor:    PropProcessorSecretArn,
	migrate.RoleArchiver:     PropArchiverSecretArn,
	migrate.RoleOperatorRead: PropOperatorReadSecretArn,
	migrate.RoleOperator:     PropOperatorSecretArn,
}

// knownProps are the properties accepted; another is a typo in the
// template, refused rather than silently ignored.
var knownProps = map[string]bool{
	"ServiceToken": true, "ServiceTimeout": true, PropAuth: true, PropRelease: true,
	PropReceiverSecretArn: true, PropProcessorSecretArn: true, PropArchiverSecretArn: true,
	PropOperatorReadSecretArn: true, PropOperatorSecretArn: true, PropNetworkPath: true,
}

// PhysicalResourceID is the resource's id, the same for every answer: a
// different id in an Update's answer would make CloudFormation replace the
// resource and send a Delete for the old one.
const PhysicalResourceID = "webhook-inbox-schema"

// DataSchemaVersion is the key of the core schema's version in the
// answer's Data (Fn::GetAtt DatabaseSchema.SchemaVersion).
const DataSchemaVersion = "SchemaVersion"

// The answer's statuses.
const (
	StatusSuccess = cfnresponse.StatusSuccess
	StatusFailed  = cfnresponse.StatusFailed
)

// Response is the document PUT to the request's ResponseURL.
type Response = cfnresponse.Response

// deleteReason is Delete's answer in every mode.
const deleteReason = "nothing deleted: the database, its data and its roles outlive the stack"

// Config configures a Handler: settings only (ConfigFromEnv reads them);
// what it works through is its Deps.
type Config struct {
	// RolesAuth is how the function roles authenticate
	// (MIGRATOR_ROLES_AUTH): the only source of it. A request whose Auth
	// property disagrees, or any request while it is empty, fails.
	RolesAuth migrate.Auth
	// LocalResponseURL lets Handle answer a loopback ResponseURL
	// (MIGRATOR_LOCAL_RESPONSE_URL): local stacks and tests only.
	LocalResponseURL bool
}

// Deps is what a Handler works through and reports to.
type Deps struct {
	// Pool is the database, connected as the schema's owner: a user that
	// may create roles (RDS's master user). Required. The migration
	// function opens it from storage.PoolConfigFromEnv's settings as
	// Config.Pool tunes them.
	Pool *pgxpool.Pool
	// Schemas are the handler packages' tables to migrate and grant:
	// handlers.Schemas, which the migration function passes.
	Schemas []processor.HandlerSchema
	// Secrets reads the roles' secrets (password mode); nil loads the AWS
	// configuration on first use.
	Secrets secrets.Getter
	// Logger gets one line per request and one per answer; nil discards.
	Logger *slog.Logger
}

// Handler answers the custom resource's requests in the direct mode.
type Handler struct {
	cfg     Config
	pool    *pgxpool.Pool
	schemas []processor.HandlerSchema
	log     *slog.Logger
	send    cfnresponse.Sender
	initErr error // set by Failing

	smOnce sync.Once
	sm     secrets.Getter
	smErr  error
}

// New returns a Handler; deps.Pool is required.
func New(cfg Config, deps Deps) (*Handler, error) {
	if deps.Pool == nil {
		return nil, errors.New("migrator: the handler needs its database (Deps.Pool)")
	}
	return newHandler(cfg, deps), nil
}

func newHandler(cfg Config, deps Deps) *Handler {
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{cfg: cfg, pool: deps.Pool, schemas: deps.Schemas, log: deps.Logger, send: cfnresponse.Sender{}}
	if deps.Secrets != nil {
		h.smOnce.Do(func() { h.sm = deps.Secrets })
	}
	return h
}

// Failing returns a handler for a migration function whose start-up
// failed: it answers every Create and Update FAILED with cause as the
// reason, and Delete SUCCESS (so that the stack can still roll back and be
// deleted), instead of leaving CloudFormation without an answer.
// localResponseURL is Config.LocalResponseURL.
func Failing(cause error, log *slog.Logger, localResponseURL bool) *Handler {
	h := newHandler(Config{LocalResponseURL: localResponseURL}, Deps{Logger: log})
	h.initErr = cause
	return h
}

// HandleEvent is the direct mode's Lambda entry: a CloudFormation request
// is answered (Handle); the front's payload for the apply mode, or any
// other event, is refused with an error saying so.
func (h *Handler) HandleEvent(ctx context.Context, raw json.RawMessage) (Response, error) {
	switch shapeOf(raw) {
	case shapeCloudFormation:
		var req Request
		if err := json.Unmarshal(raw, &req); err != nil {
			return Response{}, fmt.Errorf("schema resource: the CloudFormation request does not decode: %w", err)
		}
		return h.Handle(ctx, req)
	case shapeApply:
		err := fmt.Errorf("schema resource: this function runs without %s (the direct mode) and takes CloudFormation's requests; "+
			"the event is a front's payload for the apply mode: set %s=%s on the function the front invokes", EnvMode, EnvMode, ModeApply)
		h.log.Error("schema resource: refused", "err", err)
		return Response{}, err
	default:
		err := errors.New("schema resource: the event is not a CloudFormation custom resource request (no RequestType and ResponseURL)")
		h.log.Error("schema resource: refused", "err", err)
		return Response{}, err
	}
}

// Handle answers one request: it does the work, PUTs the answer and
// returns it. The error is the delivery's, never the work's: a FAILED
// answer delivered is a successful invocation.
func (h *Handler) Handle(ctx context.Context, req Request) (Response, error) {
	return respond(ctx, h.log, h.send, h.cfg.LocalResponseURL, req, func(work context.Context, reserve time.Duration, req Request) (ApplyResult, []string) {
		return h.createOrUpdate(work, reserve, string(req.RequestType), req.ResourceProperties)
	})
}

// respond answers req, in every mode that answers CloudFormation: Create
// and Update by createOrUpdate within the invocation's deadline less the
// answer's reserve, Delete at once (the database outlives the stack), and
// PUTs the answer with every secret value read kept out of it. The error
// is the delivery's, never the work's.
func respond(ctx context.Context, log *slog.Logger, send cfnresponse.Sender, localURL bool, req Request,
	createOrUpdate func(work context.Context, reserve time.Duration, req Request) (ApplyResult, []string)) (Response, error) {
	start := time.Now()
	rt := string(req.RequestType)
	logRequest(log, req)
	// Only CloudFormation's own pre-signed URL is answered: nothing is
	// done, and nothing PUT, for a request that names another (whoever
	// may invoke the function is not CloudFormation).
	if err := cfnresponse.CheckResponseURL(req.ResponseURL, localURL); err != nil {
		err = fmt.Errorf("schema resource: refused, nothing done: %w", err)
		log.Error("schema resource: refused", "request_id", req.RequestID, "err", err)
		return Response{}, err
	}
	resp := cfnresponse.For(req, PhysicalResourceID)
	work, reserve, cancel := cfnresponse.WorkContext(ctx)
	defer cancel()
	var redact []string
	switch rt {
	case RequestCreate, RequestUpdate:
		var res ApplyResult
		res, redact = createOrUpdate(work, reserve, req)
		resp.Status, resp.Reason, resp.Data = res.Status, res.Reason, res.Data
	case RequestDelete:
		// Nothing to do: the database, its data and its roles outlive the
		// stack (nor does the front ask the apply function anything).
		resp.Status, resp.Reason = StatusSuccess, deleteReason
	default:
		resp.Status, resp.Reason = StatusFailed, fmt.Sprintf("unknown request type %q", rt)
	}
	return answer(ctx, log, send, req, resp, redact, start)
}

// logRequest logs a request's line: never its ResponseURL (pre-signed:
// whoever holds it may answer for the resource) nor a secret.
func logRequest(log *slog.Logger, req Request) {
	log.Info("schema resource: request", "request_type", string(req.RequestType), "logical_resource_id", req.LogicalResourceID,
		"request_id", req.RequestID, "stack_id", req.StackID, "release", prop(req.ResourceProperties, PropRelease))
}

// answer redacts, logs and PUTs resp. The error is the delivery's.
func answer(ctx context.Context, log *slog.Logger, send cfnresponse.Sender, req Request, resp Response, redact []string, start time.Time) (Response, error) {
	resp.Reason = cfnresponse.Redact(resp.Reason, redact)
	body, err := cfnresponse.Encode(resp)
	if err != nil {
		return resp, err
	}
	level := slog.LevelInfo
	if resp.Status != StatusSuccess {
		level = slog.LevelError
	}
	log.Log(ctx, level, "schema resource: answer", "request_type", string(req.RequestType), "request_id", req.RequestID,
		"status", resp.Status, "reason", resp.Reason, "duration_ms", time.Since(start).Milliseconds())
	if err := send.Put(ctx, req.ResponseURL, body); err != nil {
		// The URL is pre-signed: whoever holds it may answer for us, so it
		// is never logged; its host is enough to diagnose.
		log.Error("schema resource: the answer could not be delivered", "request_id", req.RequestID, "err", err)
		return resp, err
	}
	return resp, nil
}

// createOrUpdate does the work of Create and Update on the handler's pool
// and returns the answer's status, reason and data, with the secret values
// it read, for the caller to keep out of the answer.
func (h *Handler) createOrUpdate(work context.Context, reserve time.Duration, rt string, props map[string]any) (ApplyResult, []string) {
	versions, values, err := h.apply(work, props)
	if err != nil {
		return ApplyResult{ApplyVersion: PayloadVersion, Status: StatusFailed, Reason: rt + " failed: " + reason(work, reserve, err)}, values
	}
	return ApplyResult{
		ApplyVersion: PayloadVersion, Status: StatusSuccess,
		Reason: fmt.Sprintf("schema at version %s; roles %s set up (%s)", versions,
			strings.Join(migrate.FunctionRoles(), ", "), prop(props, PropAuth)),
		Data: map[string]string{DataSchemaVersion: strconv.FormatInt(versions.Core, 10)},
	}, values
}

// reason says what failed, and that the time ran out when it did.
func reason(work context.Context, reserve time.Duration, err error) string {
	if errors.Is(work.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("the migration ran out of time (the function's timeout less %s kept to answer): %v; "+
			"raise the migration function's Timeout, or end what holds the migration lock, and deploy again", reserve.Round(time.Millisecond), err)
	}
	return err.Error()
}

// checkProps refuses an unknown property (a typo in the template), an
// Auth that is neither mode, and an Auth that is not the function's own
// (rolesAuth, from MIGRATOR_ROLES_AUTH): the request does not choose how
// the roles authenticate.
func checkProps(props map[string]any, rolesAuth migrate.Auth) error {
	for k := range props {
		if !knownProps[k] {
			return fmt.Errorf("unknown property %q (known: %s, %s, %s, %s, %s, %s, %s, %s)", k,
				PropAuth, PropReceiverSecretArn, PropProcessorSecretArn, PropArchiverSecretArn,
				PropOperatorReadSecretArn, PropOperatorSecretArn, PropRelease, PropNetworkPath)
		}
	}
	switch auth := migrate.Auth(prop(props, PropAuth)); {
	case auth != migrate.AuthPassword && auth != migrate.AuthIAM:
		return fmt.Errorf("property %s must be %q or %q, got %q", PropAuth, migrate.AuthPassword, migrate.AuthIAM, auth)
	case rolesAuth == "":
		return fmt.Errorf("the migration function's %s is not set: it alone says how the roles authenticate (the template sets it)", EnvRolesAuth)
	case auth != rolesAuth:
		return fmt.Errorf("property %s is %q, but the migration function's %s is %q: the request does not choose how the roles authenticate; "+
			"nothing was changed", PropAuth, auth, EnvRolesAuth, rolesAuth)
	}
	return nil
}

// apply does the work of Create and Update; it returns the secret values
// it read, for the caller to keep out of the answer.
func (h *Handler) apply(ctx context.Context, props map[string]any) (dbschema.Versions, []string, error) {
	if h.initErr != nil {
		return dbschema.Versions{}, nil, fmt.Errorf("the migration function did not start: %w", h.initErr)
	}
	// The admin's password, when DATABASE_URL holds it, may come back in a
	// driver's error.
	var values []string
	if pw := h.pool.Config().ConnConfig.Password; pw != "" {
		values = append(values, pw)
	}
	if err := checkProps(props, h.cfg.RolesAuth); err != nil {
		return dbschema.Versions{}, values, err
	}
	auth := h.cfg.RolesAuth
	opts := dbschema.RolesOptions{Auth: auth}
	if auth == migrate.AuthPassword {
		opts.Passwords = map[string]string{}
		for _, role := range migrate.FunctionRoles() {
			pw, err := h.rolePassword(ctx, role, prop(props, secretProps[role]))
			if err != nil {
				return dbschema.Versions{}, values, err
			}
			opts.Passwords[role] = pw
			values = append(values, pw)
		}
	}
	v, err := dbschema.Apply(ctx, h.pool, h.schemas, opts)
	return v, values, err
}

func prop(props map[string]any, k string) string {
	switch v := props[k].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// roleSecret is a role's secret: what the template generates and the
// function connects with.
type roleSecret struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// rolePassword reads role's password from the secret arn names.
func (h *Handler) rolePassword(ctx context.Context, role, arn string) (string, error) {
	prop := secretProps[role]
	if arn == "" {
		return "", fmt.Errorf("property %s is empty: password mode needs each role's secret", prop)
	}
	sm, err := h.secrets(ctx)
	if err != nil {
		return "", err
	}
	v, err := secrets.Fetch(ctx, sm, arn)
	if err != nil {
		return "", fmt.Errorf("%s: %w", prop, err)
	}
	var s roleSecret
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		// json's error would quote the value.
		return "", fmt.Errorf("%s: the secret %s is not a JSON document {\"username\", \"password\"}", prop, arn)
	}
	switch {
	case s.Username != role:
		return "", fmt.Errorf("%s: the secret %s is for user %q, not %s", prop, arn, s.Username, role)
	case s.Password == "":
		return "", fmt.Errorf("%s: the secret %s has no password", prop, arn)
	}
	return s.Password, nil
}

// secrets returns the Secrets Manager client, loading the AWS configuration
// the first time it is needed.
func (h *Handler) secrets(ctx context.Context) (secrets.Getter, error) {
	h.smOnce.Do(func() {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			h.smErr = fmt.Errorf("load AWS configuration: %w", err)
			return
		}
		h.sm = secretsmanager.NewFromConfig(cfg)
	})
	return h.sm, h.smErr
}
