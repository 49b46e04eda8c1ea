package secrets

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/rds/auth"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// EnvDatabaseIAMAuth, when "true", makes every new database connection
// authenticate with an RDS IAM token minted from the function's role
// instead of a password (the URL then names the user and no password).
const EnvDatabaseIAMAuth = "DATABASE_IAM_AUTH"

// PasswordFunc supplies a password for each new database connection.
type PasswordFunc = func(ctx context.Context, host string, port uint16, user string) (string, error)

// Environment prepares a function's configuration at init: it resolves the
// secrets named in the environment (see Overlay) and, with
// DATABASE_IAM_AUTH=true, returns a PasswordFunc minting RDS IAM tokens.
// The AWS configuration is loaded only when one of them needs it, so the
// dev stack and tests never touch AWS.
func Environment(ctx context.Context, getenv func(string) string) (func(string) string, PasswordFunc, error) {
	iam := false
	if v := getenv(EnvDatabaseIAMAuth); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, nil, fmt.Errorf("%s must be true or false, got %q", EnvDatabaseIAMAuth, v)
		}
		iam = b
	}
	if !Needed(getenv) && !iam {
		return getenv, nil, nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	var sm Getter
	if Needed(getenv) {
		sm = secretsmanager.NewFromConfig(cfg)
	}
	env, err := Overlay(ctx, getenv, sm)
	if err != nil {
		return nil, nil, err
	}
	if !iam {
		return env, nil, nil
	}
	return env, RDSIAMPassword(cfg), nil
}

// RDSIAMPassword returns a PasswordFunc that mints an RDS IAM
// authentication token (valid 15 minutes) for each new connection.
func RDSIAMPassword(cfg aws.Config) PasswordFunc {
	return func(ctx context.Context, host string, port uint16, user string) (string, error) {
		return auth.BuildAuthToken(ctx, fmt.Sprintf("%s:%d", host, port), cfg.Region, user, cfg.Credentials)
	}
}
