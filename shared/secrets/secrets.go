// Package secrets resolves the functions' secrets: the database's
// connection and credentials, and the sources document, either given
// directly (the dev stack, tests) or as AWS Secrets Manager secrets, so no
// secret sits in a function's environment.
//
// Secrets are fetched at init and kept for the container's life, so no
// invocation pays for a fetch, with one exception: the database password.
// A rotation changes it while containers run, so the pool asks for the
// credentials of every new connection (DatabaseCredentials), and when the
// database refuses them the secret is read again, at most once a second
// and less often while it still holds the refused password.
package secrets

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// EnvSourcesSecretARN names a secret holding the sources document.
const EnvSourcesSecretARN = "WEBHOOK_SOURCES_SECRET_ARN"

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
	return getenv("WEBHOOK_SOURCES") == "" && getenv("WEBHOOK_SOURCES_FILE") == "" && getenv(EnvSourcesSecretARN) != ""
}
