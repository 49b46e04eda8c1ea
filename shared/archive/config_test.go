package archive_test

import (
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func getenvOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnvDefaults(t *testing.T) {
	t.Parallel()
	env := map[string]string{"ARCHIVE_PREFIX": "/a/b/"}
	cfg, err := archive.ConfigFromEnv(getenvOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinAge != 7*24*time.Hour {
		t.Errorf("MinAge = %v, want 7 days", cfg.MinAge)
	}
	if cfg.BatchSize != 1000 {
		t.Errorf("BatchSize = %d, want 1000", cfg.BatchSize)
	}
	if cfg.MaxBatchBytes != 32<<20 {
		t.Errorf("MaxBatchBytes = %d, want 32 MiB", cfg.MaxBatchBytes)
	}
	if cfg.Prefix != "a/b" {
		t.Errorf("Prefix = %q, want a/b", cfg.Prefix)
	}
	if cfg.BodyRetention != 0 {
		t.Errorf("BodyRetention = %v, want 0 (bodies kept for ever)", cfg.BodyRetention)
	}
	if cfg.Metrics.Namespace != "" || cfg.Metrics.Off {
		t.Errorf("the Lambda's metrics: namespace %q, off %v; want the default namespace, on", cfg.Metrics.Namespace, cfg.Metrics.Off)
	}
}

// TestPoolIsTheArchiversOwn: the database's settings as every function
// reads them, with the archiver's name and size.
func TestPoolIsTheArchiversOwn(t *testing.T) {
	t.Parallel()
	db, err := storage.PoolConfigFromEnv(getenvOf(map[string]string{"DATABASE_URL": "postgres://x/y"}))
	if err != nil {
		t.Fatal(err)
	}
	db = archive.Config{}.Pool(db)
	if db.URL != "postgres://x/y" {
		t.Errorf("URL = %q", db.URL)
	}
	if db.ApplicationName != "webhook-inbox-archiver" {
		t.Errorf("ApplicationName = %q", db.ApplicationName)
	}
	if db.MaxConns != 2 {
		t.Errorf("MaxConns = %d, want 2", db.MaxConns)
	}
	if db.ConnectTimeout != 5*time.Second {
		t.Errorf("ConnectTimeout = %v, want 5s", db.ConnectTimeout)
	}
}

func TestConfigFromEnvReadsEverySetting(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"ARCHIVE_MIN_AGE": "30d", "ARCHIVE_BATCH_SIZE": "250",
		"ARCHIVE_MAX_BATCH_BYTES": "1048576", "METRICS_NAMESPACE": "Acme", "ARCHIVE_ORPHAN_MIN_AGE": "3h",
		"ARCHIVE_BODY_RETENTION_DAYS": "90",
	}
	cfg, err := archive.ConfigFromEnv(getenvOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinAge != 30*24*time.Hour {
		t.Errorf("MinAge = %v, want 30 days", cfg.MinAge)
	}
	if cfg.BatchSize != 250 {
		t.Errorf("BatchSize = %d, want 250", cfg.BatchSize)
	}
	if cfg.MaxBatchBytes != 1<<20 {
		t.Errorf("MaxBatchBytes = %d, want 1 MiB", cfg.MaxBatchBytes)
	}
	if cfg.Metrics.Namespace != "Acme" {
		t.Errorf("Metrics.Namespace = %q, want Acme", cfg.Metrics.Namespace)
	}
	if cfg.OrphanMinAge != 3*time.Hour {
		t.Errorf("OrphanMinAge = %v, want 3h", cfg.OrphanMinAge)
	}
	if cfg.BodyRetention != 90*24*time.Hour {
		t.Errorf("BodyRetention = %v, want 90 days", cfg.BodyRetention)
	}
}

func TestConfigFromEnvNamesEveryBadVariable(t *testing.T) {
	t.Parallel()
	env := map[string]string{"ARCHIVE_MIN_AGE": "soon", "ARCHIVE_BATCH_SIZE": "-3", "ARCHIVE_MAX_BATCH_BYTES": "lots", "ARCHIVE_ORPHAN_MIN_AGE": "1m", "ARCHIVE_BODY_RETENTION_DAYS": "-1"}
	_, err := archive.ConfigFromEnv(getenvOf(env))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, name := range []string{"ARCHIVE_MIN_AGE", "ARCHIVE_BATCH_SIZE", "ARCHIVE_MAX_BATCH_BYTES", "ARCHIVE_ORPHAN_MIN_AGE", "ARCHIVE_BODY_RETENTION_DAYS"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
	if !strings.Contains(err.Error(), `ARCHIVE_BATCH_SIZE must be a number of events from 1 to 100000, got "-3"`) {
		t.Errorf("batch size message: %v", err)
	}
}
