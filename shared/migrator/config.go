package migrator

import (
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

// ConfigFromEnv reads the migration function's settings with getenv. The
// database's are read beside them by storage.PoolConfigFromEnv (the
// admin's: DATABASE_URL or the secret secrets.Environment resolved), and
// tuned by Pool.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	e := settings.NewEnv(getenv)
	cfg := Config{RolesAuth: rolesAuthFromEnv(e), LocalResponseURL: e.Bool(EnvLocalResponseURL, false)}
	return cfg, e.Err()
}

// Pool is the migration function's pool: db (storage.PoolConfigFromEnv's,
// the schema owner's) with the function's application name, size and dial
// timeout.
func (Config) Pool(db storage.PoolConfig) storage.PoolConfig {
	db.ApplicationName, db.MaxConns, db.ConnectTimeout = poolApplicationName, poolMaxConns, poolConnectTimeout
	return db
}
