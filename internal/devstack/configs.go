package devstack

import (
	"log/slog"
	"path/filepath"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// What the dev stack uses for what only makes sense on this machine.
const (
	// Database is the database the dev stack creates on its local cluster.
	Database = "webhook_inbox"
	// Bucket is the archive's bucket when ARCHIVE_BUCKET is not set.
	Bucket = "webhook-inbox-dev"
	// ArchivePrefix is the archive's key prefix when ARCHIVE_PREFIX is not
	// set.
	ArchivePrefix = "archive"
	// ArchiveAge is ARCHIVE_MIN_AGE when neither it nor --archive-age is
	// set: short, so a developer sees an event archived a minute after it
	// was processed rather than in a week.
	ArchiveAge = time.Minute
	// SourcesRefresh is SOURCES_REFRESH_INTERVAL when it is not set: a
	// source added to the sources file is served a moment after it is
	// saved, as a developer expects of a file they edit, for a read of a
	// local file every two seconds (deployed, the default's minute).
	SourcesRefresh = 2 * time.Second
)

// Local is what the dev stack provides itself. Each value stands in for a
// variable that is not set, never over one that is: a developer's
// DATABASE_URL, S3_ENDPOINT, bucket or sources are used as they are.
type Local struct {
	// DatabaseURL is the local cluster's database, for DATABASE_URL.
	DatabaseURL string
	// S3Endpoint is the local S3 server, for S3_ENDPOINT; the server's
	// fixed keys and region (locals3) stand in for S3_ACCESS_KEY_ID,
	// S3_SECRET_ACCESS_KEY and AWS_REGION, and when those are set the
	// server is started with them.
	S3Endpoint string
	// SourcesFile is the checked-in sources document (dev/sources.json,
	// whose secrets are fake) for WEBHOOK_SOURCES_FILE, when no sources
	// document is set.
	SourcesFile string
	// ArchiveAge is --archive-age when it was given: a flag on the command
	// line is the more explicit ask, so it wins over ARCHIVE_MIN_AGE. 0
	// leaves ARCHIVE_MIN_AGE, else the dev stack's ArchiveAge.
	ArchiveAge time.Duration
	// EMF keeps the Lambdas' JSON lines and EMF records (--emf). Without
	// it the log is written for a person: readable lines, no "_aws"
	// blocks, no metrics line per run.
	EMF bool
}

// Configs is what the dev stack runs: each component's configuration as
// its Lambda reads it (the same ConfigFromEnv), and what the Lambdas open
// their dependencies from, with the dev stack's stand-ins for what is not
// set.
type Configs struct {
	Receiver  receiver.Config
	Processor processor.Config
	// Operator is the operator function's configuration; the dev stack
	// serves its API twice, read-only and acting (operatorlocal), as the
	// template deploys it.
	Operator operations.Config
	Archive  archive.Config
	// Database is the database's settings, as every function reads them;
	// each component's pool is its Config's Pool of it.
	Database storage.PoolConfig
	// Sources are the receiver's sources.
	Sources *source.Set
	// S3 is the archive's bucket and how to reach it (where the processor
	// reads archived bodies for replays too).
	S3 blobstore.Config
	// Waking is how the functions wake each other, read as they read it
	// so that make dev refuses what they refuse; the dev stack wakes
	// nothing (its processor polls, its archiver runs every 30 s).
	Waking   wake.Config
	LogLevel slog.Level
	EMF      bool
	// LocalDatabase and LocalS3 say that the dev stack runs the database
	// or the S3 server itself: DATABASE_URL or S3_ENDPOINT is not set.
	LocalDatabase, LocalS3 bool
	// StandIns are the variables the dev stack filled in, with the values
	// it gave them.
	StandIns map[string]string
	// SourcesFrom says where the sources document came from, for the
	// start-up lines.
	SourcesFrom string
}

// ConfigsFromEnv reads the configurations the dev stack runs with getenv,
// through the very ConfigFromEnv calls the Lambdas make, so that make dev
// honours every variable the Lambdas read. Every problem is reported at
// once, each naming its variable.
//
// Only what makes sense locally is overridden: local's stand-ins for unset
// variables (above), and what keeps the terminal readable unless local.EMF
// asks for the Lambdas' output (the metrics emitters are off and the
// processor logs no metrics line per run). The archiver's passes that did
// nothing are debug lines with metrics off (archive.Archiver.RunOnce), not here.
func ConfigsFromEnv(getenv func(string) string, local Local) (Configs, error) {
	c := Configs{EMF: local.EMF, StandIns: map[string]string{}}
	standIn := func(name, value string) {
		if getenv(name) == "" && value != "" {
			c.StandIns[name] = value
		}
	}
	c.LocalDatabase = getenv(storage.EnvDatabaseURL) == ""
	standIn(storage.EnvDatabaseURL, local.DatabaseURL)
	c.LocalS3 = getenv(blobstore.EnvEndpoint) == ""
	if c.LocalS3 {
		standIn(blobstore.EnvEndpoint, local.S3Endpoint)
		if getenv(blobstore.EnvAccessKeyID) == "" && getenv(blobstore.EnvSecretAccessKey) == "" {
			standIn(blobstore.EnvAccessKeyID, locals3.AccessKeyID)
			standIn(blobstore.EnvSecretAccessKey, locals3.SecretAccessKey)
		}
		standIn(blobstore.EnvRegion, locals3.Region)
	}
	standIn(blobstore.EnvBucket, Bucket)
	standIn(archive.EnvPrefix, ArchivePrefix)
	standIn(receiver.EnvSourcesRefresh, SourcesRefresh.String())
	if local.ArchiveAge > 0 {
		c.StandIns[archive.EnvMinAge] = local.ArchiveAge.String()
	} else {
		standIn(archive.EnvMinAge, ArchiveAge.String())
	}
	c.SourcesFrom = source.EnvSources
	if getenv(source.EnvSources) == "" {
		c.SourcesFrom = getenv(source.EnvSourcesFile)
		if c.SourcesFrom == "" {
			standIn(source.EnvSourcesFile, local.SourcesFile)
			c.SourcesFrom = local.SourcesFile
		}
	}
	env := func(k string) string {
		if v, ok := c.StandIns[k]; ok {
			return v
		}
		return getenv(k)
	}

	err := settings.ReadAll(env,
		settings.Into(&c.LogLevel, settings.LogLevel),
		settings.Into(&c.Receiver, receiver.ConfigFromEnv),
		settings.Into(&c.Processor, processor.ConfigFromEnv),
		settings.Into(&c.Archive, archive.ConfigFromEnv),
		settings.Into(&c.Operator, operations.ConfigFromEnv),
		settings.Into(&c.Database, storage.PoolConfigFromEnv),
		settings.Into(&c.Sources, source.Load),
		settings.Into(&c.S3, blobstore.ConfigFromEnv),
		settings.Into(&c.Waking, wake.ConfigFromEnv),
	)

	if !local.EMF {
		c.Receiver.Metrics.Off = true
		c.Archive.Metrics.Off = true
		// A metrics line every run (one a PROCESSOR_RUN_FOR, back to back)
		// would bury the log: off, it is a debug line, and the processor
		// logs each drain that handled something instead.
		c.Processor.Metrics.Off = true
	}
	return c, err
}

// StackEnv is the environment an operator command needs to reach this
// stack (the stack file, internal/checkout): the operator's own variables
// where set, the dev stack's stand-ins otherwise. getenv is the
// environment before secrets are resolved, so that a secret's ARN is
// written, never its value. A relative sources file is made absolute, so
// that a command run from elsewhere finds it.
func (c Configs) StackEnv(getenv func(string) string) map[string]string {
	out := map[string]string{}
	for _, k := range stackKeys {
		v := getenv(k)
		if s, ok := c.StandIns[k]; ok {
			v = s
		}
		if k == source.EnvSourcesFile && v != "" {
			if abs, err := filepath.Abs(v); err == nil {
				v = abs
			}
		}
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// stackKeys are the variables of the stack file: what the operator
// commands read.
var stackKeys = []string{
	storage.EnvDatabaseURL, storage.EnvDatabaseQueryMode,
	secrets.EnvDatabaseSecretARN, secrets.EnvDatabaseSSLMode, secrets.EnvDatabaseIAMAuth,
	secrets.EnvDatabaseHost, secrets.EnvDatabasePort, secrets.EnvDatabaseName, secrets.EnvDatabaseUser,
	blobstore.EnvBucket, archive.EnvPrefix, archive.EnvMinAge, archive.EnvBatchSize,
	blobstore.EnvEndpoint, blobstore.EnvPathStyle, blobstore.EnvAccessKeyID, blobstore.EnvSecretAccessKey,
	blobstore.EnvRegion, blobstore.EnvSSE, blobstore.EnvKMSKeyID,
	source.EnvSourcesFile,
}
