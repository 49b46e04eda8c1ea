package archive

import (
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The archiver's environment variables, besides the bucket's
// (blobstore.ConfigFromEnv), the database's (storage.PoolConfigFromEnv)
// and METRICS_NAMESPACE.
const (
	// EnvPrefix is Config.Prefix, before every object key.
	EnvPrefix = "ARCHIVE_PREFIX"
	// EnvMinAge is Config.MinAge: a Go duration or days ("7d").
	EnvMinAge = "ARCHIVE_MIN_AGE"
	// EnvBatchSize is Config.BatchSize, events per object.
	EnvBatchSize = "ARCHIVE_BATCH_SIZE"
	// EnvMaxBatchBytes is Config.MaxBatchBytes.
	EnvMaxBatchBytes = "ARCHIVE_MAX_BATCH_BYTES"
	// EnvOrphanMinAge is Config.OrphanMinAge, the orphan sweep's age guard.
	EnvOrphanMinAge = "ARCHIVE_ORPHAN_MIN_AGE"
	// EnvBodyRetentionDays is Config.BodyRetention in whole days; 0 (the
	// default) keeps bodies for ever.
	EnvBodyRetentionDays = "ARCHIVE_BODY_RETENTION_DAYS"
)

// MaxBodyRetentionDays bounds EnvBodyRetentionDays: a hundred years is
// for ever, and the bound keeps a typo from overflowing a duration.
const MaxBodyRetentionDays = 36500

// MinOrphanMinAge is the least age guard accepted: Lambda's longest
// timeout, so that no upload still in flight is ever old enough to sweep,
// whatever the function's timeout. (A live batch's key is also locked, so
// the guard is the second line of defence, not the only one.)
const MinOrphanMinAge = 15 * time.Minute

// MaxBatchSize keeps one batch's ids in a sane bound for one statement and
// one object.
const MaxBatchSize = 100_000

// The archiver's pool. A batch uses one connection at a time; the second
// covers an expunge or sweep without waiting, and the function's
// concurrency (usually 1: one armed run per minute at most, each arming
// the next as it ends) keeps the total small.
const (
	poolApplicationName = "webhook-inbox-archiver"
	poolMaxConns        = 2
	poolConnectTimeout  = 5 * time.Second
)

// ConfigFromEnv reads the archiver's settings with getenv: the archive's
// shape and its EMF metrics. Every problem is reported at once, each naming
// its variable. The bucket (blobstore.ConfigFromEnv), the database
// (storage.PoolConfigFromEnv, then Config.Pool) and the wake-ups
// (wake.ConfigFromEnv) are read by the caller, who opens them as Deps.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	e := settings.NewEnv(getenv)
	c := Config{
		Prefix:        strings.Trim(getenv(EnvPrefix), "/"),
		MinAge:        e.Age(EnvMinAge, DefaultMinAge),
		BatchSize:     e.IntIn(EnvBatchSize, DefaultBatchSize, 1, MaxBatchSize, "events"),
		MaxBatchBytes: e.Bytes(EnvMaxBatchBytes, DefaultMaxBatchBytes),
		OrphanMinAge:  e.DurationIn(EnvOrphanMinAge, DefaultOrphanMinAge, MinOrphanMinAge, 30*24*time.Hour),
		BodyRetention: time.Duration(e.IntIn(EnvBodyRetentionDays, 0, 0, MaxBodyRetentionDays, "days")) * 24 * time.Hour,
		Metrics:       metrics.Emitter{Namespace: e.String(metrics.EnvNamespace, "")},
	}
	return c, e.Err()
}

// Pool is the archiver's pool: db (storage.PoolConfigFromEnv's) with the
// archiver's application name and size.
func (Config) Pool(db storage.PoolConfig) storage.PoolConfig {
	db.ApplicationName, db.MaxConns, db.ConnectTimeout = poolApplicationName, poolMaxConns, poolConnectTimeout
	return db
}
