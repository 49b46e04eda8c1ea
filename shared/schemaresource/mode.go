package schemaresource

import (
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
)

// The migration function's own variables, besides the database's.
const (
	// EnvMode chooses the mode (Mode*); unset is the direct mode, as every
	// deployment before the split ran.
	EnvMode = "MIGRATOR_MODE"
	// EnvFunction is, in the front mode, the migration function in apply
	// mode that the front invokes: its name, ARN or partial ARN, as
	// lambda:Invoke takes it.
	EnvFunction = "MIGRATOR_FUNCTION"
)

// Mode is how the binary runs.
type Mode string

// The modes.
const (
	// ModeDirect answers CloudFormation and migrates in one function
	// (Handler): it reads its secrets from Secrets Manager and connects.
	ModeDirect Mode = "direct"
	// ModeFront answers CloudFormation outside the VPC (Front): it reads
	// the secrets and invokes the apply mode with them.
	ModeFront Mode = "front"
	// ModeApply migrates inside the VPC with what the front sends
	// (Applier), and calls nothing but the database.
	ModeApply Mode = "apply"
)

// ModeFromEnv reads MIGRATOR_MODE; unset is ModeDirect.
func ModeFromEnv(getenv func(string) string) (Mode, error) {
	e := settings.NewEnv(getenv)
	m := Mode(e.OneOf(EnvMode, string(ModeDirect), string(ModeDirect), string(ModeFront), string(ModeApply)))
	return m, e.Err()
}

// FrontConfigFromEnv reads the front's configuration: the migration
// function it invokes (MIGRATOR_FUNCTION, required) and the admin secret
// it reads for it (DATABASE_SECRET_ARN; unset, the apply mode connects
// with its own DATABASE_URL or IAM authentication). Secrets, Lambda,
// Client and Logger are left for the caller.
func FrontConfigFromEnv(getenv func(string) string) (FrontConfig, error) {
	e := settings.NewEnv(getenv)
	c := FrontConfig{
		Function:          e.Required(EnvFunction),
		DatabaseSecretARN: e.String(secrets.EnvDatabaseSecretARN, ""),
	}
	return c, e.Err()
}
