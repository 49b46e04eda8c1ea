package lambdastart_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/shared/lambdastart"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestConfigureReportsBothErrors: a bad log level and a bad component
// setting fail start-up together, in one error naming both.
func TestConfigureReportsBothErrors(t *testing.T) {
	_, log, err := lambdastart.Configure(env(map[string]string{"LOG_LEVEL": "loud"}), func(func(string) string) (int, error) {
		return 0, errors.New("WIDGETS must be a number")
	})
	if err == nil || log != nil {
		t.Fatalf("Configure: logger %v, error %v; want no logger and an error", log, err)
	}
	for _, want := range []string{"LOG_LEVEL", "WIDGETS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not name %s", err, want)
		}
	}
}

// TestConfigureSetsTheDefaultLogger: once configured, slog's default is
// the function's logger.
func TestConfigureSetsTheDefaultLogger(t *testing.T) {
	before := slog.Default()
	t.Cleanup(func() { slog.SetDefault(before) })
	cfg, log, err := lambdastart.Configure(env(nil), func(getenv func(string) string) (string, error) { return "read", nil })
	if err != nil {
		t.Fatal(err)
	}
	if cfg != "read" {
		t.Errorf("config %q; want what configFromEnv returned", cfg)
	}
	if slog.Default() != log {
		t.Error("slog's default is not the logger Configure returned")
	}
}
