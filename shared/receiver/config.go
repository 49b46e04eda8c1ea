package receiver

import (
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The receiver's environment variables, besides METRICS_NAMESPACE; the
// caller reads the sources document (source.EnvSources,
// source.EnvSourcesFile) and the database's (storage.PoolConfigFromEnv).
const (
	// EnvMaxBodyBytes is Config.MaxBodyBytes: larger bodies get 413.
	EnvMaxBodyBytes = "WEBHOOK_MAX_BODY_BYTES"
	// EnvStoreTimeout is Config.StoreTimeout: past it the answer is 503.
	EnvStoreTimeout = "WEBHOOK_STORE_TIMEOUT"
	// EnvSourcesRefresh is Config.SourcesRefresh: how often the sources
	// document is read again; 0 turns the interval's re-reads off.
	EnvSourcesRefresh = "SOURCES_REFRESH_INTERVAL"
	// EnvQuarantineCap is Config.QuarantineCap: how many refused
	// deliveries each source keeps in quarantine; 0 keeps none.
	EnvQuarantineCap = "WEBHOOK_QUARANTINE_CAP"
)

// maxQuarantineCap bounds WEBHOOK_QUARANTINE_CAP: at the default body
// limit, 100 000 deliveries of a source are up to about 100 GiB.
const maxQuarantineCap = 100000

// The bounds of SOURCES_REFRESH_INTERVAL beside 0 (off): a re-read costs
// the request that finds it due one read of a file, an S3 object or a
// secret, so not more than once a second; and a change waits at most a
// day.
const (
	minSourcesRefresh = time.Second
	maxSourcesRefresh = 24 * time.Hour
)

// The receiver's pool. A container serves one request at a time: two
// connections cover the insert and the rare mismatch record without
// holding more of the database's connection budget than the function's
// concurrency needs. The dial may take the store's whole timeout but the
// last 2 s, which leave time to answer 503: 3 s with the default 5 s, so
// an outage is answered well within the sender's timeout; more when
// WEBHOOK_STORE_TIMEOUT is raised for a database that pauses (the economy
// profile's Aurora, which takes up to about 15 s to resume), so that the
// first event after a pause waits for it instead of being refused.
const (
	poolApplicationName   = "webhook-inbox-receiver"
	poolMaxConns          = 2
	poolMinConnectTimeout = 3 * time.Second
	poolAnswerReserve     = 2 * time.Second
)

// MaxStoreTimeout bounds WEBHOOK_STORE_TIMEOUT: API Gateway's HTTP API
// waits at most 30 s for its integration, and the answer needs the rest.
const MaxStoreTimeout = 28 * time.Second

// ConfigFromEnv reads the receiver's settings with getenv: the limits, the
// sources document's refresh interval and the metrics' namespace. Every
// problem is reported at once, each naming its variable. The sources
// (source.Load, and secrets.SourcesReader to read them again), the
// database (storage.PoolConfigFromEnv, then Config.Pool) and the wake-ups
// (wake.ConfigFromEnv) are read by the caller, who opens them as Deps.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	e := settings.NewEnv(getenv)
	c := Config{
		MaxBodyBytes: e.Bytes(EnvMaxBodyBytes, DefaultMaxBodyBytes),
		StoreTimeout: e.DurationIn(EnvStoreTimeout, DefaultStoreTimeout, time.Second, MaxStoreTimeout),
		// 0 is allowed here, and the one value below the minimum that is.
		SourcesRefresh: e.DurationIn(EnvSourcesRefresh, DefaultSourcesRefresh, 0, maxSourcesRefresh),
		Metrics:        metrics.Emitter{Namespace: e.String(metrics.EnvNamespace, "")},
	}
	// The setting says 0 for none; Config says it below 0, its 0 being the
	// default.
	if c.QuarantineCap = e.IntIn(EnvQuarantineCap, storage.DefaultQuarantineCap, 0, maxQuarantineCap, "deliveries"); c.QuarantineCap == 0 {
		c.QuarantineCap = -1
	}
	if c.SourcesRefresh > 0 && c.SourcesRefresh < minSourcesRefresh {
		e.Errorf("%s must be 0 (off) or a duration from %s to %s, got %q", EnvSourcesRefresh, minSourcesRefresh, maxSourcesRefresh, getenv(EnvSourcesRefresh))
		c.SourcesRefresh = DefaultSourcesRefresh
	}
	return c, e.Err()
}

// Pool is the receiver's pool: db (storage.PoolConfigFromEnv's) with the
// receiver's application name and size, and a dial that leaves time to
// answer 503 within StoreTimeout (StoreTimeout 0 is the default's).
func (c Config) Pool(db storage.PoolConfig) storage.PoolConfig {
	timeout := c.StoreTimeout
	if timeout <= 0 {
		timeout = DefaultStoreTimeout
	}
	db.ApplicationName, db.MaxConns = poolApplicationName, poolMaxConns
	db.ConnectTimeout = max(poolMinConnectTimeout, timeout-poolAnswerReserve)
	return db
}
