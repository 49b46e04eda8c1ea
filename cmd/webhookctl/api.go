package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// openAPI returns the operations API every operator command calls (stats,
// events, dead-letters, replay, expunge, archive run, actions, whoami),
// and its close. A command only renders what the API answers: windows,
// pages, counts and formats are decided there, once for every front end.
//
// From here on, cmd's context carries the operator its actions are
// recorded under (--actor, else $WEBHOOKCTL_ACTOR, else user@host); the
// direct backend records that name, a remote one decides for itself (the
// caller's verified AWS principal).
func openAPI(cmd *cobra.Command) (operations.API, func(), error) {
	return openAPIFor(cmd, operations.AccessAct)
}

// openAPIFor is openAPI with the access asked for: the console's
// --read-only asks for AccessRead, which the direct backend enforces with
// a read-only Service and the remote one by calling the read-only URL
// only. The backend is chosen here, and only here: the stack's operator
// function when --stack, --operator-url or --via-api asks for it (remote.go),
// else the database.
func openAPIFor(cmd *cobra.Command, access operations.Access) (operations.API, func(), error) {
	cmd.SetContext(operations.WithOperator(cmd.Context(), operations.Operator{Name: operatorName(cmd)}))
	r, ok, err := findRemote(cmd)
	if err != nil {
		return nil, nil, err
	}
	if ok {
		api, err := openRemote(r, access == operations.AccessRead)
		return api, func() {}, err
	}
	return openDirect(cmd, access)
}

// openDirect is operations.Service on the database (openOps: this
// machine's settings and credentials, or the running make dev's) and, when
// the archive's settings are given, its bucket: what the operator's own
// rights allow, every action allowed unless access is AccessRead.
func openDirect(cmd *cobra.Command, access operations.Access) (operations.API, func(), error) {
	o, svc, err := openDirectOps(cmd, access)
	if err != nil {
		return nil, nil, err
	}
	return svc, o.close, nil
}

// openDirectOps is openDirect with the database it opened: with access
// read, a read-only session (openOpsSession), so that Postgres refuses a
// write whatever the code above the API does.
func openDirectOps(cmd *cobra.Command, access operations.Access) (*ops, *operations.Service, error) {
	o, err := openOpsSession(cmd, access == operations.AccessRead)
	if err != nil {
		return nil, nil, err
	}
	// The operator function's own configuration, read as it reads it:
	// the archive's settings and bucket when ARCHIVE_BUCKET is set,
	// ARCHIVE_MIN_AGE. Its pool is the command's (openOps).
	var (
		cfg operations.Config
		s3  blobstore.Config
	)
	err = settings.ReadAll(o.getenv, settings.Into(&cfg, operations.ConfigFromEnv),
		settings.If(operations.ArchiveConfigured(o.getenv), settings.Into(&s3, blobstore.ConfigFromEnv)))
	if err != nil {
		o.close()
		return nil, nil, err
	}
	cfg.Access = access
	deps := operations.Deps{Store: o.store, Logger: o.logger()}
	if o.getenv(source.EnvSources) != "" || o.getenv(source.EnvSourcesFile) != "" {
		// A re-ingest verifies with the sources document as the receiver
		// reads it, read again at each re-ingest (the console runs long).
		getenv := o.getenv
		deps.Sources = func(context.Context) (*source.Set, error) { return source.Load(getenv) }
	}
	if cfg.Archive != nil {
		if deps.Blobs, err = blobstore.Open(cmd.Context(), s3); err != nil {
			o.close()
			return nil, nil, err
		}
	}
	svc, err := operations.New(cfg, deps)
	if err != nil {
		o.close()
		return nil, nil, err
	}
	return o, svc, nil
}

// operatorName is who cmd's actions are recorded as: its --actor when it
// has one and it is given, else $WEBHOOKCTL_ACTOR, else the operating
// system's user at this host.
func operatorName(cmd *cobra.Command) string {
	var a actorFlags
	if f := cmd.Flags().Lookup("actor"); f != nil {
		a.actor = f.Value.String()
	}
	return a.name(envOf(cmd))
}
