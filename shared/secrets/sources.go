package secrets

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
)

// SourcesReader returns how the sources document is read again while a
// container runs, from the place Environment read it at init, so that a
// source or a secret changed there reaches running receivers without a
// redeploy: WEBHOOK_SOURCES_FILE's file, the S3 copy
// (WEBHOOK_SOURCES_OBJECT) or the secret's AWSCURRENT version
// (WEBHOOK_SOURCES_SECRET_ARN). getenv is the environment before secrets
// are resolved. The client it reads with is made here, once, and makes no
// request until the first read.
//
// It returns nil when the document is inline (WEBHOOK_SOURCES): the
// environment of a running container never changes, so there is nothing
// to read again. Errors name the file, the object or the secret, never
// what they hold.
func SourcesReader(ctx context.Context, getenv func(string) string) (func(context.Context) ([]byte, error), error) {
	if getenv("WEBHOOK_SOURCES") != "" {
		return nil, nil
	}
	if path := getenv("WEBHOOK_SOURCES_FILE"); path != "" {
		return func(context.Context) ([]byte, error) {
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("sources: %w", err)
			}
			return b, nil
		}, nil
	}
	bucket, key, fromObject, err := sourcesObject(getenv)
	if err != nil {
		return nil, err
	}
	if fromObject {
		store, err := openObjectBucket(ctx, getenv, bucket)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvSourcesObject, err)
		}
		return func(ctx context.Context) ([]byte, error) {
			b, err := store.Get(ctx, key)
			if err != nil {
				return nil, fmt.Errorf("%s: read s3://%s/%s: %w", EnvSourcesObject, bucket, key, err)
			}
			return b, nil
		}, nil
	}
	if !sourcesNeeded(getenv) {
		return nil, nil
	}
	var opts []func(*config.LoadOptions) error
	if r := getenv(EnvRegion); r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	sm, arn := secretsmanager.NewFromConfig(cfg), getenv(EnvSourcesSecretARN)
	return func(ctx context.Context) ([]byte, error) {
		v, err := Fetch(ctx, sm, arn)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvSourcesSecretARN, err)
		}
		return []byte(v), nil
	}, nil
}

// openObjectBucket opens the bucket of the sources document's S3 copy,
// reached as the archive is (the S3_* settings).
func openObjectBucket(ctx context.Context, getenv func(string) string, bucket string) (*blobstore.Store, error) {
	cfg, err := blobstore.ConnectionFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	cfg.Bucket = bucket
	return blobstore.Open(ctx, cfg)
}
