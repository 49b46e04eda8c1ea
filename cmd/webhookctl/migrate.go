package main

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/dbschema"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply (up) or list (status) the schema migrations (DATABASE_URL or DATABASE_SECRET_ARN)",
	}
	up := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration, the core's and the handler packages'",
		Long: `Apply every pending migration, the core tables' and each handler package's
own, as the user the database settings name (the tables' owner). The
deployed stack does this at each deploy (its migration function, which also
sets up the functions' database roles and their grants); this command is
for a database the stack does not manage, or a migration applied ahead of
a deploy.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pool, err := openDatabase(cmd)
			if err != nil {
				return err
			}
			defer pool.Close()
			v, err := dbschema.Migrate(cmd.Context(), pool, handlers.Schemas)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schema at version %s\n", v)
			return nil
		},
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "List the migrations and whether each is applied",
		RunE: func(cmd *cobra.Command, _ []string) error {
			pool, err := openDatabase(cmd)
			if err != nil {
				return err
			}
			defer pool.Close()
			st, err := migrate.Status(cmd.Context(), pool)
			if err != nil {
				return err
			}
			for _, s := range st {
				state := "pending"
				if s.Applied {
					state = "applied"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%5d  %-8s %s\n", s.Version, state, s.Source)
			}
			return nil
		},
	}
	cmd.AddCommand(up, status)
	return cmd
}

// openDatabase opens the database the way the operator commands do
// (DATABASE_URL or the functions' secret settings).
func openDatabase(cmd *cobra.Command) (*pgxpool.Pool, error) {
	if remoteAsked(cmd) {
		return nil, errors.New("migrate talks to the database as its owner, never through an operator API: a stack migrates itself at every deploy (its migration function's log says what it applied)")
	}
	o, err := openOps(cmd)
	if err != nil {
		return nil, err
	}
	return o.store.Pool(), nil
}
