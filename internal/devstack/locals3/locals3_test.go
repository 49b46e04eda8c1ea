package locals3_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
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
