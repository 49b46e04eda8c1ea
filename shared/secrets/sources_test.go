package secrets_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
)

// Two versions of a sources document, as a roll leaves them.
const (
	sourcesV1 = `{"sources":{"stripe":{"kind":"stripe","secrets":["whsec_reader_one_0123456789abcdef"]}}}`
	sourcesV2 = `{"sources":{"stripe":{"kind":"stripe","secrets":["whsec_reader_two_0123456789abcdef"]}}}`
)

// reread checks that read returns want.
func reread(t *testing.T, read func(context.Context) ([]byte, error), want, where string) {
	t.Helper()
	got, err := read(t.Context())
	if err != nil || string(got) != want {
		t.Fatalf("%s: read %q, %v; want %q", where, got, err, want)
	}
}

// TestSourcesReaderReadsWhereStartUpRead: the document is read again from
// its file, its secret (the current version, through the SDK client made
// once) or its S3 copy, and each read sees what changed there since;
// an inline document has nothing to read again.
func TestSourcesReaderReadsWhereStartUpRead(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()

	file := filepath.Join(t.TempDir(), "sources.json")
	if err := os.WriteFile(file, []byte(sourcesV1), 0o600); err != nil {
		t.Fatal(err)
	}
	read, err := secrets.SourcesReader(ctx, func(k string) string {
		return map[string]string{"WEBHOOK_SOURCES_FILE": file}[k]
	})
	if err != nil || read == nil {
		t.Fatalf("a file: %v", err)
	}
	reread(t, read, sourcesV1, "the file")
	if err := os.WriteFile(file, []byte(sourcesV2), 0o600); err != nil {
		t.Fatal(err)
	}
	reread(t, read, sourcesV2, "the file changed")

	arn := f.sm.Create(t, "sources", sourcesV1)
	read, err = secrets.SourcesReader(ctx, func(k string) string {
		return map[string]string{secrets.EnvSourcesSecretARN: arn, secrets.EnvRegion: "eu-west-1"}[k]
	})
	if err != nil || read == nil || f.sm.Fetches(arn) != 0 {
		t.Fatalf("a secret: %v, %d fetches before the first read", err, f.sm.Fetches(arn))
	}
	reread(t, read, sourcesV1, "the secret")
	f.sm.Put(t, arn, sourcesV2)
	reread(t, read, sourcesV2, "the secret rotated")

	// The plain variables win over the secret, as at start-up.
	read, err = secrets.SourcesReader(ctx, func(k string) string {
		return map[string]string{secrets.EnvSourcesSecretARN: arn, "WEBHOOK_SOURCES": sourcesV1}[k]
	})
	if err != nil || read != nil {
		t.Fatalf("an inline document: %v, a reader %v; want none", err, read != nil)
	}
	if read, err := secrets.SourcesReader(ctx, func(string) string { return "" }); err != nil || read != nil {
		t.Fatalf("no document: %v, a reader %v; want none", err, read != nil)
	}
}

// TestSourcesReaderFailures: a file, a secret or a copy that cannot be
// read fails the read, naming it, never a secret; a copy named wrongly
// fails at once.
func TestSourcesReaderFailures(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	read, err := secrets.SourcesReader(ctx, func(k string) string {
		return map[string]string{"WEBHOOK_SOURCES_FILE": filepath.Join(t.TempDir(), "gone.json")}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := read(ctx); err == nil || !strings.Contains(err.Error(), "gone.json") {
		t.Errorf("a missing file: %v", err)
	}
	arn := f.sm.Create(t, "sources", sourcesV1)
	read, err = secrets.SourcesReader(ctx, func(k string) string {
		return map[string]string{secrets.EnvSourcesSecretARN: arn, secrets.EnvRegion: "eu-west-1"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	f.sm.Deny(t, arn)
	if _, err := read(ctx); err == nil || !strings.Contains(err.Error(), secrets.EnvSourcesSecretARN) || strings.Contains(err.Error(), "whsec_") {
		t.Errorf("a secret denied: %v", err)
	}
	if _, err := secrets.SourcesReader(ctx, func(k string) string {
		return map[string]string{secrets.EnvSourcesObject: "not-a-url"}[k]
	}); err == nil || !strings.Contains(err.Error(), secrets.EnvSourcesObject) {
		t.Errorf("a copy named wrongly: %v", err)
	}
}

// TestSourcesReaderReadsTheCopy: deployed, the document is the relay's S3
// copy of the secret, read again with one client.
func TestSourcesReaderReadsTheCopy(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs versitygw")
	}
	ctx := t.Context()
	bucket := s3test.Bucket(t, s3test.Server(t))
	objects := s3test.Open(t, bucket)
	if _, err := objects.Put(ctx, "config/sources.json", []byte(sourcesV1), "application/json"); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{secrets.EnvSourcesObject: "s3://" + bucket.Bucket + "/config/sources.json", "S3_ENDPOINT": bucket.Endpoint,
		"S3_ACCESS_KEY_ID": bucket.AccessKeyID, "S3_SECRET_ACCESS_KEY": bucket.SecretAccessKey, secrets.EnvRegion: bucket.Region}
	read, err := secrets.SourcesReader(ctx, func(k string) string { return env[k] })
	if err != nil || read == nil {
		t.Fatalf("the copy: %v", err)
	}
	reread(t, read, sourcesV1, "the copy")
	if _, err := objects.Put(ctx, "config/sources.json", []byte(sourcesV2), "application/json"); err != nil {
		t.Fatal(err)
	}
	reread(t, read, sourcesV2, "the copy replaced")
	env[secrets.EnvSourcesObject] = "s3://" + bucket.Bucket + "/config/missing.json"
	read, err = secrets.SourcesReader(ctx, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := read(ctx); err == nil || !strings.Contains(err.Error(), "config/missing.json") {
		t.Errorf("a missing copy: %v", err)
	}
}
