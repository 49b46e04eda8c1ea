package relay

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"

	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// The relay's environment variables. Besides these, the control bucket is
// reached as blobstore reaches its bucket (AWS_REGION; S3_ENDPOINT,
// S3_PATH_STYLE, S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY for a local
// server), and Secrets Manager and EventBridge Scheduler through the AWS
// SDK's own configuration (the function's role in AWS;
// AWS_ENDPOINT_URL_SECRETS_MANAGER and AWS_ENDPOINT_URL_SCHEDULER locally).
const (
	// EnvControlBucket is the control bucket: wake-up markers under wake/,
	// the sources document's copy under config/. Required.
	EnvControlBucket = "RELAY_CONTROL_BUCKET"
	// EnvSourcesSecretARN is the sources secret whose AWSCURRENT version is
	// copied. Required.
	EnvSourcesSecretARN = "RELAY_SOURCES_SECRET_ARN"
	// EnvSourcesKey is the copy's key, under config/ (which Delete
	// empties); default DefaultSourcesKey.
	EnvSourcesKey = "RELAY_SOURCES_KEY"
	// EnvScheduleGroup is the EventBridge Scheduler group the wake-up
	// schedules are created in. Required.
	EnvScheduleGroup = "RELAY_SCHEDULE_GROUP"
	// EnvLocalResponseURL ("true") lets the custom resource answer a
	// loopback ResponseURL: the local stacks' stand-in for CloudFormation's
	// bucket. The template never sets it.
	EnvLocalResponseURL = "RELAY_LOCAL_RESPONSE_URL"
	// EnvSchedulerRoleARN is the role EventBridge Scheduler assumes to
	// invoke the targets. Required.
	EnvSchedulerRoleARN = "RELAY_SCHEDULER_ROLE_ARN"
	// EnvProcessorARN and EnvArchiverARN are the functions a schedule
	// wakes, by target name. Required.
	EnvProcessorARN = "RELAY_PROCESSOR_ARN"
	EnvArchiverARN  = "RELAY_ARCHIVER_ARN"
)

// DefaultSourcesKey is where the sources document's copy goes.
const DefaultSourcesKey = ConfigPrefix + "sources.json"

// The targets a wake-up marker may name.
const (
	TargetProcessor = string(wake.TargetProcessor)
	TargetArchiver  = string(wake.TargetArchiver)
)

// Config configures a Relay: settings only (ConfigFromEnv reads them);
// the clients it works through are its Deps.
type Config struct {
	ControlBucket    string
	SourcesSecretARN string
	SourcesKey       string
	ScheduleGroup    string
	SchedulerRoleARN string
	// Targets maps each target name (TargetProcessor, TargetArchiver) to
	// its function's ARN.
	Targets map[string]string
	// LocalResponseURL lets the custom resource answer a loopback
	// ResponseURL (RELAY_LOCAL_RESPONSE_URL): local stacks and tests only.
	LocalResponseURL bool
}

// bucket is how the control bucket is reached: conn
// (blobstore.ConnectionFromEnv's) on ControlBucket, uploads encrypted
// with SSE-S3.
func (c Config) bucket(conn blobstore.Config) blobstore.Config {
	conn.Bucket, conn.SSE = c.ControlBucket, blobstore.SSES3
	return conn
}

// Clock is where the relay reads the time and waits: the schedules' times
// are checked against Now, and a refused custom resource answer is PUT
// again after After.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Deps is what a Relay works through and reports to.
type Deps struct {
	// Secrets reads the sources secret, Scheduler creates the schedules.
	// Required.
	Secrets   SecretReader
	Scheduler Scheduler
	// Clock is the time the schedules are checked against and the waits
	// between an answer's attempts; nil is the system clock.
	Clock Clock
	// Logger gets a line per event and one per failure; nil discards.
	Logger *slog.Logger
}

// groupPattern is a schedule group's name (EventBridge Scheduler API
// reference, GroupName).
var groupPattern = regexp.MustCompile(`^[0-9a-zA-Z\-_.]{1,64}$`)

// ConfigFromEnv reads the relay's settings with getenv, reporting every
// problem at once, each naming its variable. How the control bucket is
// reached (blobstore.ConnectionFromEnv, for Open) is read by the caller;
// the AWS clients are Deps.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	e := settings.NewEnv(getenv)
	c := Config{
		ControlBucket:    e.Required(EnvControlBucket),
		SourcesSecretARN: arn(e, EnvSourcesSecretARN),
		SourcesKey:       e.String(EnvSourcesKey, DefaultSourcesKey),
		ScheduleGroup:    e.Required(EnvScheduleGroup),
		SchedulerRoleARN: arn(e, EnvSchedulerRoleARN),
		Targets: map[string]string{
			TargetProcessor: arn(e, EnvProcessorARN),
			TargetArchiver:  arn(e, EnvArchiverARN),
		},
		LocalResponseURL: e.Bool(EnvLocalResponseURL, false),
	}
	if rest, ok := strings.CutPrefix(c.SourcesKey, ConfigPrefix); !ok || rest == "" {
		e.Errorf("%s must be a key under %s (the prefix the relay empties when the stack is deleted), got %q", EnvSourcesKey, ConfigPrefix, c.SourcesKey)
	}
	if c.ScheduleGroup != "" && !groupPattern.MatchString(c.ScheduleGroup) {
		e.Errorf("%s must be 1 to 64 of 0-9, a-z, A-Z, '-', '_' and '.', got %q", EnvScheduleGroup, c.ScheduleGroup)
	}
	return c, e.Err()
}

// arn reads a required ARN.
func arn(e *settings.Env, name string) string {
	v := e.Required(name)
	if v != "" && !strings.HasPrefix(v, "arn:") {
		e.Add(fmt.Errorf("%s must be an ARN (arn:...), got %q", name, v))
	}
	return v
}
