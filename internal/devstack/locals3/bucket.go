package locals3

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
)

// CreateBucket creates cfg's bucket, or does nothing if this account owns it
// already, and turns its versioning on when versioned is set: what the
// deployment template does in AWS, done here for local servers and tests
// (the functions never create buckets, so blobstore cannot).
func CreateBucket(ctx context.Context, cfg blobstore.Config, versioned bool) error {
	region := cfg.Region
	if region == "" {
		region = blobstore.DefaultRegion
	}
	opts := s3.Options{Region: region, UsePathStyle: cfg.PathStyle}
	if cfg.Endpoint != "" {
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	if cfg.AccessKeyID != "" || cfg.SecretAccessKey != "" {
		opts.Credentials = credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")
	}
	client := s3.New(opts)
	_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(cfg.Bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("s3 create bucket %s: %w", cfg.Bucket, err)
	}
	if !versioned {
		return nil
	}
	_, err = client.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(cfg.Bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	if err != nil {
		return fmt.Errorf("s3 enable versioning %s: %w", cfg.Bucket, err)
	}
	return nil
}
