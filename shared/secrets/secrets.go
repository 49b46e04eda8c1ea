// Package secrets resolves the functions' secrets once, at init: the
// database connection and the sources document, either given directly (the
// dev stack, tests) or as AWS Secrets Manager secrets fetched once per Lambda
// container and kept for its life, so no invocation pays for a fetch and no
// secret sits in the function's environment.
package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// Environment variables naming secrets.
const (
	// EnvDatabaseSecretARN names a Secrets Manager secret holding either a
	// postgres:// URL or the JSON document RDS writes for managed
	// credentials ({"username","password","host","port","dbname"}).
	EnvDatabaseSecretARN = "DATABASE_SECRET_ARN"
	// EnvDatabaseSSLMode is the sslmode used when the URL is built from an
	// RDS secret; default require (TLS on, as RDS Proxy insists).
	EnvDatabaseSSLMode = "DATABASE_SSLMODE"
	// EnvSourcesSecretARN names a secret holding the sources document.
	EnvSourcesSecretARN = "WEBHOOK_SOURCES_SECRET_ARN"
)

// Getter is the part of the Secrets Manager client used here.
type Getter interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Fetch returns the string value of the secret arn.
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

// rdsSecret is the document RDS and Secrets Manager rotation write.
type rdsSecret struct {
	Username string          `json:"username"`
	Password string          `json:"password"`
	Host     string          `json:"host"`
	Port     json.RawMessage `json:"port"` // a number, or a string in older secrets
	DBName   string          `json:"dbname"`
}

// DatabaseURL turns a database secret's value into a connection URL: a
// postgres:// URL as is, or an RDS credentials document built into one with
// sslmode (default "require").
func DatabaseURL(value, sslmode string) (string, error) {
	v := strings.TrimSpace(value)
	if strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://") {
		return v, nil
	}
	var s rdsSecret
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return "", errors.New("the database secret is neither a postgres:// URL nor an RDS credentials JSON document")
	}
	if s.Username == "" || s.Host == "" {
		return "", errors.New("the database secret lacks username or host")
	}
	port := 5432
	if len(s.Port) > 0 {
		p := strings.Trim(string(s.Port), `"`)
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 65535 {
			return "", errors.New("the database secret's port is not a port number")
		}
		port = n
	}
	if s.DBName == "" {
		s.DBName = "postgres"
	}
	if sslmode == "" {
		sslmode = "require"
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(s.Username, s.Password),
		Host:     fmt.Sprintf("%s:%d", s.Host, port),
		Path:     "/" + s.DBName,
		RawQuery: url.Values{"sslmode": {sslmode}}.Encode(),
	}
	return u.String(), nil
}

// Overlay returns getenv with the secrets resolved into the variables the
// configuration loaders read: DATABASE_URL from DATABASE_SECRET_ARN and
// WEBHOOK_SOURCES from WEBHOOK_SOURCES_SECRET_ARN, each fetched once with sm
// when the plain variable is not set. Loaders then need not know where a
// value came from. sm may be nil when Needed(getenv) is false.
func Overlay(ctx context.Context, getenv func(string) string, sm Getter) (func(string) string, error) {
	resolved := map[string]string{}
	if getenv("DATABASE_URL") == "" {
		if arn := getenv(EnvDatabaseSecretARN); arn != "" {
			v, err := Fetch(ctx, sm, arn)
			if err != nil {
				return nil, err
			}
			u, err := DatabaseURL(v, getenv(EnvDatabaseSSLMode))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", EnvDatabaseSecretARN, err)
			}
			resolved["DATABASE_URL"] = u
		}
	}
	if getenv("WEBHOOK_SOURCES") == "" && getenv("WEBHOOK_SOURCES_FILE") == "" {
		if arn := getenv(EnvSourcesSecretARN); arn != "" {
			v, err := Fetch(ctx, sm, arn)
			if err != nil {
				return nil, err
			}
			resolved["WEBHOOK_SOURCES"] = v
		}
	}
	return func(k string) string {
		if v, ok := resolved[k]; ok {
			return v
		}
		return getenv(k)
	}, nil
}

// Needed reports whether the environment names any secret to fetch, so a
// main builds a Secrets Manager client only when it will use it.
func Needed(getenv func(string) string) bool {
	return (getenv("DATABASE_URL") == "" && getenv(EnvDatabaseSecretARN) != "") ||
		(getenv("WEBHOOK_SOURCES") == "" && getenv("WEBHOOK_SOURCES_FILE") == "" && getenv(EnvSourcesSecretARN) != "")
}
