// Package secrets resolves the functions' secrets: the database's
// connection and credentials, and the sources document, either given
// directly (the dev stack, tests) or as AWS Secrets Manager secrets, so no
// secret sits in a function's environment.
//
// Secrets are fetched at init and kept for the container's life, so no
// invocation pays for a fetch, with two exceptions. The database password:
// a rotation changes it while containers run, so the pool asks for the
// credentials of every new connection (DatabaseCredentials), and when the
// database refuses them the secret is read again, at most once a second
// and less often while it still holds the refused password. And the
// sources document, which the receiver reads again on an interval and
// after a burst of refused requests (SourcesReader).
package secrets

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// EnvSourcesSecretARN names a secret holding the sources document.
const EnvSourcesSecretARN = "WEBHOOK_SOURCES_SECRET_ARN"

// EnvSourcesObject names the S3 copy of that secret, s3://<bucket>/<key>:
// the control bucket's config/sources.json, which the relay keeps equal to
// the secret's current version (shared/relay), so that a receiver in a VPC
// without a Secrets Manager endpoint reads it through the free S3 gateway
// endpoint. The bucket is reached as the archive is (S3_* settings).
const EnvSourcesObject = "WEBHOOK_SOURCES_OBJECT"

// Getter is the part of the Secrets Manager client used here.
type Getter interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Fetch returns the string value of the secret arn (its AWSCURRENT
// version).
func Fetch(ctx context.Context, sm Getter, arn string) (string, error) {
	if sm == nil {
		return "", errors.New("no Secrets Manager client")
	}
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		// The error names the secret, never its value.
		return "", fmt.Errorf("read secret %s: %w", arn, err)
	}
	if out.SecretString == nil {
		return "", fmt.Errorf("secret %s has no string value", arn)
	}
	return *out.SecretString, nil
}

// sourcesNeeded reports whether the sources document is to be read from
// its secret: WEBHOOK_SOURCES_SECRET_ARN is set and neither plain variable
// is.
func sourcesNeeded(getenv func(string) string) bool {
	return getenv("WEBHOOK_SOURCES") == "" && getenv("WEBHOOK_SOURCES_FILE") == "" && getenv(EnvSourcesSecretARN) != "" &&
		getenv(EnvSourcesObject) == ""
}

// sourcesObject returns the bucket and key of WEBHOOK_SOURCES_OBJECT when
// the sources document is to be read from it (no plain variable is set);
// ok is false otherwise.
func sourcesObject(getenv func(string) string) (bucket, key string, ok bool, err error) {
	v := getenv(EnvSourcesObject)
	if v == "" || getenv("WEBHOOK_SOURCES") != "" || getenv("WEBHOOK_SOURCES_FILE") != "" {
		return "", "", false, nil
	}
	if getenv(EnvSourcesSecretARN) != "" {
		return "", "", false, fmt.Errorf("%s and %s are two places for one document: set one", EnvSourcesObject, EnvSourcesSecretARN)
	}
	rest, found := strings.CutPrefix(v, "s3://")
	bucket, key, _ = strings.Cut(rest, "/")
	if !found || bucket == "" || key == "" {
		return "", "", false, fmt.Errorf("%s is not s3://<bucket>/<key>", EnvSourcesObject)
	}
	return bucket, key, true, nil
}

// FetchObject returns the object's content as the sources document.
func FetchObject(ctx context.Context, getenv func(string) string, bucket, key string) (string, error) {
	store, err := openObjectBucket(ctx, getenv, bucket)
	if err != nil {
		return "", err
	}
	b, err := store.Get(ctx, key)
	if err != nil {
		// The error names the object, never its content.
		return "", fmt.Errorf("read s3://%s/%s: %w", bucket, key, err)
	}
	return string(b), nil
}
