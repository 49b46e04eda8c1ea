package archive_test

import (
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
)

func getenvOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnvDefaults(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://x/y", "ARCHIVE_BUCKET": "b", "ARCHIVE_PREFIX": "/a/b/"}
	cfg, err := archive.ConfigFromEnv(getenvOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinAge != 7*24*time.Hour || cfg.BatchSize != 1000 || cfg.MaxBatchBytes != 32<<20 || cfg.Prefix != "a/b" {
		t.Fatalf("defaults %+v", cfg)
	}
	if cfg.S3.Endpoint != "" || cfg.S3.PathStyle || cfg.S3.AccessKeyID != "" || cfg.S3.Bucket != "b" {
		t.Fatalf("AWS defaults %+v", cfg.S3)
	}
	if cfg.Metrics.Namespace != "" || cfg.Metrics.Off || cfg.QuietIdle {
		t.Fatalf("the Lambda's run line and metrics: %+v", cfg)
	}
	db := cfg.Database
	if db.URL != "postgres://x/y" || db.ApplicationName != "webhook-inbox-archiver" || db.MaxConns != 2 || db.ConnectTimeout != 5*time.Second {
		t.Fatalf("pool = %v", db)
	}
}

func TestConfigFromEnvLocalS3(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL": "postgres://x/y", "ARCHIVE_BUCKET": "b", "ARCHIVE_MIN_AGE": "30d", "ARCHIVE_BATCH_SIZE": "250",
		"ARCHIVE_MAX_BATCH_BYTES": "1048576", "METRICS_NAMESPACE": "Acme", "ARCHIVE_ORPHAN_MIN_AGE": "3h",
		"S3_ENDPOINT": "http://127.0.0.1:7070", "S3_ACCESS_KEY_ID": "k", "S3_SECRET_ACCESS_KEY": "s",
	}
	get := getenvOf(env)
	cfg, err := archive.ConfigFromEnv(get)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinAge != 30*24*time.Hour || cfg.BatchSize != 250 || cfg.MaxBatchBytes != 1<<20 || cfg.Metrics.Namespace != "Acme" || cfg.OrphanMinAge != 3*time.Hour ||
		!cfg.S3.PathStyle || cfg.S3.AccessKeyID != "k" {
		t.Fatalf("config %+v", cfg)
	}
	env["S3_PATH_STYLE"] = "false"
	if cfg, _ := archive.ConfigFromEnv(get); cfg.S3.PathStyle {
		t.Fatal("S3_PATH_STYLE=false ignored")
	}
}

func TestConfigFromEnvNamesEveryBadVariable(t *testing.T) {
	t.Parallel()
	env := map[string]string{"ARCHIVE_MIN_AGE": "soon", "ARCHIVE_BATCH_SIZE": "-3", "ARCHIVE_SSE": "rot13", "ARCHIVE_MAX_BATCH_BYTES": "lots", "ARCHIVE_ORPHAN_MIN_AGE": "1m"}
	_, err := archive.ConfigFromEnv(getenvOf(env))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, name := range []string{"DATABASE_URL", "ARCHIVE_BUCKET", "ARCHIVE_MIN_AGE", "ARCHIVE_BATCH_SIZE", "ARCHIVE_SSE", "ARCHIVE_MAX_BATCH_BYTES", "ARCHIVE_ORPHAN_MIN_AGE"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
	if !strings.Contains(err.Error(), `ARCHIVE_BATCH_SIZE must be a number of events from 1 to 100000, got "-3"`) {
		t.Errorf("batch size message: %v", err)
	}
}
