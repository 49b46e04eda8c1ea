package migrator

import (
	"errors"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/settings"

	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The migration function's pool: goose holds its advisory lock on one
// session and migrates on another, so two connections; one invocation at a
// time per container, and CloudFormation sends one request at a time.
const (
	poolApplicationName = "webhook-inbox-migrator"
	poolMaxConns        = 2
	poolConnectTimeout  = 10 * time.Second
)

// ConfigFromEnv reads the migration function's configuration with getenv:
// its database (the admin's, DATABASE_URL or the secret secrets.Environment
// resolved, with storage.PoolConfigFromEnv's variables) and the pool's
// shape. Secrets, Logger and Pool are left for the caller.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	db, err := storage.PoolConfigFromEnv(getenv)
	db.ApplicationName, db.MaxConns, db.ConnectTimeout = poolApplicationName, poolMaxConns, poolConnectTimeout
	e := settings.NewEnv(getenv)
	cfg := Config{Database: db, RolesAuth: rolesAuthFromEnv(e), LocalResponseURL: e.Bool(EnvLocalResponseURL, false)}
	return cfg, errors.Join(err, e.Err())
}
