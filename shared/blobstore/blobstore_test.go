package blobstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
)

func TestPutHeadGetRangeDeleteList(t *testing.T) {
	t.Parallel()
	srv := s3test.Server(t)
	cfg := s3test.Bucket(t, srv)
	rec := s3test.Record(t, cfg.Endpoint)
	cfg.Endpoint = rec.URL()
	store := s3test.Open(t, cfg)
	ctx := context.Background()

	data := []byte("0123456789abcdefghij")
	put, err := store.Put(ctx, "a/b/one.bin", data, "application/octet-stream")
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	if put.Size != int64(len(data)) || !bytes.Equal(put.SHA256, want[:]) {
		t.Fatalf("put = %+v", put)
	}
	// The upload asked for encryption at rest and carried the checksum S3
	// verifies before storing.
	reqs := rec.Requests()
	last := reqs[len(reqs)-1]
	h := last.Header
	if last.Method != http.MethodPut || h.Get("X-Amz-Server-Side-Encryption") != "AES256" || h.Get("X-Amz-Checksum-Sha256") == "" {
		t.Fatalf("PUT headers = %v", h)
	}

	head, err := store.Head(ctx, "a/b/one.bin")
	if err != nil {
		t.Fatal(err)
	}
	if head.Size != int64(len(data)) {
		t.Fatalf("head = %+v", head)
	}
	if head.SHA256 != nil && !bytes.Equal(head.SHA256, want[:]) {
		t.Fatalf("head checksum %x, want %x", head.SHA256, want)
	}
	t.Logf("server reports SHA-256 on HEAD: %v", head.SHA256 != nil)

	got, err := store.GetRange(ctx, "a/b/one.bin", 3, 5)
	if err != nil || string(got) != "34567" {
		t.Fatalf("range = %q, %v", got, err)
	}
	if _, err := store.GetRange(ctx, "a/b/one.bin", 18, 5); err == nil {
		t.Fatal("a range past the end succeeded")
	}
	all, err := store.Get(ctx, "a/b/one.bin")
	if err != nil || !bytes.Equal(all, data) {
		t.Fatalf("get = %q, %v", all, err)
	}

	if _, err := store.Put(ctx, "a/c/two.bin", []byte("x"), "application/octet-stream"); err != nil {
		t.Fatal(err)
	}
	objs, err := store.List(ctx, "a/")
	if err != nil || len(objs) != 2 {
		t.Fatalf("list = %+v, %v; want 2 objects", objs, err)
	}
	if !field.Check(t, "list",
		field.Eq("[0].Key", objs[0].Key, "a/b/one.bin"),
		field.Eq("[1].Key", objs[1].Key, "a/c/two.bin"),
		field.Eq("[0].Size", objs[0].Size, 20),
	) {
		t.FailNow()
	}

	if err := store.Delete(ctx, "a/b/one.bin"); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, "a/b/one.bin"); err != nil {
		t.Fatalf("deleting a missing object: %v", err)
	}
	if _, err := store.Head(ctx, "a/b/one.bin"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("head after delete: %v", err)
	}
	if _, err := store.GetRange(ctx, "a/b/one.bin", 0, 1); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if blobstore.IsUnavailable(fmt.Errorf("x: %w", blobstore.ErrNotFound)) {
		t.Fatal("not found is not an outage")
	}
}

func TestPutReplaces(t *testing.T) {
	t.Parallel()
	store, _ := s3test.Store(t)
	ctx := context.Background()
	for _, v := range []string{"first version", "second"} {
		if _, err := store.Put(ctx, "k", []byte(v), "text/plain"); err != nil {
			t.Fatal(err)
		}
	}
	got, err := store.Get(ctx, "k")
	if err != nil || string(got) != "second" {
		t.Fatalf("get = %q, %v", got, err)
	}
}

func TestOutageIsUnavailable(t *testing.T) {
	tier.Heavy(t, "an S3 outage")
	t.Parallel()
	store, srv := s3test.Store(t)
	ctx := context.Background()
	if _, err := store.Put(ctx, "k", []byte("v"), "text/plain"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err := store.Put(ctx, "k2", []byte("v"), "text/plain")
	if err == nil || !blobstore.IsUnavailable(err) {
		t.Fatalf("put while stopped: %v (unavailable: %v)", err, blobstore.IsUnavailable(err))
	}
	if _, err := store.GetRange(ctx, "k", 0, 1); !blobstore.IsUnavailable(err) {
		t.Fatalf("get while stopped: %v", err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Fatalf("after restart: %q, %v", got, err)
	}
}

func TestRefusalIsNotUnavailable(t *testing.T) {
	t.Parallel()
	srv := s3test.Server(t)
	ctx := context.Background()

	missing := s3test.Open(t, s3test.Config(srv, "no-such-bucket"))
	_, err := missing.Put(ctx, "k", []byte("v"), "text/plain")
	if err == nil || blobstore.IsUnavailable(err) {
		t.Fatalf("put to a missing bucket: %v", err)
	}

	cfg := s3test.Bucket(t, srv)
	cfg.SecretAccessKey = "wrong"
	_, err = s3test.Open(t, cfg).Put(ctx, "k", []byte("v"), "text/plain")
	if err == nil || blobstore.IsUnavailable(err) {
		t.Fatalf("put with a wrong key: %v", err)
	}
}

func TestOpenValidates(t *testing.T) {
	t.Parallel()
	if _, err := blobstore.Open(context.Background(), blobstore.Config{}); err == nil {
		t.Fatal("no bucket accepted")
	}
	if _, err := blobstore.Open(context.Background(), blobstore.Config{Bucket: "b", SSE: "rot13"}); err == nil {
		t.Fatal("unknown SSE accepted")
	}
	if _, err := blobstore.Open(context.Background(), blobstore.Config{Bucket: "b", SSE: blobstore.SSEKMS, KMSKeyID: "alias/x"}); err != nil {
		t.Fatal(err)
	}
}

// TestVersions runs against versitygw with versioning on, as the deployed
// archive bucket is: a replaced object keeps its old version until that
// version is deleted, a plain Delete leaves only a delete marker, and
// DeleteVersion removes a version's bytes for good.
func TestVersions(t *testing.T) {
	t.Parallel()
	srv := s3test.ServerWith(t, locals3.Options{Versioning: true})
	store := s3test.Open(t, s3test.VersionedBucket(t, srv))
	ctx := context.Background()
	const key = "archive/one.jsonl.gz"
	v1, err := store.Put(ctx, key, []byte("first"), "application/gzip")
	if err != nil {
		t.Fatal(err)
	}
	v2, err := store.Put(ctx, key, []byte("second"), "application/gzip")
	if err != nil {
		t.Fatal(err)
	}
	if v1.VersionID == "" || v2.VersionID == "" || v1.VersionID == v2.VersionID {
		t.Fatalf("version ids %q, %q", v1.VersionID, v2.VersionID)
	}
	// A key that merely starts with key is listed under the prefix, and
	// not one of key's versions.
	if _, err := store.Put(ctx, key+".other", []byte("x"), "application/gzip"); err != nil {
		t.Fatal(err)
	}
	vs, err := versionsOf(ctx, store, key)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, v := range vs {
		if v.Key != key || v.DeleteMarker {
			t.Fatalf("versions: %+v", vs)
		}
		ids[v.VersionID] = v.IsLatest
	}
	if len(vs) != 2 || !ids[v2.VersionID] || ids[v1.VersionID] {
		t.Fatalf("versions: %+v", vs)
	}

	if err := store.DeleteVersion(ctx, key, v1.VersionID); err != nil {
		t.Fatal(err)
	}
	if vs, err = versionsOf(ctx, store, key); err != nil || len(vs) != 1 || vs[0].VersionID != v2.VersionID {
		t.Fatalf("after deleting the old version: %+v, %v", vs, err)
	}
	if got, err := store.Get(ctx, key); err != nil || string(got) != "second" {
		t.Fatalf("current after deleting the old version: %q, %v", got, err)
	}

	// A plain delete only hides the object behind a delete marker.
	if err := store.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(ctx, key); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	vs, err = versionsOf(ctx, store, key)
	if err != nil {
		t.Fatal(err)
	}
	var markers, kept int
	for _, v := range vs {
		if v.DeleteMarker {
			markers++
		} else if v.VersionID == v2.VersionID {
			kept++
		}
	}
	if markers != 1 || kept != 1 {
		t.Fatalf("after a plain delete: %+v", vs)
	}
	for _, v := range vs {
		if err := store.DeleteVersion(ctx, key, v.VersionID); err != nil {
			t.Fatal(err)
		}
	}
	if vs, err = versionsOf(ctx, store, key); err != nil || len(vs) != 0 {
		t.Fatalf("after deleting every version: %+v, %v", vs, err)
	}
}

// versionsOf returns every version and delete marker of exactly key, as an
// archiver's sweep would pick them from the prefix's listing.
func versionsOf(ctx context.Context, store *blobstore.Store, key string) ([]blobstore.Version, error) {
	all, err := store.ListVersions(ctx, key)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(v blobstore.Version) bool { return v.Key != key }), nil
}

// TestMetadataAndDeleteAll: user metadata and the content type come back
// from Head; ListVersions lists each version once over several pages (the
// server repeats the key at a page's boundary); DeleteAll deletes, in
// batches of a thousand, the objects of an unversioned bucket and every
// version and delete marker of a versioned one.
func TestMetadataAndDeleteAll(t *testing.T) {
	tier.Heavy(t, "puts a thousand objects")
	t.Parallel()
	ctx := context.Background()
	store, _ := s3test.Store(t)
	if _, err := store.PutWithMetadata(ctx, "config/x.json", []byte("{}"), "application/json", map[string]string{"secret-version-id": "v-1"}); err != nil {
		t.Fatal(err)
	}
	head, err := store.Head(ctx, "config/x.json")
	if err != nil || head.ContentType != "application/json" || head.Metadata["secret-version-id"] != "v-1" {
		t.Fatalf("head %+v %v", head, err)
	}
	for i := range 1005 {
		if _, err := store.Put(ctx, fmt.Sprintf("wake/%04d", i), nil, "text/plain"); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := store.ListVersions(ctx, "wake/")
	if err != nil || len(vs) != 1005 {
		t.Fatalf("%d versions, %v", len(vs), err)
	}
	if n, err := store.DeleteAll(ctx, vs); err != nil || n != 1005 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	if left, err := store.List(ctx, ""); err != nil || len(left) != 1 {
		t.Fatalf("left %v %v", left, err)
	}

	srv := s3test.ServerWith(t, locals3.Options{Versioning: true})
	versioned := s3test.Open(t, s3test.VersionedBucket(t, srv))
	for _, v := range []string{"a", "b"} {
		if _, err := versioned.Put(ctx, "k", []byte(v), "text/plain"); err != nil {
			t.Fatal(err)
		}
	}
	if err := versioned.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	vs, err = versioned.ListVersions(ctx, "")
	if err != nil || len(vs) != 3 {
		t.Fatalf("versions %+v %v", vs, err)
	}
	if n, err := versioned.DeleteAll(ctx, vs); err != nil || n != 3 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	if vs, err := versioned.ListVersions(ctx, ""); err != nil || len(vs) != 0 {
		t.Fatalf("left %+v %v", vs, err)
	}
}
