package processor_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func getenvOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// fieldDiffs names each field of got (a struct) that differs from want's,
// with both values.
func fieldDiffs(got, want any) []string {
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	var out []string
	for i := range g.NumField() {
		if !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
			out = append(out, fmt.Sprintf("%s = %+v, want %+v", g.Type().Field(i).Name, g.Field(i), w.Field(i)))
		}
	}
	return out
}

func TestConfigFromEnvDefaults(t *testing.T) {
	t.Parallel()
	c, err := processor.ConfigFromEnv(getenvOf(map[string]string{}))
	if err != nil {
		t.Fatal(err)
	}
	// Every setting at its default; the Lambda's metrics line on, in the
	// default namespace.
	want := processor.Config{
		BatchSize: processor.DefaultBatchSize, BodyBudget: processor.DefaultBodyBudget, MaxAttempts: processor.DefaultMaxAttempts,
		BackoffBase: processor.DefaultBackoffBase, BackoffCap: processor.DefaultBackoffCap, Lease: processor.DefaultLease,
		HandlerTimeout: processor.DefaultHandlerTimeout, SafetyMargin: processor.DefaultSafetyMargin, Unhandled: processor.UnhandledMark,
		PollInterval: processor.DefaultPollInterval, RunFor: processor.DefaultRunFor,
	}
	for _, d := range fieldDiffs(c, want) {
		t.Error(d)
	}
}

// TestPoolConfig: the processor's pool, with its session timeouts, which
// follow the handler's time limit, over what the database's own
// variables say.
func TestPoolConfig(t *testing.T) {
	t.Parallel()
	in := storage.PoolConfig{URL: "postgres://x@h/db", QueryMode: "exec"}
	for _, tc := range []struct {
		cfg     processor.Config
		timeout string
	}{
		{processor.Config{}, "35000"},
		{processor.Config{HandlerTimeout: time.Minute}, "65000"},
	} {
		db := tc.cfg.Pool(in)
		want := in
		want.ApplicationName, want.MaxConns, want.ConnectTimeout, want.CancelOnContext = "webhook-inbox-processor", 2, 3*time.Second, true
		want.RuntimeParams = map[string]string{"statement_timeout": tc.timeout, "idle_in_transaction_session_timeout": tc.timeout}
		for _, d := range fieldDiffs(db, want) {
			t.Errorf("HandlerTimeout %s: %s", tc.cfg.HandlerTimeout, d)
		}
	}
}

func TestConfigFromEnvReadsEverything(t *testing.T) {
	t.Parallel()
	c, err := processor.ConfigFromEnv(getenvOf(map[string]string{
		"WEBHOOK_SOURCES":           `{"sources":{"acme":{"kind":"stripe","secrets":["whsec_x_0123456789abcdefghijkl"]},"billing":{"kind":"standard","secrets":["whsec_dGVzdC0wMTIzNDU2Nzg5YWJjZGVmZ2hp"]}}}`,
		"PROCESSOR_BATCH_SIZE":      "10",
		"PROCESSOR_BODY_BUDGET":     "1048576",
		"PROCESSOR_MAX_ATTEMPTS":    "5",
		"PROCESSOR_BACKOFF_BASE":    "1s",
		"PROCESSOR_BACKOFF_CAP":     "1m",
		"PROCESSOR_LEASE":           "5m",
		"PROCESSOR_HANDLER_TIMEOUT": "1m",
		"PROCESSOR_SAFETY_MARGIN":   "90s",
		"PROCESSOR_UNHANDLED":       "dead_letter",
		"PROCESSOR_POLL_INTERVAL":   "500ms",
		"PROCESSOR_RUN_FOR":         "2m",
		"ARCHIVE_MIN_AGE":           "7d",
		"METRICS_NAMESPACE":         "Acme/Webhooks",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := processor.Config{
		SourceKinds: map[string]string{"acme": "stripe", "billing": "standard"},
		BatchSize:   10, BodyBudget: 1 << 20, MaxAttempts: 5, BackoffBase: time.Second, BackoffCap: time.Minute,
		Lease: 5 * time.Minute, HandlerTimeout: time.Minute, SafetyMargin: 90 * time.Second,
		Unhandled: processor.UnhandledDeadLetter, Metrics: metrics.Emitter{Namespace: "Acme/Webhooks"},
		PollInterval: 500 * time.Millisecond, RunFor: 2 * time.Minute, ArchiveAfter: 7 * 24 * time.Hour,
	}
	for _, d := range fieldDiffs(c, want) {
		t.Error(d)
	}
}

// TestConfigFromEnvFailsFast: every problem is reported at once, naming
// its variable.
func TestConfigFromEnvFailsFast(t *testing.T) {
	t.Parallel()
	_, err := processor.ConfigFromEnv(getenvOf(map[string]string{
		"WEBHOOK_SOURCES":           `{"sources":{"acme":{"kind":"stripe"}}}`,
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
		`source "acme"`, "PROCESSOR_BATCH_SIZE", "PROCESSOR_MAX_ATTEMPTS",
		"PROCESSOR_BACKOFF_BASE", "PROCESSOR_SAFETY_MARGIN (40s) must exceed PROCESSOR_HANDLER_TIMEOUT (2m0s)",
		"PROCESSOR_UNHANDLED", "PROCESSOR_POLL_INTERVAL must be a duration from 10ms to 1m0s",
		"PROCESSOR_RUN_FOR must be a duration from 0s to 15m0s",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	_, err = processor.ConfigFromEnv(getenvOf(map[string]string{"PROCESSOR_BACKOFF_BASE": "1h", "PROCESSOR_BACKOFF_CAP": "1m", "PROCESSOR_LEASE": "30s", "PROCESSOR_BATCH_SIZE": "5000"}))
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
	c, err := processor.ConfigFromEnv(getenvOf(map[string]string{"PROCESSOR_RUN_FOR": "0"}))
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
		_, err := processor.ConfigFromEnv(getenvOf(map[string]string{"PROCESSOR_RUN_FOR": env[0], "PROCESSOR_POLL_INTERVAL": env[1]}))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("PROCESSOR_RUN_FOR=%q PROCESSOR_POLL_INTERVAL=%q: %v; want %q", env[0], env[1], err, want)
		}
	}
	// The largest run that fits.
	if _, err := processor.ConfigFromEnv(getenvOf(map[string]string{"PROCESSOR_RUN_FOR": "14m20s"})); err != nil {
		t.Errorf("PROCESSOR_RUN_FOR=14m20s: %v", err)
	}
}

// TestConfigFromEnvChecksRunForAgainstTheDebounce: a run must outlast the
// receivers' debounce; the debounce's own problems are its reader's
// (wake.ConfigFromEnv, which the caller calls), not said twice here.
func TestConfigFromEnvChecksRunForAgainstTheDebounce(t *testing.T) {
	t.Parallel()
	_, err := processor.ConfigFromEnv(getenvOf(map[string]string{"PROCESSOR_RUN_FOR": "1s", "WAKE_DEBOUNCE": "1s"}))
	if want := "PROCESSOR_RUN_FOR (1s) must exceed WAKE_DEBOUNCE (1s)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want it to mention %q", err, want)
	}
	if _, err := processor.ConfigFromEnv(getenvOf(map[string]string{"WAKE_DEBOUNCE": "often"})); err != nil {
		t.Errorf("a bad WAKE_DEBOUNCE reported by the processor: %v", err)
	}
}
