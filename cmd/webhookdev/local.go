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
		Long: `local is sam local without Docker, wired as the stack is deployed: it
builds the bootstrap binaries with the Makefile targets sam build calls
(for this machine's architecture), then deploys template.yaml (--profile)
on local stand-ins of the AWS services as CloudFormation would: the
buckets on a local S3 (versitygw) whose notifications feed a local
EventBridge, the secrets in a local Secrets Manager, a local EventBridge
Scheduler and a local Lambda Invoke API; every function under the AWS
Lambda Runtime Interface Emulator pinned in tools/go.mod; the relay's
copy of the sources document (SourcesCopy) and the migration front's
schema and roles (DatabaseSchema, the migration function applying them),
each function connected as its own role. It serves the template's HTTP
API routes on --addr (turning requests into API Gateway v2 events) and
the operator function's URLs. Nothing runs on a clock: the receiver wakes
the processor after each stored webhook (an asynchronous invoke; in the
economy profile an S3 marker and an EventBridge rule), later wake-ups
(retries, the sweep, the archiver's hour) are markers the relay turns
into one-time schedules, fired when due. webhookctl archive run, through
the acting operator function, archives at once. It uses the same local
Postgres and S3 folder as make dev.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return devstack.RunLocal(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringVar(&o.Addr, "addr", "127.0.0.1:3000", "listen address of the local API")
	cmd.Flags().StringVar(&o.DataDir, "data", filepath.Join(".local", "postgres"), "folder of the local PostgreSQL cluster when DATABASE_URL is not set")
	cmd.Flags().StringVar(&o.S3Dir, "s3-data", filepath.Join(".local", "s3"), "folder of the local S3 server's buckets")
	cmd.Flags().DurationVar(&o.ArchiveAge, "archive-age", devstack.ArchiveAge, "ARCHIVE_MIN_AGE given to the archiver")
	cmd.Flags().StringVar(&o.Profile, "profile", "standard", "the template's Profile: standard or high-volume (the receiver invokes the processor) or economy (an S3 marker and an EventBridge rule)")
	cmd.Flags().DurationVar(&o.FireEvery, "fire-every", time.Second, "how often the local EventBridge Scheduler fires the wake-up schedules that are due")
	return cmd
}
