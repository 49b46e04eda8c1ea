// Package schemaresource is the migration function's logic: it answers
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
// The answer is an HTTP PUT of the JSON document CloudFormation documents
// ("Custom resource response objects": Status, Reason, PhysicalResourceId,
// StackId, RequestId, LogicalResourceId, NoEcho, Data; 4096 bytes at most)
// to the request's pre-signed ResponseURL, with an empty Content-Type, as
// AWS's own cfn-response module sends it. The work is bounded by the
// invocation's deadline less a reserve, so the answer always goes out
// before Lambda ends the invocation: an invocation that ends without one
// leaves CloudFormation waiting for the resource's whole ServiceTimeout
// (an hour by default). The handler returns an error only when the answer
// could not be delivered, so that Lambda's retries of the asynchronous
// invocation try again.
//
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-requests.html
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cfn-lambda-function-code-cfnresponsemodule.html
package schemaresource

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/dbschema"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// Request is CloudFormation's request to the custom resource.
type Request = cfn.Event

// The request types.
const (
	RequestCreate = string(cfn.RequestCreate)
	RequestUpdate = string(cfn.RequestUpdate)
	RequestDelete = string(cfn.RequestDelete)
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

// Properties lists the properties the resource accepts (ServiceToken and
// ServiceTimeout included), for a template check: any other fails Create
// and Update.
func Properties() []string {
	out := make([]string, 0, len(knownProps))
	for k := range knownProps {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
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
	StatusSuccess = string(cfn.StatusSuccess)
	StatusFailed  = string(cfn.StatusFailed)
)

// Response is the document PUT to the request's ResponseURL.
type Response struct {
	Status             string            `json:"Status"`
	Reason             string            `json:"Reason"`
	PhysicalResourceID string            `json:"PhysicalResourceId"`
	StackID            string            `json:"StackId"`
	RequestID          string            `json:"RequestId"`
	LogicalResourceID  string            `json:"LogicalResourceId"`
	NoEcho             bool              `json:"NoEcho"`
	Data               map[string]string `json:"Data,omitempty"`
}

// MaxResponseBytes is CloudFormation's limit on the answer's body.
const MaxResponseBytes = 4096

// Timing: the work stops ResponseReserve before the invocation's deadline
// (half the time left when that is shorter), leaving the answer time to be
// PUT, retried a few times if need be.
const (
	ResponseReserve = 10 * time.Second
	putAttempts     = 5
	putFirstBackoff = 250 * time.Millisecond
)

// Config configures a Handler.
type Config struct {
	// Database is how the migrator connects: as the schema's owner, a user
	// that may create roles (RDS's master user). ConfigFromEnv sets it; the
	// caller opens it as Pool.
	Database storage.PoolConfig
	Pool     *pgxpool.Pool
	// Secrets reads the roles' secrets (password mode); nil loads the AWS
	// configuration on first use.
	Secrets secrets.Getter
	// Client PUTs the answers; nil means a client of the package's own.
	Client *http.Client
	// PutBackoff is the wait before the first retry of a refused PUT,
	// doubled at each; 0 means 250ms.
	PutBackoff time.Duration
	// Logger gets one line per request and one per answer; nil discards.
	Logger *slog.Logger
}

// Handler answers the custom resource's requests.
type Handler struct {
	cfg     Config
	log     *slog.Logger
	initErr error // set by Failing

	smOnce sync.Once
	sm     secrets.Getter
	smErr  error
}

// New returns a Handler; Pool is required.
func New(cfg Config) (*Handler, error) {
	if cfg.Pool == nil {
		return nil, errors.New("schemaresource: Pool is required")
	}
	return newHandler(cfg), nil
}

func newHandler(cfg Config) *Handler {
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.PutBackoff <= 0 {
		cfg.PutBackoff = putFirstBackoff
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{cfg: cfg, log: cfg.Logger}
	if cfg.Secrets != nil {
		h.smOnce.Do(func() { h.sm = cfg.Secrets })
	}
	return h
}

// Failing returns a handler for a migration function whose start-up
// failed: it answers every Create and Update FAILED with cause as the
// reason, and Delete SUCCESS (so that the stack can still roll back and be
// deleted), instead of leaving CloudFormation without an answer.
func Failing(cause error, log *slog.Logger) *Handler {
	h := newHandler(Config{Logger: log})
	h.initErr = cause
	return h
}

// Handle answers one request: it does the work, PUTs the answer and
// returns it. The error is the delivery's, never the work's: a FAILED
// answer delivered is a successful invocation.
func (h *Handler) Handle(ctx context.Context, req Request) (Response, error) {
	start := time.Now()
	rt := string(req.RequestType)
	h.log.Info("schema resource: request", "request_type", rt, "logical_resource_id", req.LogicalResourceID,
		"request_id", req.RequestID, "stack_id", req.StackID, "release", prop(req.ResourceProperties, PropRelease))

	resp := Response{
		PhysicalResourceID: req.PhysicalResourceID,
		StackID:            req.StackID, RequestID: req.RequestID, LogicalResourceID: req.LogicalResourceID,
	}
	if rt == RequestCreate || resp.PhysicalResourceID == "" {
		resp.PhysicalResourceID = PhysicalResourceID
	}
	work, reserve, cancel := workContext(ctx)
	defer cancel()
	var redact []string
	switch rt {
	case RequestCreate, RequestUpdate:
		versions, secretValues, err := h.apply(work, req.ResourceProperties)
		redact = secretValues
		if err != nil {
			resp.Status, resp.Reason = StatusFailed, rt+" failed: "+reason(work, reserve, err)
		} else {
			resp.Status = StatusSuccess
			resp.Reason = fmt.Sprintf("schema at version %s; roles %s set up (%s)", versions,
				strings.Join(migrate.FunctionRoles(), ", "), prop(req.ResourceProperties, PropAuth))
			resp.Data = map[string]string{DataSchemaVersion: strconv.FormatInt(versions.Core, 10)}
		}
	case RequestDelete:
		resp.Status, resp.Reason = StatusSuccess, "nothing deleted: the database, its data and its roles outlive the stack"
	default:
		resp.Status, resp.Reason = StatusFailed, fmt.Sprintf("unknown request type %q", rt)
	}
	resp.Reason = h.redact(resp.Reason, redact)

	body, err := encode(resp)
	if err != nil {
		return resp, err
	}
	level := slog.LevelInfo
	if resp.Status != StatusSuccess {
		level = slog.LevelError
	}
	h.log.Log(ctx, level, "schema resource: answer", "request_type", rt, "request_id", req.RequestID,
		"status", resp.Status, "reason", resp.Reason, "duration_ms", time.Since(start).Milliseconds())
	if err := h.put(ctx, req.ResponseURL, body); err != nil {
		// The URL is pre-signed: whoever holds it may answer for us, so it
		// is never logged; its host is enough to diagnose.
		h.log.Error("schema resource: the answer could not be delivered", "request_id", req.RequestID, "err", err)
		return resp, err
	}
	return resp, nil
}

// workContext is ctx ending ResponseReserve before ctx's deadline (or
// halfway there when less is left), so the answer can go out after it.
func workContext(ctx context.Context) (context.Context, time.Duration, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		ctx, cancel := context.WithCancel(ctx)
		return ctx, 0, cancel
	}
	reserve := ResponseReserve
	if left := time.Until(dl); left < 2*reserve {
		reserve = left / 2
	}
	ctx, cancel := context.WithDeadline(ctx, dl.Add(-reserve))
	return ctx, reserve, cancel
}

// reason says what failed, and that the time ran out when it did.
func reason(work context.Context, reserve time.Duration, err error) string {
	if errors.Is(work.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("the migration ran out of time (the function's timeout less %s kept to answer): %v; "+
			"raise the migration function's Timeout, or end what holds the migration lock, and deploy again", reserve.Round(time.Millisecond), err)
	}
	return err.Error()
}

// apply does the work of Create and Update; it returns the secret values
// it read, for the caller to keep out of the answer.
func (h *Handler) apply(ctx context.Context, props map[string]any) (dbschema.Versions, []string, error) {
	if h.initErr != nil {
		return dbschema.Versions{}, nil, fmt.Errorf("the migration function did not start: %w", h.initErr)
	}
	var values []string
	if u, err := url.Parse(h.cfg.Database.URL); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			values = append(values, pw)
		}
	}
	for k := range props {
		if !knownProps[k] {
			return dbschema.Versions{}, values, fmt.Errorf("unknown property %q (known: %s, %s, %s, %s, %s, %s, %s, %s)", k,
				PropAuth, PropReceiverSecretArn, PropProcessorSecretArn, PropArchiverSecretArn,
				PropOperatorReadSecretArn, PropOperatorSecretArn, PropRelease, PropNetworkPath)
		}
	}
	auth := migrate.Auth(prop(props, PropAuth))
	opts := dbschema.RolesOptions{Auth: auth}
	switch auth {
	case migrate.AuthPassword:
		opts.Passwords = map[string]string{}
		for _, role := range migrate.FunctionRoles() {
			pw, err := h.rolePassword(ctx, role, prop(props, secretProps[role]))
			if err != nil {
				return dbschema.Versions{}, values, err
			}
			opts.Passwords[role] = pw
			values = append(values, pw)
		}
	case migrate.AuthIAM:
	default:
		return dbschema.Versions{}, values, fmt.Errorf("property %s must be %q or %q, got %q", PropAuth, migrate.AuthPassword, migrate.AuthIAM, auth)
	}
	v, err := dbschema.Apply(ctx, h.cfg.Pool, opts)
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

// redact replaces every secret value in s (belt and braces: no message is
// built from one).
func (h *Handler) redact(s string, values []string) string {
	for _, v := range values {
		if v != "" {
			s = strings.ReplaceAll(s, v, "xxxxx")
		}
	}
	return s
}

// encode marshals resp, shortening its Reason until the body fits
// CloudFormation's limit.
func encode(resp Response) ([]byte, error) {
	for {
		body, err := json.Marshal(resp)
		if err != nil {
			return nil, fmt.Errorf("encode the answer: %w", err)
		}
		if len(body) <= MaxResponseBytes {
			return body, nil
		}
		over := len(body) - MaxResponseBytes
		r := resp.Reason
		if r == "" {
			return nil, fmt.Errorf("the answer is %d bytes without a reason, over CloudFormation's %d", len(body), MaxResponseBytes)
		}
		cut := max(len(r)-over-len(" …"), 0)
		for cut > 0 && !utf8.RuneStart(r[cut]) {
			cut--
		}
		resp.Reason = r[:cut] + " …"
	}
}

// put sends the answer, retrying until it is taken or the context ends.
func (h *Handler) put(ctx context.Context, responseURL string, body []byte) error {
	if responseURL == "" {
		return errors.New("the request has no ResponseURL")
	}
	backoff := h.cfg.PutBackoff
	var err error
	for attempt := 1; attempt <= putAttempts; attempt++ {
		if err = h.putOnce(ctx, responseURL, body); err == nil {
			return nil
		}
		if attempt == putAttempts {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (then %w)", err, ctx.Err())
		case <-time.After(backoff):
		}
		backoff *= 2
	}
	return err
}

func (h *Handler) putOnce(ctx context.Context, responseURL string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, responseURL, bytes.NewReader(body))
	if err != nil {
		return errors.New("the ResponseURL is not a URL")
	}
	// The URL is signed for a PUT without a content type: the header is
	// sent, empty, as AWS's cfn-response module sends it.
	req.Header["Content-Type"] = []string{""}
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // its message repeats the pre-signed URL
		}
		return fmt.Errorf("PUT the answer to %s: %w", hostOf(responseURL), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("PUT the answer to %s: %s: %s", hostOf(responseURL), resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Host
	}
	return "the ResponseURL"
}
