package settings_test

import (
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/settings"
)

func TestLoadArchiverDefaults(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://x/y", "ARCHIVE_BUCKET": "b", "ARCHIVE_PREFIX": "/a/b/"}
	cfg, err := settings.LoadArchiver(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinAge != 7*24*time.Hour || cfg.BatchSize != 1000 || cfg.MaxBatchBytes != 32<<20 || cfg.Prefix != "a/b" {
		t.Fatalf("defaults %+v", cfg)
	}
	if cfg.S3.Endpoint != "" || cfg.S3.PathStyle || cfg.S3.AccessKeyID != "" || cfg.S3.Bucket != "b" {
		t.Fatalf("AWS defaults %+v", cfg.S3)
	}
}

func TestLoadArchiverLocalS3(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL": "postgres://x/y", "ARCHIVE_BUCKET": "b", "ARCHIVE_MIN_AGE": "30d", "ARCHIVE_BATCH_SIZE": "250",
		"S3_ENDPOINT": "http://127.0.0.1:7070", "S3_ACCESS_KEY_ID": "k", "S3_SECRET_ACCESS_KEY": "s",
	}
	get := func(k string) string { return env[k] }
	cfg, err := settings.LoadArchiver(get)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinAge != 30*24*time.Hour || cfg.BatchSize != 250 || !cfg.S3.PathStyle || cfg.S3.AccessKeyID != "k" {
		t.Fatalf("config %+v", cfg)
	}
	env["S3_PATH_STYLE"] = "false"
	if cfg, _ := settings.LoadArchiver(get); cfg.S3.PathStyle {
		t.Fatal("S3_PATH_STYLE=false ignored")
	}
}

func TestLoadArchiverNamesEveryBadVariable(t *testing.T) {
	t.Parallel()
	env := map[string]string{"ARCHIVE_MIN_AGE": "soon", "ARCHIVE_BATCH_SIZE": "-3", "ARCHIVE_SSE": "rot13"}
	_, err := settings.LoadArchiver(func(k string) string { return env[k] })
	if err == nil {
		t.Fatal("accepted")
	}
	for _, name := range []string{"DATABASE_URL", "ARCHIVE_BUCKET", "ARCHIVE_MIN_AGE", "ARCHIVE_BATCH_SIZE", "ARCHIVE_SSE"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}
