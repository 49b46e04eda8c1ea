package main

import (
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack"
)

func newLocalCmd() *cobra.Command {
	var o devstack.LocalOptions
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run the real Lambda binaries under the Lambda Runtime Interface Emulator, as template.yaml describes them",
		Long: `local is sam local without Docker: it builds the bootstrap binaries with
the Makefile targets sam build calls (for this machine's architecture),
runs the migration function first as CloudFormation would (the schema, and
the functions' database roles with passwords from local stand-ins of their
secrets), then each function under the AWS Lambda Runtime Interface
Emulator pinned in tools/go.mod, connected as its own role, serves the
template's HTTP API routes on --addr (turning requests into API Gateway v2
events), and fires the template's schedules (at most every
--schedule-every, so the hourly archiver shows up). It uses the same local
Postgres and S3 as make dev.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return devstack.RunLocal(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringVar(&o.Addr, "addr", "127.0.0.1:3000", "listen address of the local API")
	cmd.Flags().StringVar(&o.DataDir, "data", filepath.Join(".local", "postgres"), "folder of the local PostgreSQL cluster when DATABASE_URL is not set")
	cmd.Flags().StringVar(&o.S3Dir, "s3-data", filepath.Join(".local", "s3"), "folder of the local S3 server's buckets")
	cmd.Flags().DurationVar(&o.ArchiveAge, "archive-age", devstack.ArchiveAge, "ARCHIVE_MIN_AGE given to the archiver")
	cmd.Flags().DurationVar(&o.Every, "schedule-every", 15*time.Second, "fire each schedule at least this often (0: the template's rates)")
	return cmd
}
