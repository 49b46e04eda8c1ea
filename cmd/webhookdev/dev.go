package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/pinnedtools"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/watch"
)

func newDevCmd() *cobra.Command {
	var o devstack.Options
	var replay, watching bool
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

With --watch (what make dev runs), a supervisor polls the module's files
and, when one changes, rebuilds webhookdev into .local/bin and restarts
the stack with the new code; the database keeps its data and its port.
Code that does not compile is printed and the running stack stays.

At start-up it says how many events wait to be processed (received while
it was down: the processor drains them), and replays the events that were
processed without a handler (outcome unhandled) whose route has a handler
now, in one line; --replay-unhandled=false prints the command instead.

It prints one "webhookdev send" line per source, with the kind's sample
event file (dev/samples/<kind>.json); --samples prints a signed curl per
source instead, as "webhookdev sample SOURCE" does at any time.

Ctrl-C stops everything.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if watching {
				return runWatching(cmd)
			}
			o.KeepUnhandled = !replay
			return devstack.Run(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringVar(&o.Addr, "addr", "127.0.0.1:3000", "listen address (the README's sam local start-api uses port 3001)")
	cmd.Flags().StringVar(&o.DataDir, "data", filepath.Join(".local", "postgres"), "folder of the local PostgreSQL cluster when DATABASE_URL is not set")
	cmd.Flags().StringVar(&o.S3Dir, "s3-data", filepath.Join(".local", "s3"), "folder of the local S3 server's buckets when S3_ENDPOINT is not set")
	cmd.Flags().DurationVar(&o.ArchiveAge, "archive-age", 0, "archive events processed longer ago than this (default ARCHIVE_MIN_AGE, else 1m)")
	cmd.Flags().DurationVar(&o.ArchiveEvery, "archive-every", devstack.DefaultArchiveEvery, "time between archiver runs")
	cmd.Flags().BoolVar(&watching, "watch", false, "rebuild and restart the stack when a .go or .sql file of the module, go.mod or dev/sources.json changes (what make dev runs); a build that fails leaves the running stack until the code compiles")
	cmd.Flags().BoolVar(&o.Samples, "samples", false, "print a curl with a freshly signed sample event per source at start-up (default: one `webhookdev send` line per source)")
	cmd.Flags().BoolVar(&replay, "replay-unhandled", true, "at start-up, replay the events processed without a handler whose (source or kind, type) has one now; false prints the command instead")
	cmd.Flags().BoolVar(&o.AsOwner, "as-owner", false, "connect every component as the database's owner, not as its deployed role (default "+devstack.EnvAsOwner+")")
	cmd.Flags().DurationVar(&o.Timeouts.Read, "read-timeout", devstack.DefaultReadTimeout, "close a connection whose request (headers and body) is not read within this; its headers within the shorter of this and "+devstack.DefaultReadHeaderTimeout.String())
	cmd.Flags().DurationVar(&o.Timeouts.Idle, "idle-timeout", devstack.DefaultIdleTimeout, "close a kept-alive connection idle for this long")
	cmd.Flags().BoolVar(&o.EMF, "emf", emf, "log as the Lambdas do: JSON lines with EMF metrics (default "+devstack.EnvEMF+")")
	return cmd
}

// runWatching is dev --watch: the stack runs as a child, built from the
// checkout into .local/bin, with the same flags but --watch, and is
// replaced by a new build whenever the code changes.
func runWatching(cmd *cobra.Command) error {
	root, err := pinnedtools.RepoRoot()
	if err != nil {
		return fmt.Errorf("--watch rebuilds the checkout: %w", err)
	}
	c := &watch.Command{
		Dir: root, Package: "./cmd/webhookdev", Binary: filepath.Join(root, ".local", "bin", "webhookdev"),
		Args: childArgs(cmd.Flags()), Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(),
	}
	s := &watch.Supervisor{
		// Not dev/sources.json: the receiver reads it again every couple
		// of seconds, so a source added there is served without a restart
		// (devstack.SourcesRefresh), and a bad edit leaves the stack up.
		Files: watch.Files{Root: root},
		Build: c.Build, Start: c.Start, Out: cmd.ErrOrStderr(),
	}
	return s.Run(cmd.Context())
}

// childArgs is "dev" and the flags given to this command, but --watch.
func childArgs(flags *pflag.FlagSet) []string {
	args := []string{"dev"}
	flags.Visit(func(f *pflag.Flag) {
		if f.Name != "watch" {
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	return args
}
