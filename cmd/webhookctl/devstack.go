package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// stackDirKey carries the folder where the search for a running make dev
// starts; tests point it away from the checkout, whose own make dev may be
// running.
type stackDirKey struct{}

// withStackDir returns ctx whose commands look for a dev stack from dir.
func withStackDir(ctx context.Context, dir string) context.Context {
	return context.WithValue(ctx, stackDirKey{}, dir)
}

// useDevStack makes a command with no database settings talk to the make
// dev running in this checkout: when none of DATABASE_URL,
// DATABASE_SECRET_ARN and DATABASE_HOST is set, it looks for
// .local/devstack.json here or in a parent folder, and when the stack
// that wrote it is alive, the
// command's environment is the stack's (its local database's port is
// random), with one line on standard error saying so. Explicit settings
// always win: the file is not even read.
func useDevStack(cmd *cobra.Command) error {
	getenv := envOf(cmd)
	if secrets.DatabaseConfigured(getenv) {
		return nil
	}
	dir, _ := cmd.Context().Value(stackDirKey{}).(string)
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return nil
		}
	}
	st, path, ok, err := checkout.FindStack(dir)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "webhookctl: ignoring the make dev stack file: %v\n", err)
		return nil
	}
	if !ok {
		return nil
	}
	cmd.SetContext(withEnv(cmd.Context(), st.Overlay(getenv)))
	db := storage.RedactURL(st.Env[storage.EnvDatabaseURL])
	if st.Env[storage.EnvDatabaseURL] == "" {
		switch {
		case st.Env[secrets.EnvDatabaseSecretARN] != "":
			db = "the secret " + st.Env[secrets.EnvDatabaseSecretARN]
		case st.Env[secrets.EnvDatabaseHost] != "":
			db = st.Env[secrets.EnvDatabaseHost] + " (IAM authentication)"
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "webhookctl: using database %s of the running make dev (pid %d, from %s)\n", db, st.PID, path)
	return nil
}
