package blobstore

import (
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
)

// The blob store's environment variables.
const (
	// EnvBucket is the archive's bucket. Required.
	EnvBucket = "ARCHIVE_BUCKET"
	// EnvRegion is the bucket's region, which Lambda sets.
	EnvRegion = "AWS_REGION"
	// EnvEndpoint overrides the S3 endpoint (a local S3-compatible
	// server); unset in AWS.
	EnvEndpoint = "S3_ENDPOINT"
	// EnvPathStyle forces path-style addressing (true/false); it defaults
	// to true when S3_ENDPOINT is set, as local servers need.
	EnvPathStyle = "S3_PATH_STYLE"
	// EnvAccessKeyID and EnvSecretAccessKey are static keys for the server
	// at S3_ENDPOINT. Unset, the SDK's default chain applies (the Lambda's
	// role, AWS_* variables, profiles).
	EnvAccessKeyID     = "S3_ACCESS_KEY_ID"
	EnvSecretAccessKey = "S3_SECRET_ACCESS_KEY"
	// EnvMaxAttempts bounds the SDK's tries of one S3 request, the first
	// included, from 1 to 10; unset, the SDK's default (3). More rides
	// out S3's throttling (503 Slow Down) at a high rate; 1 fails at once
	// where a local S3 that is down should not hold a request.
	EnvMaxAttempts = "S3_MAX_ATTEMPTS"
	// EnvSSE is the server-side encryption of uploads: AES256 (the
	// default) or aws:kms.
	EnvSSE = "ARCHIVE_SSE"
	// EnvKMSKeyID is the KMS key of aws:kms; unset, the account's aws/s3
	// key.
	EnvKMSKeyID = "ARCHIVE_KMS_KEY_ID"
)

// maxAttempts is the most tries S3_MAX_ATTEMPTS allows: the SDK waits up
// to 20 s before each retry, so more would outlast a function's timeout.
const maxAttempts = 10

// ConfigFromEnv reads the bucket and how to reach it with getenv, reporting
// every problem at once, each naming its variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	e := settings.NewEnv(getenv)
	c := connectionFromEnv(e)
	c.Bucket = e.Required(EnvBucket)
	c.SSE = e.OneOf(EnvSSE, "", SSES3, SSEKMS)
	c.KMSKeyID = e.String(EnvKMSKeyID, "")
	if c.KMSKeyID != "" && getenv(EnvSSE) != SSEKMS {
		e.Errorf("%s is set but %s is not %s", EnvKMSKeyID, EnvSSE, SSEKMS)
	}
	return c, e.Err()
}

// ConnectionFromEnv reads only how to reach S3 (AWS_REGION, S3_ENDPOINT,
// S3_PATH_STYLE, the static keys and S3_MAX_ATTEMPTS), for a component whose bucket is
// named by a variable of its own (the relay's control bucket): Bucket,
// SSE and KMSKeyID are left for the caller.
func ConnectionFromEnv(getenv func(string) string) (Config, error) {
	e := settings.NewEnv(getenv)
	c := connectionFromEnv(e)
	return c, e.Err()
}

func connectionFromEnv(e *settings.Env) Config {
	c := Config{
		Region:          e.String(EnvRegion, ""),
		Endpoint:        e.String(EnvEndpoint, ""),
		AccessKeyID:     e.String(EnvAccessKeyID, ""),
		SecretAccessKey: e.String(EnvSecretAccessKey, ""),
		MaxAttempts:     e.IntIn(EnvMaxAttempts, 0, 1, maxAttempts, "tries"),
	}
	// Local servers want path-style addressing; AWS wants virtual hosts.
	c.PathStyle = e.Bool(EnvPathStyle, c.Endpoint != "")
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		e.Errorf("%s and %s go together", EnvAccessKeyID, EnvSecretAccessKey)
	}
	return c
}
