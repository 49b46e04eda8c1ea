package settings_test

import (
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadProcessorDefaults(t *testing.T) {
	t.Parallel()
	p, err := settings.LoadProcessor(env(map[string]string{"DATABASE_URL": "postgres://x@h/db"}))
	if err != nil {
		t.Fatal(err)
	}
	c := p.Processor
	if c.BatchSize != processor.DefaultBatchSize || c.MaxAttempts != processor.DefaultMaxAttempts ||
		c.BackoffBase != processor.DefaultBackoffBase || c.BackoffCap != processor.DefaultBackoffCap ||
		c.Lease != processor.DefaultLease || c.HandlerTimeout != processor.DefaultHandlerTimeout ||
		c.SafetyMargin != processor.DefaultSafetyMargin || c.Unhandled != processor.UnhandledMark ||
		p.Interval != settings.DefaultProcessorInterval || p.SourceKinds != nil {
		t.Fatalf("defaults = %+v", p)
	}
}

func TestLoadProcessorReadsEverything(t *testing.T) {
	t.Parallel()
	p, err := settings.LoadProcessor(env(map[string]string{
		"DATABASE_URL":              "postgres://x@h/db",
		"WEBHOOK_SOURCES":           `{"sources":{"acme":{"kind":"stripe","secrets":["whsec_x"]},"billing":{"kind":"standard","secrets":["whsec_dGVzdA=="]}}}`,
		"PROCESSOR_BATCH_SIZE":      "10",
		"PROCESSOR_MAX_ATTEMPTS":    "5",
		"PROCESSOR_BACKOFF_BASE":    "1s",
		"PROCESSOR_BACKOFF_CAP":     "1m",
		"PROCESSOR_LEASE":           "5m",
		"PROCESSOR_HANDLER_TIMEOUT": "1m",
		"PROCESSOR_SAFETY_MARGIN":   "90s",
		"PROCESSOR_UNHANDLED":       "dead_letter",
		"PROCESSOR_INTERVAL":        "500ms",
		"LOG_LEVEL":                 "debug",
		"METRICS_NAMESPACE":         "Acme/Webhooks",
	}))
	if err != nil {
		t.Fatal(err)
	}
	c := p.Processor
	if c.BatchSize != 10 || c.MaxAttempts != 5 || c.BackoffBase != time.Second || c.BackoffCap != time.Minute ||
		c.Lease != 5*time.Minute || c.HandlerTimeout != time.Minute || c.SafetyMargin != 90*time.Second ||
		c.Unhandled != processor.UnhandledDeadLetter || p.Interval != 500*time.Millisecond ||
		p.SourceKinds["acme"] != "stripe" || p.SourceKinds["billing"] != "standard" || len(p.SourceKinds) != 2 ||
		p.MetricsNamespace != "Acme/Webhooks" {
		t.Fatalf("settings = %+v", p)
	}
}

// TestLoadProcessorFailsFast: every problem is reported at once, naming
// its variable.
func TestLoadProcessorFailsFast(t *testing.T) {
	t.Parallel()
	_, err := settings.LoadProcessor(env(map[string]string{
		"WEBHOOK_SOURCES":           `{"sources":{"acme":{"kind":"stripe"}}}`,
		"PROCESSOR_BATCH_SIZE":      "many",
		"PROCESSOR_MAX_ATTEMPTS":    "0",
		"PROCESSOR_BACKOFF_BASE":    "-1s",
		"PROCESSOR_HANDLER_TIMEOUT": "2m",
		"PROCESSOR_SAFETY_MARGIN":   "40s",
		"PROCESSOR_UNHANDLED":       "ignore",
		"LOG_LEVEL":                 "loud",
	}))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"DATABASE_URL", `source "acme"`, "PROCESSOR_BATCH_SIZE", "PROCESSOR_MAX_ATTEMPTS",
		"PROCESSOR_BACKOFF_BASE", "PROCESSOR_SAFETY_MARGIN (40s) must exceed PROCESSOR_HANDLER_TIMEOUT (2m0s)",
		"PROCESSOR_UNHANDLED", "LOG_LEVEL",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	_, err = settings.LoadProcessor(env(map[string]string{"DATABASE_URL": "x", "PROCESSOR_BACKOFF_BASE": "1h", "PROCESSOR_BACKOFF_CAP": "1m", "PROCESSOR_LEASE": "30s"}))
	for _, want := range []string{"PROCESSOR_BACKOFF_CAP (1m0s) must not be below PROCESSOR_BACKOFF_BASE (1h0m0s)", "PROCESSOR_LEASE (30s) must exceed"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
}
