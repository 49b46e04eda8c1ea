package lambdadb_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdadb"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// settings is a component's configuration, read from COMPONENT_SIZE.
type settings struct{ size string }

func read(getenv func(string) string) (settings, error) {
	if v := getenv("COMPONENT_SIZE"); v != "small" {
		return settings{}, errors.New("COMPONENT_SIZE: want small")
	}
	return settings{size: "small"}, nil
}

// tune is the component's Config.Pool: its own session settings on the
// database's.
func tune(s settings, db storage.PoolConfig) storage.PoolConfig {
	db.ApplicationName = "component-" + s.size
	return db
}

// TestConnectSaysEveryProblemAtOnce: the component's, the logger's and the
// database's mistakes in one error, before any connection.
func TestConnectSaysEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	env := map[string]string{"COMPONENT_SIZE": "huge", "LOG_LEVEL": "loud", "DATABASE_QUERY_MODE": "fast"}
	_, err := lambdadb.Connect(t.Context(), func(k string) string { return env[k] }, read, tune)
	if err == nil {
		t.Fatal("no error")
	}
	for _, v := range []string{"COMPONENT_SIZE", "LOG_LEVEL", "DATABASE_URL", "DATABASE_QUERY_MODE"} {
		if n := strings.Count(err.Error(), v); n != 1 {
			t.Errorf("%s named %d times, want once:\n%v", v, n, err)
		}
	}
}

// TestConnectOpensTheTunedPool: the pool is the database's settings as the
// component tunes them, and Ping finds the database.
func TestConnectOpensTheTunedPool(t *testing.T) {
	t.Parallel()
	env := map[string]string{"COMPONENT_SIZE": "small", "DATABASE_URL": pgtest.URL(t)}
	c, err := lambdadb.Connect(t.Context(), func(k string) string { return env[k] }, read, tune)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Pool.Close()
	if c.Config.size != "small" {
		t.Errorf("Config = %+v, want the component's", c.Config)
	}
	var logs bytes.Buffer
	c.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	c.Ping(t.Context(), "component")
	if logs.Len() != 0 {
		t.Errorf("Ping logged with the database up: %s", logs.String())
	}
	var app string
	if err := c.Pool.QueryRow(t.Context(), `SELECT current_setting('application_name')`).Scan(&app); err != nil {
		t.Fatal(err)
	}
	if app != "component-small" {
		t.Errorf("application_name = %q, want the component's tuning", app)
	}
}

// TestPingLogsADatabaseDown: a database down at init is a warning with its
// cause, not a failed start: requests answer 503 until it is back.
func TestPingLogsADatabaseDown(t *testing.T) {
	t.Parallel()
	env := map[string]string{"COMPONENT_SIZE": "small", "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none?connect_timeout=1"}
	c, err := lambdadb.Connect(t.Context(), func(k string) string { return env[k] }, read, tune)
	if err != nil {
		t.Fatalf("Connect with the database down: %v, want a pool that connects later", err)
	}
	defer c.Pool.Close()
	var logs bytes.Buffer
	c.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	c.Ping(context.Background(), "component")
	for _, want := range []string{`"level":"WARN"`, `component: database not reachable at init`, `"cause":"database_unavailable"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log %s lacks %s", logs.String(), want)
		}
	}
}
