package main

import (
	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/schemadump"
)

func newSchemaCmd() *cobra.Command {
	var write bool
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Dump the core tables as the migrations leave them; fail when shared/storage/schema.sql differs",
		Long: `schema applies shared/storage/migrate/migrations to a throwaway PostgreSQL
cluster (the machine's server binaries, as make dev uses them), dumps the
result with pg_dump --schema-only and compares it with the checked-in
shared/storage/schema.sql, failing when they differ (make generate-check);
-w rewrites the file instead (make generate). Run it from the repository's
root.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := schemadump.GenerateLocal(cmd.Context())
			if err != nil {
				return err
			}
			if write {
				return schemadump.Write(".", b)
			}
			return schemadump.Check(".", b)
		},
	}
	cmd.Flags().BoolVarP(&write, "write", "w", false, "rewrite shared/storage/schema.sql instead of comparing")
	return cmd
}
