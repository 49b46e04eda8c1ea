package locals3_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
)

func TestStopStartKeepsPortAndObjects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := locals3.Start(ctx, locals3.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	store := s3test.Open(t, s3test.Bucket(t, srv))
	if _, err := store.Put(ctx, "k", []byte("kept"), "text/plain"); err != nil {
		t.Fatal(err)
	}
	port := srv.Port()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(srv.Endpoint()); err == nil {
		t.Fatal("server answers after Stop")
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatalf("Start of a running server: %v", err)
	}
	if srv.Port() != port {
		t.Fatalf("port %d after restart, was %d", srv.Port(), port)
	}
	if got, err := store.Get(ctx, "k"); err != nil || string(got) != "kept" {
		t.Fatalf("after restart: %q, %v", got, err)
	}

	dir := srv.Dir()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("temporary folder left after Close: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := srv.Start(ctx); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}

// TestDirIsKept: the dev stack's folder survives Close, and a new server on
// it serves the same objects.
func TestDirIsKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "s3")
	srv, err := locals3.Start(ctx, locals3.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cfg := s3test.Bucket(t, srv)
	if _, err := s3test.Open(t, cfg).Put(ctx, "k", []byte("v"), "text/plain"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv, err = locals3.Start(ctx, locals3.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfg = s3test.Config(srv, cfg.Bucket)
	if got, err := s3test.Open(t, cfg).Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Fatalf("after a new start on the same folder: %q, %v", got, err)
	}
}

func TestStartFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A binary that exits at once: Start says so, with the log.
	if _, err := locals3.Start(ctx, locals3.Options{Binary: "/bin/false"}); err == nil {
		t.Fatal("a server that exits at once started")
	}
	// A port someone else holds.
	srv := s3test.Server(t)
	if _, err := locals3.Start(ctx, locals3.Options{Port: srv.Port()}); err == nil {
		t.Fatal("a second server on a taken port started")
	}
}

func TestStaleFolderIsReaped(t *testing.T) {
	// Not parallel: it creates a folder in the shared temporary folder
	// that any Start may reap.
	stale, err := os.MkdirTemp("", "locals3-")
	if err != nil {
		t.Fatal(err)
	}
	// A PID that cannot be alive (above the kernel's pid_max).
	if err := os.WriteFile(filepath.Join(stale, "owner.pid"), []byte(strconv.Itoa(1<<30)), 0o644); err != nil {
		t.Fatal(err)
	}
	s3test.Server(t)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		os.RemoveAll(stale)
		t.Fatalf("stale folder survived a Start: %v", err)
	}
}

func TestBinaryFromEnvironment(t *testing.T) {
	t.Setenv(locals3.EnvBinary, filepath.Join(t.TempDir(), "missing"))
	if _, err := locals3.Binary(context.Background()); err == nil {
		t.Fatal("a missing $VERSITYGW was accepted")
	}
}

// TestEventNotificationsAreS3Shaped pins what versitygw v1.8.0 POSTs to
// Options.EventWebhookURL, which internal/devstack/localevents reads: a
// test event when it starts, then one document per object written or
// deleted, shaped like S3's event notification (Records, eventSource
// aws:s3, s3.bucket.name, s3.object.key and size), with three
// differences from what S3 sends
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html):
// eventName carries an "s3:" prefix ("s3:ObjectCreated:Put", where S3
// says "ObjectCreated:Put"), the key is sent as it is (S3 URL-encodes it,
// "red+flower.jpg"), and eventVersion is 2.2.
func TestEventNotificationsAreS3Shaped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var (
		mu     sync.Mutex
		bodies [][]byte
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
	}))
	defer hook.Close()
	received := func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return append([][]byte(nil), bodies...)
	}

	// A hook that refuses connections keeps the server from starting.
	if srv, err := locals3.Start(ctx, locals3.Options{EventWebhookURL: "http://127.0.0.1:1/refused"}); err == nil {
		srv.Close()
		t.Fatal("versitygw started with a notification URL that refuses connections")
	}

	srv := s3test.ServerWith(t, locals3.Options{EventWebhookURL: hook.URL + "/events"})
	if got := received(); len(got) != 1 || !strings.Contains(string(got[0]), `"Event":"s3:TestEvent"`) {
		t.Fatalf("at start: %q, want the test event", got)
	}
	cfg := s3test.Bucket(t, srv)
	store := s3test.Open(t, cfg)
	const key = "wake/arm/processor/2030-01-02T03:04:00Z red+flower"
	if _, err := store.Put(ctx, key, []byte("four"), "text/plain"); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return len(received()) == 3, fmt.Sprintf("%d documents received", len(received()))
	})
	type record struct {
		EventVersion string `json:"eventVersion"`
		EventSource  string `json:"eventSource"`
		AwsRegion    string `json:"awsRegion"`
		EventName    string `json:"eventName"`
		S3           struct {
			Bucket struct {
				Name string `json:"name"`
			} `json:"bucket"`
			Object struct {
				Key  string `json:"key"`
				Size int64  `json:"size"`
			} `json:"object"`
		} `json:"s3"`
	}
	names := map[string]record{}
	for _, b := range received()[1:] {
		var doc struct{ Records []record }
		if err := json.Unmarshal(b, &doc); err != nil || len(doc.Records) != 1 {
			t.Fatalf("a notification: %s (%v)", b, err)
		}
		r := doc.Records[0]
		names[r.EventName] = r
		field.Check(t, "a notification's record "+r.EventName,
			field.Eq("eventVersion", r.EventVersion, "2.2"),
			field.Eq("eventSource", r.EventSource, "aws:s3"),
			field.Eq("awsRegion", r.AwsRegion, locals3.Region),
			field.Eq("s3.bucket.name", r.S3.Bucket.Name, cfg.Bucket),
			field.Eq("s3.object.key", r.S3.Object.Key, key),
		)
	}
	if put, ok := names["s3:ObjectCreated:Put"]; !ok || put.S3.Object.Size != 4 {
		t.Errorf("no s3:ObjectCreated:Put record of 4 bytes: %v", names)
	}
	if _, ok := names["s3:ObjectRemoved:Delete"]; !ok {
		t.Errorf("no s3:ObjectRemoved:Delete record: %v", names)
	}
}

// TestCreateBucketIsIdempotent: creating a bucket this account owns
// already, then turning its versioning on, succeeds; a replaced object then
// keeps its first version.
func TestCreateBucketIsIdempotent(t *testing.T) {
	t.Parallel()
	srv := s3test.ServerWith(t, locals3.Options{Versioning: true})
	cfg := s3test.Bucket(t, srv)
	if err := locals3.CreateBucket(t.Context(), cfg, true); err != nil {
		t.Fatalf("second create, with versioning: %v", err)
	}
	store := s3test.Open(t, cfg)
	for _, body := range []string{"first", "second"} {
		if _, err := store.Put(t.Context(), "k", []byte(body), "text/plain"); err != nil {
			t.Fatal(err)
		}
	}
	if vs, err := store.ListVersions(t.Context(), "k"); err != nil || len(vs) != 2 {
		t.Fatalf("versions of a replaced object: %+v, %v; want 2", vs, err)
	}
}
