package receiver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func getenvOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnvDefaults(t *testing.T) {
	t.Parallel()
	c, err := receiver.ConfigFromEnv(getenvOf(map[string]string{}))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxBodyBytes != receiver.DefaultMaxBodyBytes {
		t.Errorf("MaxBodyBytes = %d, want %d", c.MaxBodyBytes, receiver.DefaultMaxBodyBytes)
	}
	if c.StoreTimeout != receiver.DefaultStoreTimeout {
		t.Errorf("StoreTimeout = %v, want %v", c.StoreTimeout, receiver.DefaultStoreTimeout)
	}
	if c.SourcesRefresh != receiver.DefaultSourcesRefresh {
		t.Errorf("SourcesRefresh = %v, want %v", c.SourcesRefresh, receiver.DefaultSourcesRefresh)
	}
	if c.Metrics.Namespace != "" || c.Metrics.Off {
		t.Errorf("the Lambda's metrics: namespace %q, off %v; want the default namespace, on", c.Metrics.Namespace, c.Metrics.Off)
	}
}

// pool is the receiver's pool (cfg.Pool) for the database env names.
func pool(t *testing.T, cfg receiver.Config, env map[string]string) storage.PoolConfig {
	t.Helper()
	db, err := storage.PoolConfigFromEnv(getenvOf(env))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Pool(db)
}

func TestPoolIsTheReceiversOwn(t *testing.T) {
	t.Parallel()
	db := pool(t, receiver.Config{}, map[string]string{"DATABASE_URL": "postgres://u:hunter2@h/db", "DATABASE_QUERY_MODE": "exec"})
	if db.URL != "postgres://u:hunter2@h/db" {
		t.Errorf("URL = %q", db.URL)
	}
	if db.QueryMode != "exec" {
		t.Errorf("QueryMode = %q, want exec", db.QueryMode)
	}
	if db.ApplicationName != "webhook-inbox-receiver" {
		t.Errorf("ApplicationName = %q", db.ApplicationName)
	}
	if db.MaxConns != 2 {
		t.Errorf("MaxConns = %d, want 2", db.MaxConns)
	}
	if db.ConnectTimeout != 3*time.Second {
		t.Errorf("ConnectTimeout = %v, want 3s with the default store timeout", db.ConnectTimeout)
	}
	// A configuration printed by mistake does not print the password.
	if s := db.String(); strings.Contains(s, "hunter2") || !strings.Contains(s, "webhook-inbox-receiver") {
		t.Errorf("String() = %s", s)
	}
}

func TestConfigFromEnvReadsEverything(t *testing.T) {
	t.Parallel()
	c, err := receiver.ConfigFromEnv(getenvOf(map[string]string{
		"WEBHOOK_MAX_BODY_BYTES": "2048", "WEBHOOK_STORE_TIMEOUT": "2s", "METRICS_NAMESPACE": "Acme/Webhooks", "SOURCES_REFRESH_INTERVAL": "5m",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxBodyBytes != 2048 {
		t.Errorf("MaxBodyBytes = %d, want 2048", c.MaxBodyBytes)
	}
	if c.StoreTimeout != 2*time.Second {
		t.Errorf("StoreTimeout = %v, want 2s", c.StoreTimeout)
	}
	if c.SourcesRefresh != 5*time.Minute {
		t.Errorf("SourcesRefresh = %v, want 5m", c.SourcesRefresh)
	}
	if c.Metrics.Namespace != "Acme/Webhooks" {
		t.Errorf("Metrics.Namespace = %q", c.Metrics.Namespace)
	}
	url := map[string]string{"DATABASE_URL": "postgres://x@h/db"}
	if got := pool(t, c, url).ConnectTimeout; got != 3*time.Second {
		t.Errorf("a short store timeout keeps the 3 s dial: %s", got)
	}
	// A database that pauses (economy): the dial waits for it to resume,
	// leaving 2 s to answer.
	c, err = receiver.ConfigFromEnv(getenvOf(map[string]string{"WEBHOOK_STORE_TIMEOUT": "25s"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := pool(t, c, url).ConnectTimeout; got != 23*time.Second {
		t.Errorf("dial with a 25 s store timeout: %s, want 23s", got)
	}
	// 0 turns the interval's re-reads off.
	if c, err := receiver.ConfigFromEnv(getenvOf(map[string]string{"SOURCES_REFRESH_INTERVAL": "0"})); err != nil || c.SourcesRefresh != 0 {
		t.Errorf("SOURCES_REFRESH_INTERVAL=0: %v %v, want off", c.SourcesRefresh, err)
	}
	// Past what API Gateway waits for: refused.
	if _, err := receiver.ConfigFromEnv(getenvOf(map[string]string{"WEBHOOK_STORE_TIMEOUT": "29s"})); err == nil || !strings.Contains(err.Error(), "WEBHOOK_STORE_TIMEOUT") {
		t.Fatalf("a 29 s store timeout: %v", err)
	}
}

// TestConfigFromEnvFailsFast: every problem at once, each naming its
// variable.
func TestConfigFromEnvFailsFast(t *testing.T) {
	t.Parallel()
	_, err := receiver.ConfigFromEnv(getenvOf(map[string]string{
		"WEBHOOK_MAX_BODY_BYTES": "lots", "WEBHOOK_STORE_TIMEOUT": "0s", "SOURCES_REFRESH_INTERVAL": "10ms",
	}))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`WEBHOOK_MAX_BODY_BYTES must be a positive number of bytes, got "lots"`,
		`WEBHOOK_STORE_TIMEOUT must be a duration from 1s to 28s`,
		`SOURCES_REFRESH_INTERVAL must be 0 (off) or a duration from 1s to 24h0m0s, got "10ms"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	for _, v := range []string{"-1s", "25h", "soon"} {
		if _, err := receiver.ConfigFromEnv(getenvOf(map[string]string{"SOURCES_REFRESH_INTERVAL": v})); err == nil || !strings.Contains(err.Error(), "SOURCES_REFRESH_INTERVAL") {
			t.Errorf("SOURCES_REFRESH_INTERVAL=%s: %v", v, err)
		}
	}
}

// TestPoolOpensAsTheReceiver: the pool opened from Pool is the
// receiver's, whoever opens it.
func TestPoolOpensAsTheReceiver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, err := pool(t, receiver.Config{}, map[string]string{"DATABASE_URL": pgtest.URL(t)}).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var app string
	if err := p.QueryRow(ctx, `SELECT current_setting('application_name')`).Scan(&app); err != nil {
		t.Fatal(err)
	}
	if app != "webhook-inbox-receiver" {
		t.Errorf("application_name = %q", app)
	}
	if got := p.Config().MaxConns; got != 2 {
		t.Errorf("MaxConns = %d, want 2", got)
	}
	if got := p.Config().ConnConfig.ConnectTimeout; got != 3*time.Second {
		t.Errorf("ConnectTimeout = %v, want 3s", got)
	}
}
