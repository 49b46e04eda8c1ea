package blobstore_test

import (
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
)

func getenvOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnvAWSDefaults(t *testing.T) {
	t.Parallel()
	c, err := blobstore.ConfigFromEnv(getenvOf(map[string]string{"ARCHIVE_BUCKET": "b", "AWS_REGION": "eu-west-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if !field.Check(t, "AWS defaults",
		field.Eq("Bucket", c.Bucket, "b"),
		field.Eq("Region", c.Region, "eu-west-1"),
		field.Eq("Endpoint", c.Endpoint, ""),
		field.Eq("PathStyle", c.PathStyle, false),
		field.Eq("AccessKeyID", c.AccessKeyID, ""),
		field.Eq("SSE", c.SSE, ""),
		field.Eq("MaxAttempts", c.MaxAttempts, 0),
	) {
		t.FailNow()
	}
}

func TestConfigFromEnvLocalS3(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"ARCHIVE_BUCKET": "b", "S3_ENDPOINT": "http://127.0.0.1:7070", "S3_ACCESS_KEY_ID": "k", "S3_SECRET_ACCESS_KEY": "s",
		"ARCHIVE_SSE": "aws:kms", "ARCHIVE_KMS_KEY_ID": "alias/k", "S3_MAX_ATTEMPTS": "1",
	}
	c, err := blobstore.ConfigFromEnv(getenvOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if !field.Check(t, "config",
		field.Eq("PathStyle", c.PathStyle, true),
		field.Eq("AccessKeyID", c.AccessKeyID, "k"),
		field.Eq("SecretAccessKey", c.SecretAccessKey, "s"),
		field.Eq("SSE", c.SSE, blobstore.SSEKMS),
		field.Eq("KMSKeyID", c.KMSKeyID, "alias/k"),
		field.Eq("MaxAttempts", c.MaxAttempts, 1),
	) {
		t.FailNow()
	}
	env["S3_PATH_STYLE"] = "false"
	if c, _ := blobstore.ConfigFromEnv(getenvOf(env)); c.PathStyle {
		t.Fatal("S3_PATH_STYLE=false ignored")
	}
}

func TestConfigFromEnvNamesEveryBadVariable(t *testing.T) {
	t.Parallel()
	_, err := blobstore.ConfigFromEnv(getenvOf(map[string]string{
		"ARCHIVE_SSE": "rot13", "ARCHIVE_KMS_KEY_ID": "alias/k", "S3_ACCESS_KEY_ID": "k", "S3_PATH_STYLE": "sometimes",
		"S3_MAX_ATTEMPTS": "11",
	}))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"ARCHIVE_BUCKET is not set",
		`ARCHIVE_SSE must be AES256 or aws:kms, got "rot13"`,
		"ARCHIVE_KMS_KEY_ID is set but ARCHIVE_SSE is not aws:kms",
		"S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together",
		`S3_PATH_STYLE must be true or false, got "sometimes"`,
		`S3_MAX_ATTEMPTS must be a number of tries from 1 to 10, got "11"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}
