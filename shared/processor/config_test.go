package processor_test

import (
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/processor"
)

func getenvOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnvDefaults(t *testing.T) {
	t.Parallel()
	c, err := processor.ConfigFromEnv(getenvOf(map[string]string{"DATABASE_URL": "postgres://x@h/db"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.BatchSize != processor.DefaultBatchSize || c.MaxAttempts != processor.DefaultMaxAttempts ||
		c.BackoffBase != processor.DefaultBackoffBase || c.BackoffCap != processor.DefaultBackoffCap ||
		c.Lease != processor.DefaultLease || c.HandlerTimeout != processor.DefaultHandlerTimeout ||
		c.SafetyMargin != processor.DefaultSafetyMargin || c.Unhandled != processor.UnhandledMark ||
		c.PollInterval != processor.DefaultPollInterval || c.RunFor != processor.DefaultRunFor || c.SourceKinds != nil {
		t.Fatalf("defaults = %+v", c)
	}
	// The run-time parts are the caller's.
	if c.Pool != nil || c.Registry != nil || c.Logger != nil || c.Now != nil {
		t.Fatalf("run-time fields set: %+v", c)
	}
	// The Lambda's metrics line, in the default namespace.
	if c.Metrics == nil || c.Metrics.Namespace != "" || c.Metrics.Off {
		t.Fatalf("metrics = %+v", c.Metrics)
	}
	// The processor's pool, with its session timeouts.
	db := c.Database
	if db.URL != "postgres://x@h/db" || db.ApplicationName != "webhook-inbox-processor" || db.MaxConns != 2 ||
		db.ConnectTimeout != 3*time.Second || db.RuntimeParams["statement_timeout"] != "35000" ||
		db.RuntimeParams["idle_in_transaction_session_timeout"] != "35000" {
		t.Fatalf("pool = %v", db)
	}
}

func TestConfigFromEnvReadsEverything(t *testing.T) {
	t.Parallel()
	c, err := processor.ConfigFromEnv(getenvOf(map[string]string{
		"DATABASE_URL":              "postgres://x@h/db",
		"DATABASE_QUERY_MODE":       "exec",
		"WEBHOOK_SOURCES":           `{"sources":{"acme":{"kind":"stripe","secrets":["whsec_x_0123456789abcdefghijkl"]},"billing":{"kind":"standard","secrets":["whsec_dGVzdC0wMTIzNDU2Nzg5YWJjZGVmZ2hp"]}}}`,
		"PROCESSOR_BATCH_SIZE":      "10",
		"PROCESSOR_MAX_ATTEMPTS":    "5",
		"PROCESSOR_BACKOFF_BASE":    "1s",
		"PROCESSOR_BACKOFF_CAP":     "1m",
		"PROCESSOR_LEASE":           "5m",
		"PROCESSOR_HANDLER_TIMEOUT": "1m",
		"PROCESSOR_SAFETY_MARGIN":   "90s",
		"PROCESSOR_UNHANDLED":       "dead_letter",
		"PROCESSOR_POLL_INTERVAL":   "500ms",
		"PROCESSOR_RUN_FOR":         "2m",
		"METRICS_NAMESPACE":         "Acme/Webhooks",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.BatchSize != 10 || c.MaxAttempts != 5 || c.BackoffBase != time.Second || c.BackoffCap != time.Minute ||
		c.Lease != 5*time.Minute || c.HandlerTimeout != time.Minute || c.SafetyMargin != 90*time.Second ||
		c.Unhandled != processor.UnhandledDeadLetter || c.PollInterval != 500*time.Millisecond || c.RunFor != 2*time.Minute ||
		c.SourceKinds["acme"] != "stripe" || c.SourceKinds["billing"] != "standard" || len(c.SourceKinds) != 2 ||
		c.Metrics.Namespace != "Acme/Webhooks" {
		t.Fatalf("settings = %+v", c)
	}
	// The session timeouts follow the handler's time limit.
	if c.Database.QueryMode != "exec" || c.Database.RuntimeParams["statement_timeout"] != "65000" {
		t.Fatalf("pool = %v", c.Database)
	}
}

// TestConfigFromEnvFailsFast: every problem is reported at once, naming
// its variable.
func TestConfigFromEnvFailsFast(t *testing.T) {
	t.Parallel()
	_, err := processor.ConfigFromEnv(getenvOf(map[string]string{
		"WEBHOOK_SOURCES":           `{"sources":{"acme":{"kind":"stripe"}}}`,
		"DATABASE_QUERY_MODE":       "fast",
		"PROCESSOR_BATCH_SIZE":      "many",
		"PROCESSOR_MAX_ATTEMPTS":    "0",
		"PROCESSOR_BACKOFF_BASE":    "-1s",
		"PROCESSOR_HANDLER_TIMEOUT": "2m",
		"PROCESSOR_SAFETY_MARGIN":   "40s",
		"PROCESSOR_UNHANDLED":       "ignore",
		"PROCESSOR_POLL_INTERVAL":   "often",
		"PROCESSOR_RUN_FOR":         "-1s",
	}))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"DATABASE_URL", "DATABASE_QUERY_MODE", `source "acme"`, "PROCESSOR_BATCH_SIZE", "PROCESSOR_MAX_ATTEMPTS",
		"PROCESSOR_BACKOFF_BASE", "PROCESSOR_SAFETY_MARGIN (40s) must exceed PROCESSOR_HANDLER_TIMEOUT (2m0s)",
		"PROCESSOR_UNHANDLED", "PROCESSOR_POLL_INTERVAL must be a duration from 10ms to 1m0s",
		"PROCESSOR_RUN_FOR must be a duration from 0s to 15m0s",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	_, err = processor.ConfigFromEnv(getenvOf(map[string]string{"DATABASE_URL": "x", "PROCESSOR_BACKOFF_BASE": "1h", "PROCESSOR_BACKOFF_CAP": "1m", "PROCESSOR_LEASE": "30s", "PROCESSOR_BATCH_SIZE": "5000"}))
	for _, want := range []string{
		"PROCESSOR_BACKOFF_CAP (1m0s) must not be below PROCESSOR_BACKOFF_BASE (1h0m0s)", "PROCESSOR_LEASE (30s) must exceed",
		"PROCESSOR_BATCH_SIZE must be 1 to 64",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
}

// TestConfigFromEnvRealTime: PROCESSOR_RUN_FOR=0 makes each invocation one
// drain; a run must leave room to poll and, with its safety margin, fit in
// a Lambda invocation.
func TestConfigFromEnvRealTime(t *testing.T) {
	t.Parallel()
	c, err := processor.ConfigFromEnv(getenvOf(map[string]string{"DATABASE_URL": "postgres://x@h/db", "PROCESSOR_RUN_FOR": "0"}))
	if err != nil || c.RunFor != 0 {
		t.Fatalf("PROCESSOR_RUN_FOR=0: %v, %v", c.RunFor, err)
	}
	for env, want := range map[[2]string]string{
		{"14m30s", ""}:   "PROCESSOR_RUN_FOR (14m30s) plus PROCESSOR_SAFETY_MARGIN (40s) must fit in Lambda's longest timeout (15m0s)",
		{"1s", "2s"}:     "PROCESSOR_POLL_INTERVAL (2s) must be shorter than PROCESSOR_RUN_FOR (1s)",
		{"70s", "5ms"}:   "PROCESSOR_POLL_INTERVAL must be a duration from 10ms to 1m0s",
		{"70s", "2m"}:    "PROCESSOR_POLL_INTERVAL must be a duration from 10ms to 1m0s",
		{"16m", ""}:      "PROCESSOR_RUN_FOR must be a duration from 0s to 15m0s",
		{"soon", "fast"}: "PROCESSOR_RUN_FOR must be a duration",
	} {
		_, err := processor.ConfigFromEnv(getenvOf(map[string]string{
			"DATABASE_URL": "postgres://x@h/db", "PROCESSOR_RUN_FOR": env[0], "PROCESSOR_POLL_INTERVAL": env[1],
		}))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("PROCESSOR_RUN_FOR=%q PROCESSOR_POLL_INTERVAL=%q: %v; want %q", env[0], env[1], err, want)
		}
	}
	// The largest run that fits.
	if _, err := processor.ConfigFromEnv(getenvOf(map[string]string{"DATABASE_URL": "postgres://x@h/db", "PROCESSOR_RUN_FOR": "14m20s"})); err != nil {
		t.Errorf("PROCESSOR_RUN_FOR=14m20s: %v", err)
	}
}
