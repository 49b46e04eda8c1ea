// Package checkout is what the command-line tools know about a developer's
// checkout: the checked-in sources document of make dev (dev/sources.json),
// used when no sources document is configured, and the file in which a
// running make dev describes itself (.local/devstack.json), so the
// operator's commands find its database without being told. It is light
// on purpose, so the operator's webhookctl can use it without linking the
// dev stack.
package checkout

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// SourcesFile is the dev stack's sources document, relative to the
// repository root; its secrets are fake.
var SourcesFile = filepath.Join("dev", "sources.json")

// Sources loads the sources document with getenv (WEBHOOK_SOURCES or
// WEBHOOK_SOURCES_FILE), defaulting to SourcesFile, and says where it came
// from.
func Sources(getenv func(string) string) (*source.Set, string, error) {
	where := getenv(source.EnvSourcesFile)
	if getenv(source.EnvSources) != "" {
		where = source.EnvSources
	} else if where == "" {
		where = SourcesFile
		base := getenv
		getenv = func(k string) string {
			if k == source.EnvSourcesFile {
				return where
			}
			return base(k)
		}
	}
	set, err := source.Load(getenv)
	return set, where, err
}

// LoadSources is Sources with WEBHOOK_SOURCES_SECRET_ARN resolved as the
// receiver resolves it, so an operator checks or signs with the deployed
// document.
func LoadSources(ctx context.Context, getenv func(string) string) (*source.Set, string, error) {
	resolved, _, err := secrets.Environment(ctx, getenv)
	if err != nil {
		return nil, "", err
	}
	set, where, err := Sources(resolved)
	if where == source.EnvSources && getenv(source.EnvSources) == "" {
		where = secrets.EnvSourcesSecretARN // the overlay filled it in
	}
	return set, where, err
}

// FakeSecrets reports whether a sources document loaded from where (as
// Sources and LoadSources say) is the repository's dev/sources.json, whose
// secrets are fake: a signed sample of it endangers nothing.
func FakeSecrets(where string) bool {
	return where == SourcesFile || filepath.Clean(where) == SourcesFile
}

// LookupSource is LoadSources and the source named name in it, or an error
// that lists the configured names.
func LookupSource(ctx context.Context, getenv func(string) string, name string) (*source.Source, error) {
	sources, _, err := LoadSources(ctx, getenv)
	if err != nil {
		return nil, err
	}
	src, ok := sources.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("no source named %q (configured: %v)", name, sources.Names())
	}
	return src, nil
}
