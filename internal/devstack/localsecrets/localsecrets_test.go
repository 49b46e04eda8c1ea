package localsecrets_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localsecrets"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
)

// TestTheSDKReadsIt: the AWS SDK's own client reads a secret by ARN and by
// name, sees a new value after Put, and gets ResourceNotFoundException for
// a secret that does not exist.
func TestTheSDKReadsIt(t *testing.T) {
	t.Parallel()
	s, err := localsecrets.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(localsecrets.AccessKeyID, localsecrets.SecretAccessKey, "")))
	if err != nil {
		t.Fatal(err)
	}
	sm := secretsmanager.NewFromConfig(cfg, func(o *secretsmanager.Options) { o.BaseEndpoint = aws.String(s.Endpoint()) })

	const arn = "arn:aws:secretsmanager:us-east-1:000000000000:secret:inbox-receiver-AbCdEf"
	s.Put(arn, `{"username":"webhook_receiver","password":"one"}`)
	for _, id := range []string{arn, "inbox-receiver-AbCdEf"} {
		if v, err := secrets.Fetch(ctx, sm, id); err != nil || !strings.Contains(v, `"one"`) {
			t.Fatalf("fetch %s = %q, %v", id, v, err)
		}
	}
	s.Put(arn, `{"username":"webhook_receiver","password":"two"}`)
	if v, err := secrets.Fetch(ctx, sm, arn); err != nil || !strings.Contains(v, `"two"`) {
		t.Fatalf("after Put: %q, %v", v, err)
	}
	if s.Reads(arn) != 3 {
		t.Fatalf("reads = %d", s.Reads(arn))
	}
	if _, err := secrets.Fetch(ctx, sm, arn+"-gone"); err == nil || !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Fatalf("missing secret: %v", err)
	}
}
