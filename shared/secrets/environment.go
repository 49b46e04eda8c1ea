package secrets

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// EnvRegion is the AWS region, which Lambda sets; IAM tokens are signed
// for it, and the SDK's clients call it.
const EnvRegion = "AWS_REGION"

// Environment prepares a function's configuration at init. It returns
// getenv with the secrets resolved into the variables the configuration
// loaders read (DATABASE_URL, built without a password from the database
// secret and DATABASE_HOST/PORT/NAME, or for IAM authentication; and
// WEBHOOK_SOURCES from WEBHOOK_SOURCES_SECRET_ARN or from its S3 copy,
// WEBHOOK_SOURCES_OBJECT), and the credentials
// every new database connection logs in with (storage.PoolConfig's
// Credentials; nil when DATABASE_URL holds them). A plain DATABASE_URL is
// used as is.
//
// The AWS configuration is loaded only when something needs it, so the
// dev stack and tests never touch AWS. It is the SDK's default chain, but
// for the region, which is read with getenv as the other components read
// it.
func Environment(ctx context.Context, getenv func(string) string) (func(string) string, storage.Credentials, error) {
	return environment(ctx, getenv, nil)
}

// EnvironmentFrom is Environment with the secrets read from sm instead of
// Secrets Manager: the migration function in apply mode, inside a VPC
// without a Secrets Manager endpoint, is handed the values its front read
// (migrator). The AWS configuration is still loaded for IAM
// authentication, which signs tokens locally and calls nothing.
func EnvironmentFrom(ctx context.Context, getenv func(string) string, sm Getter) (func(string) string, storage.Credentials, error) {
	if sm == nil {
		return nil, nil, fmt.Errorf("secrets: EnvironmentFrom needs a Getter")
	}
	return environment(ctx, getenv, sm)
}

func environment(ctx context.Context, getenv func(string) string, sm Getter) (func(string) string, storage.Credentials, error) {
	db, err := databaseFromEnv(getenv)
	if err != nil {
		return nil, nil, err
	}
	bucket, key, fromObject, err := sourcesObject(getenv)
	if err != nil {
		return nil, nil, err
	}
	needSecrets := (db.secretARN != "" && db.url == "") || sourcesNeeded(getenv)
	if !needSecrets && !db.iam && !fromObject {
		return getenv, nil, nil
	}
	var iam storage.Credentials
	if db.iam || (needSecrets && sm == nil) {
		var opts []func(*config.LoadOptions) error
		if r := getenv(EnvRegion); r != "" {
			opts = append(opts, config.WithRegion(r))
		}
		cfg, err := config.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("load AWS configuration: %w", err)
		}
		if db.iam {
			if cfg.Region == "" {
				return nil, nil, fmt.Errorf("%s=true needs %s, the database's region, which Lambda sets", EnvDatabaseIAMAuth, EnvRegion)
			}
			iam = IAMCredentials(cfg)
		}
		if needSecrets && sm == nil {
			sm = secretsmanager.NewFromConfig(cfg)
		}
	}

	resolved := map[string]string{}
	creds := iam
	if db.resolved() {
		var u string
		if u, creds, err = resolveDatabase(ctx, db, sm, iam); err != nil {
			return nil, nil, err
		}
		resolved[storage.EnvDatabaseURL] = u
	}
	if fromObject {
		v, err := FetchObject(ctx, getenv, bucket, key)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", EnvSourcesObject, err)
		}
		resolved["WEBHOOK_SOURCES"] = v
	}
	if sourcesNeeded(getenv) {
		v, err := Fetch(ctx, sm, getenv(EnvSourcesSecretARN))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", EnvSourcesSecretARN, err)
		}
		resolved["WEBHOOK_SOURCES"] = v
	}
	return func(k string) string {
		if v, ok := resolved[k]; ok {
			return v
		}
		return getenv(k)
	}, creds, nil
}

// DatabaseConfigured reports whether getenv says where the database is
// (DATABASE_URL, DATABASE_SECRET_ARN or DATABASE_HOST), so that a tool
// looks for a local one only when it does not.
func DatabaseConfigured(getenv func(string) string) bool {
	return getenv(storage.EnvDatabaseURL) != "" || getenv(EnvDatabaseSecretARN) != "" || getenv(EnvDatabaseHost) != ""
}
