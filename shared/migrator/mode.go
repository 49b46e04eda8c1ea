package migrator

import (
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
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
	// EnvRolesAuth is how the function roles authenticate, "password" or
	// "iam" (required in every mode that migrates or answers): the
	// template sets it. A request whose Auth property disagrees is
	// refused: whoever may invoke the function must not choose it (a
	// forged Update with Auth=iam would clear the roles' passwords).
	EnvRolesAuth = "MIGRATOR_ROLES_AUTH"
	// EnvLocalResponseURL ("true") lets the function answer a ResponseURL
	// on the loopback interface, plain HTTP included: the local stack's
	// stand-in for S3 (lambdalocal) and the tests set it; the template
	// never does. Without it only CloudFormation's pre-signed S3 URLs
	// (https, an S3 host of amazonaws.com) are answered
	// (cfnresponse.CheckResponseURL).
	EnvLocalResponseURL = "MIGRATOR_LOCAL_RESPONSE_URL"
)

// localResponseURL reads MIGRATOR_LOCAL_RESPONSE_URL ("true" allows a
// loopback ResponseURL; anything else does not).
func localResponseURL(getenv func(string) string) bool {
	return getenv(EnvLocalResponseURL) == "true"
}

// LocalResponseURLFromEnv is localResponseURL, for the migration
// function's start-up failure handler.
func LocalResponseURLFromEnv(getenv func(string) string) bool { return localResponseURL(getenv) }

// rolesAuthFromEnv reads MIGRATOR_ROLES_AUTH (required) into e.
func rolesAuthFromEnv(e *settings.Env) migrate.Auth {
	v := e.Required(EnvRolesAuth)
	switch a := migrate.Auth(v); a {
	case migrate.AuthPassword, migrate.AuthIAM:
		return a
	case "":
		return ""
	default:
		e.Errorf("%s must be %q or %q, got %q", EnvRolesAuth, migrate.AuthPassword, migrate.AuthIAM, v)
		return ""
	}
}

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
// with its own DATABASE_URL or IAM authentication). Secrets, Lambda
// and Logger are left for the caller.
func FrontConfigFromEnv(getenv func(string) string) (FrontConfig, error) {
	e := settings.NewEnv(getenv)
	c := FrontConfig{
		Function:          e.Required(EnvFunction),
		DatabaseSecretARN: e.String(secrets.EnvDatabaseSecretARN, ""),
		RolesAuth:         rolesAuthFromEnv(e),
		LocalResponseURL:  e.Bool(EnvLocalResponseURL, false),
	}
	return c, e.Err()
}
