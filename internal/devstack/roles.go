package devstack

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// EnvAsOwner, when true, makes the dev stack connect every component as
// the database's owner, like the --as-owner flag.
const EnvAsOwner = "WEBHOOKDEV_AS_OWNER"

// RolesFile is where the dev stack keeps the function roles' local
// passwords, under the repository root.
const RolesFile = ".local/roles.json"

// Component roles: each component of the dev stack connects as the role
// its function has deployed (migrate.FunctionRoles), so that a statement
// its grants do not allow fails here as it would there.
var componentRoles = []struct{ component, role string }{
	{"receiver", migrate.RoleReceiver},
	{"processor", migrate.RoleProcessor},
	{"archiver", migrate.RoleArchiver},
	{"operator API (acting)", migrate.RoleOperator},
	{"operator API (read-only)", migrate.RoleOperatorRead},
}

// rolePasswords returns the function roles' local passwords, kept in path
// (JSON, by role, readable by this user alone) so that they survive
// restarts: another make dev, a webhookctl or a psql on the same server
// keeps logging in. Missing ones are generated and written.
func rolePasswords(path string) (map[string]string, error) {
	pw := map[string]string{}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read the roles' local passwords: %w", err)
	default:
		if err := json.Unmarshal(b, &pw); err != nil {
			return nil, fmt.Errorf("read the roles' local passwords from %s (delete it to make new ones): %w", path, err)
		}
	}
	changed := false
	for _, role := range migrate.FunctionRoles() {
		if pw[role] == "" {
			pw[role] = "local-" + strings.ToLower(rand.Text()) // ASCII, as the roles' SCRAM verifiers need
			changed = true
		}
	}
	if !changed {
		return pw, nil
	}
	b, err = json.MarshalIndent(pw, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("keep the roles' local passwords: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("keep the roles' local passwords: %w", err)
	}
	return pw, nil
}

// roleLogin logs a pool's connections in as a function role, whatever
// user the database URL (or its secret) names: the URL stays the owner's,
// which migrates.
type roleLogin struct{ role, password string }

var _ storage.Credentials = roleLogin{}

func (l roleLogin) Login(context.Context, string, uint16, string) (string, string, error) {
	return l.role, l.password, nil
}

func (roleLogin) Refused(string) {}

func (l roleLogin) String() string { return "role " + l.role } // never the password
