package receiver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
)

func getenvOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnvDefaults(t *testing.T) {
	t.Parallel()
	c, err := receiver.ConfigFromEnv(getenvOf(map[string]string{"DATABASE_URL": "postgres://u:hunter2@h/db", "WEBHOOK_SOURCES": sourcesDoc}))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxBodyBytes != receiver.DefaultMaxBodyBytes || c.StoreTimeout != receiver.DefaultStoreTimeout ||
		c.Metrics.Namespace != "" || c.Metrics.Off || len(c.Sources.Names()) != 2 {
		t.Fatalf("defaults = %+v", c)
	}
	db := c.Database
	if db.URL != "postgres://u:hunter2@h/db" || db.ApplicationName != "webhook-inbox-receiver" || db.MaxConns != 2 || db.ConnectTimeout != 3*time.Second {
		t.Fatalf("pool = %v", db)
	}
	// A configuration printed by mistake does not print the password.
	if s := db.String(); strings.Contains(s, "hunter2") || !strings.Contains(s, "webhook-inbox-receiver") {
		t.Fatalf("String() = %s", s)
	}
}

func TestConfigFromEnvReadsEverything(t *testing.T) {
	t.Parallel()
	c, err := receiver.ConfigFromEnv(getenvOf(map[string]string{
		"DATABASE_URL": "postgres://x@h/db", "DATABASE_QUERY_MODE": "exec", "WEBHOOK_SOURCES": sourcesDoc,
		"WEBHOOK_MAX_BODY_BYTES": "2048", "WEBHOOK_STORE_TIMEOUT": "2s", "METRICS_NAMESPACE": "Acme/Webhooks",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxBodyBytes != 2048 || c.StoreTimeout != 2*time.Second || c.Metrics.Namespace != "Acme/Webhooks" || c.Database.QueryMode != "exec" {
		t.Fatalf("config = %+v", c)
	}
	if c.Database.ConnectTimeout != 3*time.Second {
		t.Fatalf("a short store timeout keeps the 3 s dial: %s", c.Database.ConnectTimeout)
	}
	// A database that pauses (economy): the dial waits for it to resume,
	// leaving 2 s to answer.
	c, err = receiver.ConfigFromEnv(getenvOf(map[string]string{
		"DATABASE_URL": "postgres://x@h/db", "WEBHOOK_SOURCES": sourcesDoc, "WEBHOOK_STORE_TIMEOUT": "25s",
	}))
	if err != nil || c.Database.ConnectTimeout != 23*time.Second {
		t.Fatalf("dial with a 25 s store timeout: %s, %v", c.Database.ConnectTimeout, err)
	}
	// Past what API Gateway waits for: refused.
	if _, err := receiver.ConfigFromEnv(getenvOf(map[string]string{
		"DATABASE_URL": "postgres://x@h/db", "WEBHOOK_SOURCES": sourcesDoc, "WEBHOOK_STORE_TIMEOUT": "29s",
	})); err == nil || !strings.Contains(err.Error(), "WEBHOOK_STORE_TIMEOUT") {
		t.Fatalf("a 29 s store timeout: %v", err)
	}
}

// TestConfigFromEnvFailsFast: every problem at once, each naming its
// variable.
func TestConfigFromEnvFailsFast(t *testing.T) {
	t.Parallel()
	_, err := receiver.ConfigFromEnv(getenvOf(map[string]string{
		"DATABASE_QUERY_MODE": "fast", "WEBHOOK_MAX_BODY_BYTES": "lots", "WEBHOOK_STORE_TIMEOUT": "0s",
	}))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"DATABASE_URL (or DATABASE_SECRET_ARN) is not set", "DATABASE_QUERY_MODE must be one of",
		"WEBHOOK_SOURCES", `WEBHOOK_MAX_BODY_BYTES must be a positive number of bytes, got "lots"`,
		`WEBHOOK_STORE_TIMEOUT must be a duration from 1s to 28s`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}

// TestConfigFromEnvOpensTheReceiversPool: the pool opened from the
// configuration is the receiver's, whoever opens it.
func TestConfigFromEnvOpensTheReceiversPool(t *testing.T) {
	t.Parallel()
	c, err := receiver.ConfigFromEnv(getenvOf(map[string]string{"DATABASE_URL": pgtest.URL(t), "WEBHOOK_SOURCES": sourcesDoc}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pool, err := c.Database.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var app string
	if err := pool.QueryRow(ctx, `SELECT current_setting('application_name')`).Scan(&app); err != nil {
		t.Fatal(err)
	}
	if app != "webhook-inbox-receiver" || pool.Config().MaxConns != 2 || pool.Config().ConnConfig.ConnectTimeout != 3*time.Second {
		t.Fatalf("application_name %q, max conns %d", app, pool.Config().MaxConns)
	}
}
