package main

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack"
)

func newDevCmd() *cobra.Command {
	var o devstack.Options
	emf, _ := strconv.ParseBool(os.Getenv(devstack.EnvEMF))
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the local stack: Postgres, S3, the receiver on http://127.0.0.1:3000, the processor and the archiver",
		Long: `dev runs webhook-inbox on this machine, in one process, with the
configuration the Lambdas read from the same variables (every one of
them is honoured):

  - PostgreSQL: DATABASE_URL when set; otherwise a cluster started from the
    machine's own binaries with its data under --data (kept between runs);
  - the migrations and the functions' database roles, as the migration
    function applies them, as the database's owner; then each component
    connects as its deployed role (webhook_receiver, webhook_processor,
    webhook_archiver, webhook_operator and webhook_operator_read), with
    its deployed grants and a local password kept in .local/roles.json,
    so that a missing grant fails here as it would deployed. Roles belong
    to the whole server: on a DATABASE_URL server make dev creates or
    updates them there. --as-owner (or WEBHOOKDEV_AS_OWNER=true) connects
    every component as the owner instead;
  - the receiver on --addr, with the sources of WEBHOOK_SOURCES /
    WEBHOOK_SOURCES_FILE (default dev/sources.json, whose secrets are fake);
  - the processor, with the handlers of shared/handlers: the deployed
    function's invocations back to back (each polls every
    PROCESSOR_POLL_INTERVAL, default 200ms, for PROCESSOR_RUN_FOR), since
    there is no Lambda to wake here;
  - S3: S3_ENDPOINT when set; otherwise a local versitygw (pinned in
    tools/go.mod) with its objects under --s3-data; and the archiver every
    --archive-every, archiving events processed more than --archive-age
    (else ARCHIVE_MIN_AGE, else 1m: short, to see it happen) ago into
    ARCHIVE_BUCKET (default webhook-inbox-dev).

For sam local (Docker), it writes .local/env.json, which points the
functions' containers at this stack's database and S3, relays their
loopback-only ports to Docker's bridge on Linux, and prints the
sam local command to run.

The log is written for a person (time, level, message, key=value) without
EMF records; --emf (or WEBHOOKDEV_EMF=true) logs as the Lambdas do. While
it runs, .local/devstack.json tells webhookctl where the stack is, so
"go run ./cmd/webhookctl stats" needs no settings.

Ctrl-C stops everything.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return devstack.Run(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringVar(&o.Addr, "addr", "127.0.0.1:3000", "listen address (the README's sam local start-api uses port 3001)")
	cmd.Flags().StringVar(&o.DataDir, "data", filepath.Join(".local", "postgres"), "folder of the local PostgreSQL cluster when DATABASE_URL is not set")
	cmd.Flags().StringVar(&o.S3Dir, "s3-data", filepath.Join(".local", "s3"), "folder of the local S3 server's buckets when S3_ENDPOINT is not set")
	cmd.Flags().DurationVar(&o.ArchiveAge, "archive-age", 0, "archive events processed longer ago than this (default ARCHIVE_MIN_AGE, else 1m)")
	cmd.Flags().DurationVar(&o.ArchiveEvery, "archive-every", devstack.DefaultArchiveEvery, "time between archiver runs")
	cmd.Flags().BoolVar(&o.AsOwner, "as-owner", false, "connect every component as the database's owner, not as its deployed role (default "+devstack.EnvAsOwner+")")
	cmd.Flags().BoolVar(&o.EMF, "emf", emf, "log as the Lambdas do: JSON lines with EMF metrics (default "+devstack.EnvEMF+")")
	return cmd
}
