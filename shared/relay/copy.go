package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// The copy's settings.
const (
	// CurrentLabel is the staging label copied: the version the functions
	// would read from Secrets Manager.
	CurrentLabel = "AWSCURRENT"
	// MetaSecretVersion is the copy's metadata naming the secret's version
	// it holds (x-amz-meta-secret-version-id).
	MetaSecretVersion = "secret-version-id"
	// ContentType is the copy's.
	ContentType = "application/json"
)

// errInvalidSources marks a sources document that does not parse: kept out
// of the bucket, and not worth a retry until the secret changes.
var errInvalidSources = errors.New("not a valid sources document")

// secretUpdated copies the sources secret when its AWSCURRENT label has
// moved; other secrets and labels are of no concern.
func (r *Relay) secretUpdated(ctx context.Context, ev secretLabel) (Outcome, error) {
	out := Outcome{Event: "secret"}
	if ev.label != CurrentLabel || !r.isSourcesSecret(ev.resources) {
		r.log.Debug("relay: another secret or label; ignored", "secret", ev.name, "label", ev.label)
		out.Ignored = 1
		return out, nil
	}
	version, err := r.Copy(ctx)
	out.Copied = version
	return out, err
}

// isSourcesSecret reports whether the event's resources name the sources
// secret: its full ARN, or the full ARN of a partial one (without the six
// characters Secrets Manager appends to the name).
func (r *Relay) isSourcesSecret(resources []string) bool {
	want := r.cfg.SourcesSecretARN
	for _, res := range resources {
		if res == want || (strings.HasPrefix(res, want+"-") && len(res) == len(want)+7) {
			return true
		}
	}
	return false
}

// Copy reads the sources secret's AWSCURRENT version, checks that it is a
// valid sources document (source.Parse, what the receiver and the
// processor read it with), and writes it to the control bucket at
// SourcesKey, SSE-S3 encrypted, with the version's id as metadata. It
// returns the version copied. A document that does not parse is refused:
// the previous copy stays, and the error (which never quotes the document)
// fails the invocation, so that the failure is seen. Copying the same
// version twice writes the same object: a retry is harmless.
func (r *Relay) Copy(ctx context.Context) (string, error) {
	arn := r.cfg.SourcesSecretARN
	out, err := r.deps.Secrets.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn), VersionStage: aws.String(CurrentLabel)})
	if err != nil {
		r.log.Error("relay: the sources secret could not be read", "cause", CauseSecretRead, "secret", arn, "err", err)
		return "", fmt.Errorf("read the sources secret %s: %w", arn, err)
	}
	version := aws.ToString(out.VersionId)
	if out.SecretString == nil {
		r.log.Error("relay: the sources secret has no string value; not copied", "cause", CauseInvalidSources, "secret", arn, "version", version)
		return version, fmt.Errorf("the sources secret %s, version %s, has no string value: %w; the previous copy is kept", arn, version, errInvalidSources)
	}
	doc := []byte(*out.SecretString)
	if _, err := source.Parse(doc); err != nil {
		// source.Parse's errors name the source and the field, never a
		// secret.
		r.log.Error("relay: the sources secret is not a valid sources document; not copied, the previous copy is kept",
			"cause", CauseInvalidSources, "secret", arn, "version", version, "err", err)
		return version, fmt.Errorf("the sources secret %s, version %s, is %w (%w); the previous copy is kept", arn, version, errInvalidSources, err)
	}
	if _, err := r.objects.PutWithMetadata(ctx, r.cfg.SourcesKey, doc, ContentType, map[string]string{MetaSecretVersion: version}); err != nil {
		r.log.Error("relay: the sources document could not be copied", "cause", CauseCopyFailed, "secret", arn, "version", version, "err", err)
		return version, fmt.Errorf("copy the sources secret %s, version %s: %w", arn, version, err)
	}
	r.log.Info("relay: sources document copied", "secret", arn, "version", version, "bucket", r.cfg.ControlBucket, "key", r.cfg.SourcesKey)
	return version, nil
}

// empty deletes every object (every version, in a versioned bucket) under
// the control bucket's wake/ and config/ prefixes, the copy included, and
// returns how many it deleted. A bucket already gone is empty.
func (r *Relay) empty(ctx context.Context) (int, error) {
	deleted := 0
	for _, prefix := range []string{WakePrefix, ConfigPrefix} {
		versions, err := r.objects.ListVersions(ctx, prefix)
		if errors.Is(err, blobstore.ErrNotFound) {
			return deleted, nil
		}
		if err != nil {
			return deleted, err
		}
		n, err := r.objects.DeleteAll(ctx, versions)
		deleted += n
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}
