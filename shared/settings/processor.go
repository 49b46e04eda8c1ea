package settings

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// Environment variables of the processor (besides the database's, LOG_LEVEL
// and the sources document). Every one is optional; docs/processor.md
// lists the defaults.
const (
	EnvProcessorBatchSize      = "PROCESSOR_BATCH_SIZE"
	EnvProcessorMaxAttempts    = "PROCESSOR_MAX_ATTEMPTS"
	EnvProcessorBackoffBase    = "PROCESSOR_BACKOFF_BASE"
	EnvProcessorBackoffCap     = "PROCESSOR_BACKOFF_CAP"
	EnvProcessorLease          = "PROCESSOR_LEASE"
	EnvProcessorHandlerTimeout = "PROCESSOR_HANDLER_TIMEOUT"
	EnvProcessorSafetyMargin   = "PROCESSOR_SAFETY_MARGIN"
	EnvProcessorUnhandled      = "PROCESSOR_UNHANDLED"
	EnvProcessorInterval       = "PROCESSOR_INTERVAL"
)

// DefaultProcessorInterval is how often `make dev` drains, standing in for
// the Lambda's schedule.
const DefaultProcessorInterval = 3 * time.Second

// Processor is the processor's configuration.
type Processor struct {
	Database Database
	// SourceKinds maps source names to kinds, from the sources document
	// when one is set (WEBHOOK_SOURCES or WEBHOOK_SOURCES_FILE). It is
	// only needed for events stored before the receiver recorded each
	// event's source_kind: the deployed processor gets no sources document,
	// so it cannot read the signing secrets.
	SourceKinds map[string]string
	// Processor holds the drain's settings, defaults applied; Pool,
	// Registry and Logger are left for the caller.
	Processor processor.Config
	// Interval is the time between drains of `make dev`.
	Interval time.Duration
	LogLevel slog.Level
	// MetricsNamespace is the CloudWatch namespace of the drain's EMF
	// metrics ("" = the default). The Lambda sets Processor.Metrics from
	// it; the dev stack logs no metrics lines.
	MetricsNamespace string
}

// LoadProcessor reads the processor's configuration with getenv. Every
// problem is reported at once, each naming its variable.
func LoadProcessor(getenv func(string) string) (Processor, error) {
	var errs []error
	db, err := LoadDatabase(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	p := Processor{Database: db, Interval: DefaultProcessorInterval, MetricsNamespace: getenv(EnvMetricsNamespace)}
	if getenv(source.EnvSources) != "" || getenv(source.EnvSourcesFile) != "" {
		set, err := source.Load(getenv)
		if err != nil {
			errs = append(errs, err)
		} else {
			p.SourceKinds = make(map[string]string)
			for _, name := range set.Names() {
				src, _ := set.Lookup(name)
				p.SourceKinds[name] = src.Kind
			}
		}
	}

	c := &p.Processor
	positiveInt(getenv, EnvProcessorBatchSize, &c.BatchSize, &errs)
	positiveInt(getenv, EnvProcessorMaxAttempts, &c.MaxAttempts, &errs)
	positiveDuration(getenv, EnvProcessorBackoffBase, &c.BackoffBase, &errs)
	positiveDuration(getenv, EnvProcessorBackoffCap, &c.BackoffCap, &errs)
	positiveDuration(getenv, EnvProcessorLease, &c.Lease, &errs)
	positiveDuration(getenv, EnvProcessorHandlerTimeout, &c.HandlerTimeout, &errs)
	positiveDuration(getenv, EnvProcessorSafetyMargin, &c.SafetyMargin, &errs)
	positiveDuration(getenv, EnvProcessorInterval, &p.Interval, &errs)
	if v := getenv(EnvProcessorUnhandled); v != "" {
		pol, err := processor.ParseUnhandledPolicy(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvProcessorUnhandled, err))
		}
		c.Unhandled = pol
	}

	// The relations between settings, on the values that will run.
	*c = c.WithDefaults()
	if c.BatchSize > processor.MaxBatchSize {
		errs = append(errs, fmt.Errorf("%s must be at most %d, got %d", EnvProcessorBatchSize, processor.MaxBatchSize, c.BatchSize))
	}
	if c.BackoffCap < c.BackoffBase {
		errs = append(errs, fmt.Errorf("%s (%s) must not be below %s (%s)", EnvProcessorBackoffCap, c.BackoffCap, EnvProcessorBackoffBase, c.BackoffBase))
	}
	if c.SafetyMargin <= c.HandlerTimeout {
		errs = append(errs, fmt.Errorf("%s (%s) must exceed %s (%s): an event needs its handler's time plus its bookkeeping", EnvProcessorSafetyMargin, c.SafetyMargin, EnvProcessorHandlerTimeout, c.HandlerTimeout))
	}
	if c.Lease <= c.SafetyMargin {
		errs = append(errs, fmt.Errorf("%s (%s) must exceed %s (%s), or no event would ever fit in a lease", EnvProcessorLease, c.Lease, EnvProcessorSafetyMargin, c.SafetyMargin))
	}

	lvl, err := LogLevel(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	p.LogLevel = lvl
	return p, errors.Join(errs...)
}

func positiveInt(getenv func(string) string, name string, into *int, errs *[]error) {
	v := getenv(name)
	if v == "" {
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		*errs = append(*errs, fmt.Errorf("%s must be a positive whole number, got %q", name, v))
		return
	}
	*into = n
}

func positiveDuration(getenv func(string) string, name string, into *time.Duration, errs *[]error) {
	v := getenv(name)
	if v == "" {
		return
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		*errs = append(*errs, fmt.Errorf("%s must be a positive duration such as 30s or 5m, got %q", name, v))
		return
	}
	*into = d
}
