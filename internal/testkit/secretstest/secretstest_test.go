package secretstest_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/smithy-go"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/secretstest"
)

func TestMain(m *testing.M) {
	secretstest.Use()
	os.Exit(m.Run())
}

// client is the SDK's client as production code makes it: the default
// configuration, which finds the stand-in through the process's
// environment.
func client(t *testing.T) *secretsmanager.Client {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(secretstest.Region))
	if err != nil {
		t.Fatal(err)
	}
	return secretsmanager.NewFromConfig(cfg)
}

// TestGetSecretValueThroughTheSDK: the SDK's client reads a secret by ARN
// or name, its versions by stage, and gets the service's errors as the
// SDK's typed errors.
func TestGetSecretValueThroughTheSDK(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sm := secretstest.Shared(t)
	c := client(t)
	arn := sm.Create(t, "app/db", `{"username":"u","password":"one"}`)

	get := func(in *secretsmanager.GetSecretValueInput) (*secretsmanager.GetSecretValueOutput, error) {
		t.Helper()
		return c.GetSecretValue(ctx, in)
	}
	out, err := get(&secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		t.Fatalf("by ARN: %v", err)
	}
	if !field.Check(t, "by ARN",
		field.Eq("SecretString", aws.ToString(out.SecretString), `{"username":"u","password":"one"}`),
		field.Eq("ARN", aws.ToString(out.ARN), arn),
		field.Is("VersionStages", out.VersionStages, len(out.VersionStages) == 1 && out.VersionStages[0] == "AWSCURRENT", "[AWSCURRENT]"),
		field.Is("CreatedDate", out.CreatedDate, out.CreatedDate != nil, "set"),
		field.Is("VersionId", aws.ToString(out.VersionId), aws.ToString(out.VersionId) != "", "set"),
	) {
		t.FailNow()
	}
	first := aws.ToString(out.VersionId)
	if out, err := get(&secretsmanager.GetSecretValueInput{SecretId: out.Name}); err != nil || aws.ToString(out.ARN) != arn {
		t.Fatalf("by name: %+v %v", out, err)
	}

	sm.Put(t, arn, `{"username":"u","password":"two"}`)
	if out, err := get(&secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)}); err != nil || aws.ToString(out.SecretString) != `{"username":"u","password":"two"}` {
		t.Fatalf("after Put: %+v %v", out, err)
	}
	if out, err := get(&secretsmanager.GetSecretValueInput{SecretId: aws.String(arn), VersionStage: aws.String("AWSPREVIOUS")}); err != nil ||
		aws.ToString(out.SecretString) != `{"username":"u","password":"one"}` || aws.ToString(out.VersionId) != first {
		t.Fatalf("AWSPREVIOUS: %+v %v", out, err)
	}
	if n := sm.Fetches(arn); n != 4 {
		t.Fatalf("fetches = %d, want 4", n)
	}

	var notFound *types.ResourceNotFoundException
	if _, err := get(&secretsmanager.GetSecretValueInput{SecretId: aws.String(arn + "-other")}); !errors.As(err, &notFound) {
		t.Fatalf("an unknown secret: %v, want ResourceNotFoundException", err)
	}
	if _, err := get(&secretsmanager.GetSecretValueInput{SecretId: aws.String(arn), VersionStage: aws.String("AWSPENDING")}); !errors.As(err, &notFound) {
		t.Fatalf("no AWSPENDING version: %v, want ResourceNotFoundException", err)
	}
	sm.Deny(t, arn)
	var apiErr smithy.APIError
	if _, err := get(&secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)}); !errors.As(err, &apiErr) || apiErr.ErrorCode() != "AccessDeniedException" {
		t.Fatalf("denied: %v, want AccessDeniedException", err)
	}
	// Another operation is not the stand-in's.
	if _, err := c.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(arn)}); !errors.As(err, &apiErr) || apiErr.ErrorCode() != "UnknownOperationException" {
		t.Fatalf("DescribeSecret: %v, want UnknownOperationException", err)
	}
}
