package main

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply (up) or list (status) the schema migrations (DATABASE_URL or DATABASE_SECRET_ARN)",
	}
	up := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration",
		RunE: func(cmd *cobra.Command, _ []string) error {
			pool, err := openDatabase(cmd)
			if err != nil {
				return err
			}
			defer pool.Close()
			v, err := migrate.Up(cmd.Context(), pool)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schema at version %d\n", v)
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
	o, err := openOps(cmd)
	if err != nil {
		return nil, err
	}
	return o.store.Pool(), nil
}
