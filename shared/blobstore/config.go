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
	// EnvSSE is the server-side encryption of uploads: AES256 (the
	// default) or aws:kms.
	EnvSSE = "ARCHIVE_SSE"
	// EnvKMSKeyID is the KMS key of aws:kms; unset, the account's aws/s3
	// key.
	EnvKMSKeyID = "ARCHIVE_KMS_KEY_ID"
)

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
// S3_PATH_STYLE and the static keys), for a component whose bucket is
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
	}
	// Local servers want path-style addressing; AWS wants virtual hosts.
	c.PathStyle = e.Bool(EnvPathStyle, c.Endpoint != "")
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		e.Errorf("%s and %s go together", EnvAccessKeyID, EnvSecretAccessKey)
	}
	return c
}
