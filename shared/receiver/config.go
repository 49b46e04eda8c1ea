package receiver

import (
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// The receiver's environment variables, besides the sources document
// (source.EnvSources, source.EnvSourcesFile), the database's
// (storage.PoolConfigFromEnv) and METRICS_NAMESPACE.
const (
	// EnvMaxBodyBytes is Config.MaxBodyBytes: larger bodies get 413.
	EnvMaxBodyBytes = "WEBHOOK_MAX_BODY_BYTES"
	// EnvStoreTimeout is Config.StoreTimeout: past it the answer is 503.
	EnvStoreTimeout = "WEBHOOK_STORE_TIMEOUT"
)

// The receiver's pool. A container serves one request at a time: two
// connections cover the insert and the rare mismatch record without
// holding more of the database's connection budget than the function's
// concurrency needs, and a 3 s dial leaves time to answer 503 well within
// the sender's timeout.
const (
	poolApplicationName = "webhook-inbox-receiver"
	poolMaxConns        = 2
	poolConnectTimeout  = 3 * time.Second
)

// ConfigFromEnv reads the receiver's configuration with getenv: the sources,
// the limits, the metrics' namespace and the receiver's pool. Every problem
// is reported at once, each naming its variable. Store, Logger and the
// other run-time fields are left for the caller.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	e := settings.NewEnv(getenv)
	db, err := storage.PoolConfigFromEnv(getenv)
	e.Add(err)
	db.ApplicationName, db.MaxConns, db.ConnectTimeout = poolApplicationName, poolMaxConns, poolConnectTimeout
	sources, err := source.Load(getenv)
	e.Add(err)
	waking, err := wake.ConfigFromEnv(getenv)
	e.Add(err)
	c := Config{
		Sources:      sources,
		MaxBodyBytes: e.Bytes(EnvMaxBodyBytes, DefaultMaxBodyBytes),
		StoreTimeout: e.Duration(EnvStoreTimeout, DefaultStoreTimeout),
		Metrics:      metrics.Emitter{Namespace: e.String(metrics.EnvNamespace, "")},
		Database:     db,
		Waking:       waking,
	}
	return c, e.Err()
}
