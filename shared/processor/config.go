package processor

import (
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// The processor's environment variables, besides the database's
// (storage.PoolConfigFromEnv), the optional sources document and
// METRICS_NAMESPACE. Every one is optional; docs/processor.md lists the
// defaults.
const (
	EnvBatchSize      = "PROCESSOR_BATCH_SIZE"
	EnvMaxAttempts    = "PROCESSOR_MAX_ATTEMPTS"
	EnvBackoffBase    = "PROCESSOR_BACKOFF_BASE"
	EnvBackoffCap     = "PROCESSOR_BACKOFF_CAP"
	EnvLease          = "PROCESSOR_LEASE"
	EnvHandlerTimeout = "PROCESSOR_HANDLER_TIMEOUT"
	EnvSafetyMargin   = "PROCESSOR_SAFETY_MARGIN"
	EnvUnhandled      = "PROCESSOR_UNHANDLED"
	EnvBodyBudget     = "PROCESSOR_BODY_BUDGET"
	// EnvPollInterval is Config.PollInterval: how long Run waits after a
	// drain that found nothing due.
	EnvPollInterval = "PROCESSOR_POLL_INTERVAL"
	// EnvArchiveAfter is Config.ArchiveAfter: the archiver's own
	// variable, so one template parameter sets both.
	EnvArchiveAfter = "ARCHIVE_MIN_AGE"
	// EnvRunFor is Config.RunFor: how long each invocation keeps polling
	// after it starts; 0 makes each invocation one drain.
	EnvRunFor = "PROCESSOR_RUN_FOR"
)

// lambdaMaxTimeout is the longest a Lambda invocation may run: a run and
// the safety margin after it must fit in it.
const lambdaMaxTimeout = 15 * time.Minute

// The processor's pool. A drain runs one claim at a time: one connection
// holds the claim's transaction, the other records the claim before its
// handlers run. The session timeouts (SessionParams) make the server end
// what a frozen or killed invocation left open.
const (
	poolApplicationName = "webhook-inbox-processor"
	poolMaxConns        = 2
	poolConnectTimeout  = 3 * time.Second
)

// ConfigFromEnv reads the processor's settings with getenv, with the
// defaults applied (so the relations between settings are checked on the
// values that will run), its EMF metrics' namespace and, when a sources
// document is set (WEBHOOK_SOURCES or WEBHOOK_SOURCES_FILE), the source
// kinds. Every problem is reported at once, each naming its variable.
//
// What the processor runs on is the caller's to read and open: the
// database (storage.PoolConfigFromEnv, then Config.Pool), the
// wake-ups (wake.ConfigFromEnv) and, for replays of archived events, the
// archive (blobstore.ConfigFromEnv when ARCHIVE_BUCKET is set). The
// wake-ups' debounce is read here too, only to check PROCESSOR_RUN_FOR
// against it; its own problems are the caller's to report.
//
// SourceKinds is only needed for events stored before the receiver
// recorded each event's source_kind: the deployed processor gets no
// sources document, so it cannot read the signing secrets.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	e := settings.NewEnv(getenv)
	c := Config{
		// Zero means "the default" to WithDefaults, which derives some
		// defaults from others (the margin from the handler timeout, the
		// lease from the margin), so unset variables stay zero here.
		BatchSize:      e.Int(EnvBatchSize, 0),
		BodyBudget:     e.Bytes(EnvBodyBudget, 0),
		MaxAttempts:    e.Int(EnvMaxAttempts, 0),
		BackoffBase:    e.Duration(EnvBackoffBase, 0),
		BackoffCap:     e.Duration(EnvBackoffCap, 0),
		Lease:          e.Duration(EnvLease, 0),
		HandlerTimeout: e.Duration(EnvHandlerTimeout, 0),
		SafetyMargin:   e.Duration(EnvSafetyMargin, 0),
		PollInterval:   e.DurationIn(EnvPollInterval, DefaultPollInterval, MinPollInterval, MaxPollInterval),
		RunFor:         e.DurationIn(EnvRunFor, DefaultRunFor, 0, lambdaMaxTimeout),
		ArchiveAfter:   e.Age(EnvArchiveAfter, 0),
		// Each run (or drain) ends with an EMF line: its counts and the gauges.
		Metrics: metrics.Emitter{Namespace: e.String(metrics.EnvNamespace, "")},
	}
	if v := getenv(EnvUnhandled); v != "" {
		pol, err := ParseUnhandledPolicy(v)
		if err != nil {
			e.Errorf("%s: %w", EnvUnhandled, err)
		}
		c.Unhandled = pol
	}
	if getenv(source.EnvSources) != "" || getenv(source.EnvSourcesFile) != "" {
		set, err := source.Load(getenv)
		e.Add(err)
		if err == nil {
			c.SourceKinds = make(map[string]string)
			for _, name := range set.Names() {
				src, _ := set.Lookup(name)
				c.SourceKinds[name] = src.Kind
			}
		}
	}
	// The debounce alone, for the check below; the rest of the wake-up
	// settings, and their errors, are the caller's.
	waking, wakeErr := wake.ConfigFromEnv(getenv)

	// The relations between settings, on the values that will run.
	c = c.WithDefaults()
	if c.BatchSize < 1 || c.BatchSize > MaxBatchSize {
		e.Errorf("%s must be 1 to %d, got %d", EnvBatchSize, MaxBatchSize, c.BatchSize)
	}
	if c.BodyBudget < 1 {
		e.Errorf("%s must be a positive number of bytes, got %d", EnvBodyBudget, c.BodyBudget)
	}
	if c.BackoffCap < c.BackoffBase {
		e.Errorf("%s (%s) must not be below %s (%s)", EnvBackoffCap, c.BackoffCap, EnvBackoffBase, c.BackoffBase)
	}
	if c.SafetyMargin <= c.HandlerTimeout {
		e.Errorf("%s (%s) must exceed %s (%s): an event needs its handler's time plus its bookkeeping", EnvSafetyMargin, c.SafetyMargin, EnvHandlerTimeout, c.HandlerTimeout)
	}
	if c.Lease <= c.SafetyMargin {
		e.Errorf("%s (%s) must exceed %s (%s), or no event would ever fit in a lease", EnvLease, c.Lease, EnvSafetyMargin, c.SafetyMargin)
	}
	if c.RunFor > 0 && c.RunFor+c.SafetyMargin > lambdaMaxTimeout {
		e.Errorf("%s (%s) plus %s (%s) must fit in Lambda's longest timeout (%s): a run's last event needs the margin after it", EnvRunFor, c.RunFor, EnvSafetyMargin, c.SafetyMargin, lambdaMaxTimeout)
	}
	if wakeErr == nil && c.RunFor > 0 && c.RunFor <= waking.Debounce {
		e.Errorf("%s (%s) must exceed %s (%s): an invocation must outlast the wake-ups debounced after the one that started it", EnvRunFor, c.RunFor, wake.EnvDebounce, waking.Debounce)
	}
	if c.RunFor > 0 && c.PollInterval >= c.RunFor {
		e.Errorf("%s (%s) must be shorter than %s (%s), or a run would never poll", EnvPollInterval, c.PollInterval, EnvRunFor, c.RunFor)
	}
	return c, e.Err()
}

// Pool returns db, the database's connection settings
// (storage.PoolConfigFromEnv), as the processor's pool needs them: its
// application name, two connections, a short connect timeout, the session
// timeouts of SessionParams(HandlerTimeout), and CancelOnContext, so that
// a handler's timeout fails its event, not its claim's transaction.
func (c Config) Pool(db storage.PoolConfig) storage.PoolConfig {
	db.ApplicationName, db.MaxConns, db.ConnectTimeout = poolApplicationName, poolMaxConns, poolConnectTimeout
	db.RuntimeParams = SessionParams(c.WithDefaults().HandlerTimeout)
	db.CancelOnContext = true
	return db
}
