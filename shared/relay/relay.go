// Package relay does, outside the VPC, what the functions inside cannot do
// without an interface endpoint. The functions in the VPC reach S3 through
// its free gateway endpoint and nothing else (no Secrets Manager, no
// EventBridge Scheduler endpoint, each of which would cost by the hour
// whether the stack is used or not), so the relay, a function without
// VpcConfig, takes their requests from S3 and does them:
//
//   - Wake-ups. A function inside writes a marker object
//     wake/arm/<target>/<at> to the control bucket (target processor or
//     archiver, at an RFC 3339 UTC time with zero seconds); S3 sends the
//     relay the object's creation (as an S3 event notification, or through
//     EventBridge); the relay creates a one-time EventBridge Scheduler
//     schedule, <target>-<YYYYMMDDTHHMM>, that invokes the target at that
//     minute and deletes itself. Nothing polls while nothing arrives.
//   - The sources document. The sources secret's AWSCURRENT version is
//     copied, once checked to be a valid sources document, to the control
//     bucket (config/sources.json, SSE-S3) for the functions inside to
//     read: at each Secret Label Updated event of the secret (Secrets
//     Manager sends it natively to EventBridge), and when CloudFormation
//     creates or updates the Custom::SourcesCopy resource.
//   - Teardown. Deleting Custom::SourcesCopy deletes the copy and empties
//     the control bucket's wake/ and config/ prefixes, so that
//     CloudFormation can delete the bucket.
//
// Handle takes every event the relay is sent and tells them apart by
// shape; an event of no known shape is an error naming the shapes it knows.
// A marker whose key cannot be read is logged with its cause and skipped
// (retrying would not mend it); a failure that a retry may mend (the
// Scheduler or S3 unavailable) fails the invocation, so that the event is
// delivered again: every step is idempotent (a schedule's name is its
// target and minute; a copy rewrites the same object).
//
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html
// https://docs.aws.amazon.com/secretsmanager/latest/userguide/secret-event-notifications.html
// https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html
package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/cfnresponse"

	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// The control bucket's prefixes.
const (
	// WakePrefix holds the wake-up markers; ArmPrefix those that arm a
	// schedule.
	WakePrefix = "wake/"
	ArmPrefix  = wake.PrefixArm
	// ConfigPrefix holds the copies the functions inside read.
	ConfigPrefix = "config/"
)

// Causes, the log lines' cause key: stable, for searches and metric
// filters.
const (
	CauseUnknownEvent   = "unknown_event"
	CauseMalformedKey   = "malformed_key"
	CauseScheduleFailed = "schedule_failed"
	CauseSecretRead     = "secret_unreadable"
	CauseInvalidSources = "invalid_sources"
	CauseCopyFailed     = "copy_failed"
	CauseEmptyFailed    = "empty_failed"
	CauseAnswerFailed   = "answer_undelivered"
	// CauseRefusedRequest: a custom resource request whose ResponseURL is
	// not CloudFormation's, refused before anything is done.
	CauseRefusedRequest = "refused_request"
)

// SecretReader is the part of the Secrets Manager client the relay uses.
type SecretReader interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Scheduler is the part of the EventBridge Scheduler client the relay uses.
type Scheduler interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
}

// Relay handles the relay function's events.
type Relay struct {
	cfg     Config
	deps    Deps
	objects *blobstore.Store // the control bucket
	log     *slog.Logger
	now     func() time.Time
	send    cfnresponse.Sender
}

// systemClock is the default Clock.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Open returns a Relay over deps' clients, which must be set (the relay
// function builds them with the AWS SDK's default configuration: its role
// and region), and the control bucket, reached through conn as
// blobstore.ConnectionFromEnv reads it. It makes no request.
func Open(ctx context.Context, cfg Config, conn blobstore.Config, deps Deps) (*Relay, error) {
	var missing []error
	if deps.Secrets == nil {
		missing = append(missing, errors.New("Secrets"))
	}
	if deps.Scheduler == nil {
		missing = append(missing, errors.New("Scheduler"))
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("relay: %w required", errors.Join(missing...))
	}
	objects, err := blobstore.Open(ctx, cfg.bucket(conn))
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Clock == nil {
		deps.Clock = systemClock{}
	}
	return &Relay{cfg: cfg, deps: deps, objects: objects, log: deps.Logger, now: deps.Clock.Now, send: cfnresponse.Sender{After: deps.Clock.After}}, nil
}

// Outcome is what an invocation did, its result (visible in the Lambda
// console and to tests).
type Outcome struct {
	// Event is the kind handled: s3, secret or custom_resource.
	Event string `json:"event"`
	// Armed are the schedules created, or found already there.
	Armed []string `json:"armed,omitempty"`
	// Skipped are the markers that could not be read, each with its cause.
	Skipped []string `json:"skipped,omitempty"`
	// Ignored counts the records of no concern to the relay (another
	// prefix, another bucket, another secret or label).
	Ignored int `json:"ignored,omitempty"`
	// Copied is the version of the sources secret copied.
	Copied string `json:"copied,omitempty"`
	// Deleted counts the objects deleted (custom resource Delete).
	Deleted int `json:"deleted,omitempty"`
	// Status is the custom resource's answer.
	Status string `json:"status,omitempty"`
}

// Handle handles one event of any kind the relay is sent (see the
// package's doc). Its error fails the invocation; it is returned for what a
// retry may mend, and for an event of no known shape.
func (r *Relay) Handle(ctx context.Context, raw json.RawMessage) (Outcome, error) {
	ev, err := parse(raw)
	if err != nil {
		r.log.Error("relay: unknown event", "cause", CauseUnknownEvent, "err", err)
		return Outcome{}, err
	}
	switch {
	case ev.objects != nil:
		return r.arm(ctx, ev.objects)
	case ev.secret != nil:
		return r.secretUpdated(ctx, *ev.secret)
	default:
		return r.customResource(ctx, *ev.request)
	}
}

// keysOf lists a JSON object's keys, what is logged of an unknown event.
func keysOf(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
