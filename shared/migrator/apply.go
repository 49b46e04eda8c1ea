package migrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/cfnresponse"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Applier is the apply mode: inside the VPC, it does Create and Update
// with what the front sends (ApplyRequest) and returns the result
// (ApplyResult). It reads no secret and calls no AWS API: its database
// comes from its environment (DATABASE_HOST, DATABASE_PORT, DATABASE_NAME,
// DATABASE_SSLMODE, or DATABASE_URL), the credentials from the admin
// secret's value in the payload, and the roles' passwords from theirs.
// Each request opens its own pool and closes it: a deploy sends one, and
// the credentials are the request's.
type Applier struct {
	getenv  func(string) string
	schemas []processor.HandlerSchema
	log     *slog.Logger
	initErr error
}

// NewApplier returns the apply mode's handler, reading the database's
// variables with getenv at each request and migrating schemas (the
// handler packages', handlers.Schemas) as Deps.Schemas says.
func NewApplier(getenv func(string) string, schemas []processor.HandlerSchema, log *slog.Logger) *Applier {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Applier{getenv: getenv, schemas: schemas, log: log}
}

// FailingApplier returns the handler of an apply function whose start-up
// failed: every request's result is FAILED with cause as the reason.
func FailingApplier(cause error, log *slog.Logger) *Applier {
	a := NewApplier(func(string) string { return "" }, nil, log)
	a.initErr = cause
	return a
}

// errNotAFront is the apply mode's refusal of CloudFormation's request.
var errNotAFront = fmt.Errorf("this migration function runs with %s=%s: it takes the front's payload, not CloudFormation's requests; "+
	"make the migration function in %s mode the DatabaseSchema resource's ServiceToken", EnvMode, ModeApply, ModeFront)

// HandleEvent is the apply mode's Lambda entry. The front's payload gets
// its result. A CloudFormation request is refused with an error, and
// answered (FAILED for Create and Update with the reason, SUCCESS for
// Delete, as a function that failed to start answers) so that
// CloudFormation does not wait an hour for a mis-wired ServiceToken. Any
// other event is refused with an error.
func (a *Applier) HandleEvent(ctx context.Context, raw json.RawMessage) (ApplyResult, error) {
	switch shapeOf(raw) {
	case shapeApply:
		if len(raw) > MaxPayloadBytes {
			return failed(fmt.Sprintf("the payload is %d bytes, over the %d allowed", len(raw), MaxPayloadBytes)), nil
		}
		var req ApplyRequest
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			// json's error may quote a value: only its kind is told.
			var typeErr *json.UnmarshalTypeError
			field := ""
			if errors.As(err, &typeErr) {
				field = " (field " + typeErr.Field + ")"
			}
			return failed("the front's payload does not decode as an apply request" + field +
				": are the front and the migration function from the same build?"), nil
		}
		return a.Apply(ctx, req), nil
	case shapeCloudFormation:
		var req Request
		if err := json.Unmarshal(raw, &req); err != nil {
			return ApplyResult{}, fmt.Errorf("schema resource apply: %w; and the request does not decode: %w", errNotAFront, err)
		}
		if _, err := Failing(errNotAFront, a.log, localResponseURL(a.getenv)).Handle(ctx, req); err != nil {
			return ApplyResult{}, fmt.Errorf("schema resource apply: %w (and the answer was not delivered: %w)", errNotAFront, err)
		}
		return ApplyResult{}, fmt.Errorf("schema resource apply: %w", errNotAFront)
	default:
		err := fmt.Errorf("schema resource apply: the event is not a front's payload (no ApplyVersion)")
		a.log.Error("schema resource apply: refused", "err", err)
		return ApplyResult{}, err
	}
}

// Apply does one request's work and returns its result, never an error:
// a failure is a FAILED result whose reason holds no secret.
func (a *Applier) Apply(ctx context.Context, req ApplyRequest) ApplyResult {
	start := time.Now()
	a.log.Info("schema resource apply: request", "request", req, "release", prop(req.Properties, PropRelease))
	work, reserve, cancel := cfnresponse.WorkContext(ctx)
	defer cancel()
	res := a.apply(work, reserve, req)
	res.Reason = cfnresponse.Redact(res.Reason, req.secretValues())
	level := slog.LevelInfo
	if res.Status != StatusSuccess {
		level = slog.LevelError
	}
	a.log.Log(ctx, level, "schema resource apply: result", "request_type", req.RequestType, "request_id", req.RequestID,
		"status", res.Status, "reason", res.Reason, "duration_ms", time.Since(start).Milliseconds())
	return res
}

func (a *Applier) apply(work context.Context, reserve time.Duration, req ApplyRequest) ApplyResult {
	rt := req.RequestType
	switch {
	case req.ApplyVersion != PayloadVersion:
		return failed(fmt.Sprintf("the front's payload is of version %d, this migration function reads version %d: deploy both from one build",
			req.ApplyVersion, PayloadVersion))
	case rt != RequestCreate && rt != RequestUpdate:
		return failed(fmt.Sprintf("unknown request type %q for the apply mode (only Create and Update are sent)", rt))
	case a.initErr != nil:
		return failed(fmt.Sprintf("%s failed: the migration function did not start: %v", rt, a.initErr))
	}
	// The database secret named by the front, read from the payload: the
	// rest (host, port, TLS) is this function's own environment.
	sm := payloadSecrets(req.Secrets)
	getenv := a.getenv
	if req.DatabaseSecretARN != "" {
		getenv = func(k string) string {
			if k == secrets.EnvDatabaseSecretARN {
				return req.DatabaseSecretARN
			}
			return a.getenv(k)
		}
	}
	getenv, creds, err := secrets.EnvironmentFrom(work, getenv, sm)
	if err != nil {
		return failed(rt + " failed: " + err.Error())
	}
	var cfg Config
	var db storage.PoolConfig
	if err := settings.ReadAll(getenv, settings.Into(&db, storage.PoolConfigFromEnv), settings.Into(&cfg, ConfigFromEnv)); err != nil {
		return failed(rt + " failed: " + err.Error())
	}
	db = cfg.Pool(db)
	db.Credentials = creds
	pool, err := db.Open(work)
	if err != nil {
		return failed(rt + " failed: " + err.Error())
	}
	defer pool.Close()
	h := newHandler(cfg, Deps{Pool: pool, Schemas: a.schemas, Secrets: sm, Logger: a.log})
	res, values := h.createOrUpdate(work, reserve, rt, req.Properties)
	res.Reason = cfnresponse.Redact(res.Reason, values)
	return res
}
