// Package s3test gives each test a real S3-compatible server of its own
// (versitygw, through locals3) and stores on fresh buckets there, the way
// pgtest gives each test a database.
//
// A server costs ~25ms and ~35MB to start, so every test gets its own rather
// than sharing one: tests stay independent, and an outage test can stop and
// restart its server without disturbing the others. Nothing starts until a
// test asks, and each test's cleanup stops its server and removes its
// folder, so unlike pgtest no TestMain is needed (and a package can keep
// pgtest.Main as its TestMain). A test binary that dies without cleaning up
// leaves no server behind either (see locals3).
//
// Only _test.go files should import it.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
)

// startTimeout bounds building versitygw on a cold cache (make setup does it
// ahead of time) plus starting it.
const startTimeout = 10 * time.Minute

// Server starts a server for this test alone; the test's cleanup closes it
// and removes its objects.
func Server(t testing.TB) *locals3.Server {
	t.Helper()
	return ServerWith(t, locals3.Options{})
}

// ServerWith is Server with opts (Versioning: a server whose buckets may
// keep versions, see VersionedBucket).
func ServerWith(t testing.TB, opts locals3.Options) *locals3.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	srv, err := locals3.Start(ctx, opts)
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("s3test: %v", err)
		}
	})
	return srv
}

// Config returns a client configuration for bucket on srv: endpoint
// override, path-style addressing and the server's static keys, exactly
// what the dev stack uses. MaxAttempts is 1 so that outage tests fail at
// once instead of waiting out the SDK's backoff.
func Config(srv *locals3.Server, bucket string) blobstore.Config {
	cfg := srv.BlobConfig(bucket)
	cfg.MaxAttempts = 1
	return cfg
}

// Bucket creates a bucket with a fresh name on srv and returns its
// configuration (see Config).
func Bucket(t testing.TB, srv *locals3.Server) blobstore.Config {
	t.Helper()
	return bucket(t, srv, false)
}

func bucket(t testing.TB, srv *locals3.Server, versioned bool) blobstore.Config {
	t.Helper()
	cfg := Config(srv, "t-"+randomHex())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := locals3.CreateBucket(ctx, cfg, versioned); err != nil {
		t.Fatalf("s3test: %v", err)
	}
	return cfg
}

// VersionedBucket is Bucket with versioning enabled, as the deployed
// archive bucket has it; srv must be started with Options.Versioning.
func VersionedBucket(t testing.TB, srv *locals3.Server) blobstore.Config {
	t.Helper()
	return bucket(t, srv, true)
}

// Open returns a store for cfg.
func Open(t testing.TB, cfg blobstore.Config) *blobstore.Store {
	t.Helper()
	store, err := blobstore.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	return store
}

// Store starts a server for this test alone, creates a bucket on it and
// returns a store over it with the server, for tests that need nothing
// else.
func Store(t testing.TB) (*blobstore.Store, *locals3.Server) {
	t.Helper()
	srv := Server(t)
	return Open(t, Bucket(t, srv)), srv
}

func randomHex() string {
	b := make([]byte, 6)
	rand.Read(b) // never fails; see crypto/rand.Read
	return hex.EncodeToString(b)
}
