package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// scheduled is the event `sam local invoke` is given
// (events/schedule.json): any event starts a run, whatever its shape.
func scheduled(t *testing.T) json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "events", "schedule.json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestLambdaEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	srv := s3test.Server(t)
	bucket := s3test.Bucket(t, srv)
	env := map[string]string{
		"DATABASE_URL": url, "ARCHIVE_BUCKET": bucket.Bucket, "ARCHIVE_PREFIX": "/archive/",
		"ARCHIVE_MIN_AGE": "1h", "ARCHIVE_BATCH_SIZE": "2", "LOG_LEVEL": "error",
		"S3_ENDPOINT": srv.Endpoint(), "S3_ACCESS_KEY_ID": locals3.AccessKeyID, "S3_SECRET_ACCESS_KEY": locals3.SecretAccessKey,
		"AWS_REGION": locals3.Region,
	}
	h, closePool, err := setup(ctx, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer closePool()

	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := storage.New(pool)
	for _, id := range []string{"evt_1", "evt_2", "evt_3"} {
		if _, err := store.EventInsert(ctx, storage.EventInsertParams{Source: "stripe", EventID: id, Body: []byte(`{"id":"` + id + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	factory.ProcessDue(ctx, t, store, time.Now().Add(-2*time.Hour))

	// The invocation's deadline, as Lambda gives it.
	invCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sum, err := h(invCtx, scheduled(t))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Events != 3 || sum.Objects != 2 || sum.Truncated {
		t.Fatalf("summary %+v", sum)
	}
	objs, err := s3test.Open(t, bucket).List(ctx, "archive/provider=stripe/")
	if err != nil || len(objs) != 2 {
		t.Fatalf("objects %v, %v", objs, err)
	}

	// S3 down: the invocation fails with the cause, and nothing is lost.
	if _, err := store.EventInsert(ctx, storage.EventInsertParams{Source: "stripe", EventID: "evt_4", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	factory.ProcessDue(ctx, t, store, time.Now().Add(-2*time.Hour))
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := h(invCtx, scheduled(t)); inbox.CauseOf(err) != "archive_store_unavailable" {
		t.Fatalf("invocation with S3 down: %v", err)
	}
	ev, err := store.EventGetByKey(ctx, "stripe", "evt_4")
	if err != nil || ev.Body == nil {
		t.Fatalf("evt_4 after a failed run: %+v, %v", ev, err)
	}
}

// TestDeadline: an invocation with less time left than the archiver keeps
// in reserve starts no batch.
func TestDeadline(t *testing.T) {
	t.Parallel()
	srv := s3test.Server(t)
	env := map[string]string{
		"DATABASE_URL": pgtest.URL(t), "ARCHIVE_BUCKET": s3test.Bucket(t, srv).Bucket, "LOG_LEVEL": "error",
		"S3_ENDPOINT": srv.Endpoint(), "S3_ACCESS_KEY_ID": locals3.AccessKeyID, "S3_SECRET_ACCESS_KEY": locals3.SecretAccessKey,
	}
	h, closePool, err := setup(context.Background(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer closePool()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	sum, err := h(ctx, scheduled(t))
	if err != nil || !sum.Truncated || sum.Events != 0 {
		t.Fatalf("summary %+v, %v", sum, err)
	}
}

func TestSetupFailsFast(t *testing.T) {
	t.Parallel()
	base := func() map[string]string {
		return map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "ARCHIVE_BUCKET": "b"}
	}
	cases := map[string]func(map[string]string){
		"no database":      func(e map[string]string) { delete(e, "DATABASE_URL") },
		"no bucket":        func(e map[string]string) { delete(e, "ARCHIVE_BUCKET") },
		"bad age":          func(e map[string]string) { e["ARCHIVE_MIN_AGE"] = "a week" },
		"negative age":     func(e map[string]string) { e["ARCHIVE_MIN_AGE"] = "-1h" },
		"zero batch":       func(e map[string]string) { e["ARCHIVE_BATCH_SIZE"] = "0" },
		"huge batch":       func(e map[string]string) { e["ARCHIVE_BATCH_SIZE"] = "1000000" },
		"bad batch bytes":  func(e map[string]string) { e["ARCHIVE_MAX_BATCH_BYTES"] = "lots" },
		"bad sse":          func(e map[string]string) { e["ARCHIVE_SSE"] = "none" },
		"kms key, no kms":  func(e map[string]string) { e["ARCHIVE_KMS_KEY_ID"] = "alias/k" },
		"half a key pair":  func(e map[string]string) { e["S3_ACCESS_KEY_ID"] = "k" },
		"bad path style":   func(e map[string]string) { e["S3_PATH_STYLE"] = "sometimes" },
		"bad log level":    func(e map[string]string) { e["LOG_LEVEL"] = "loud" },
		"bad database url": func(e map[string]string) { e["DATABASE_URL"] = "postgres://x@127.0.0.1:notaport/x" },
	}
	for name, mod := range cases {
		env := base()
		mod(env)
		if _, _, err := setup(context.Background(), func(k string) string { return env[k] }); err == nil {
			t.Errorf("%s: setup succeeded", name)
		}
	}
	// The valid base starts (the database is only dialled on use).
	env := base()
	env["ARCHIVE_MIN_AGE"] = "30d"
	env["ARCHIVE_SSE"] = "aws:kms"
	env["ARCHIVE_KMS_KEY_ID"] = "alias/k"
	_, closePool, err := setup(context.Background(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	closePool()
}

// TestSetupReportsEveryProblemAtOnce: the logger's, the archive's and the
// bucket's settings fail together, each naming its variable.
func TestSetupReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	env := map[string]string{"LOG_LEVEL": "loud", "ARCHIVE_MIN_AGE": "a week", "ARCHIVE_SSE": "none"}
	_, _, err := setup(context.Background(), func(k string) string { return env[k] })
	for _, want := range []string{"DATABASE_URL", "ARCHIVE_BUCKET", "LOG_LEVEL", "ARCHIVE_MIN_AGE", "ARCHIVE_SSE"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}
