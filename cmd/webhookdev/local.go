package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/devenv"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/devtools"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

func newLocalCmd() *cobra.Command {
	var o devOptions
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run the real Lambda binaries under the Lambda Runtime Interface Emulator, as template.yaml describes them",
		Long: `local is sam local without Docker: it builds the three bootstrap binaries
with the Makefile targets sam build calls (for this machine's architecture),
runs each under the AWS Lambda Runtime Interface Emulator pinned in
tools/go.mod, serves the template's HTTP API routes on --addr (turning
requests into API Gateway v2 events), and fires the template's schedules
(at most every --schedule-every, so the hourly archiver shows up). It uses
the same local Postgres and S3 as make dev.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLocal(cmd.Context(), cmd.OutOrStdout(), o, every)
		},
	}
	cmd.Flags().StringVar(&o.addr, "addr", "127.0.0.1:3000", "listen address of the local API")
	cmd.Flags().StringVar(&o.dataDir, "data", filepath.Join(".local", "postgres"), "folder of the local PostgreSQL cluster when DATABASE_URL is not set")
	cmd.Flags().StringVar(&o.s3Dir, "s3-data", filepath.Join(".local", "s3"), "folder of the local S3 server's buckets")
	cmd.Flags().DurationVar(&o.archiveAge, "archive-age", time.Minute, "ARCHIVE_MIN_AGE given to the archiver")
	cmd.Flags().DurationVar(&every, "schedule-every", 15*time.Second, "fire each schedule at least this often (0: the template's rates)")
	return cmd
}

func runLocal(ctx context.Context, out io.Writer, o devOptions, every time.Duration) error {
	root, err := devtools.RepoRoot()
	if err != nil {
		return err
	}
	tpl, err := samtemplate.Open(filepath.Join(root, "template.yaml"), map[string]any{
		// Required parameters; locally the functions get URLs and files instead.
		"DatabaseSecretArn": "arn:aws:secretsmanager:us-east-1:000000000000:secret:local",
		"SourcesSecretArn":  "arn:aws:secretsmanager:us-east-1:000000000000:secret:local",
	})
	if err != nil {
		return err
	}
	url, stopDB, err := devDatabaseURL(ctx, out, o.dataDir)
	if err != nil {
		return err
	}
	defer stopDB()
	pool, err := storage.PoolConfig{URL: url, ApplicationName: "webhookdev-local"}.Open(ctx)
	if err != nil {
		return err
	}
	v, err := migrate.Up(ctx, pool)
	pool.Close()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "schema: migrated to version %d\n", v)
	s3, err := locals3.Start(ctx, locals3.Options{Dir: o.s3Dir})
	if err != nil {
		return err
	}
	defer s3.Close()
	blobs, err := blobstore.Open(ctx, s3.BlobConfig(devBucket))
	if err != nil {
		return err
	}
	if err := blobs.CreateBucket(ctx); err != nil {
		return err
	}
	sourcesFile := os.Getenv("WEBHOOK_SOURCES_FILE")
	if sourcesFile == "" {
		sourcesFile = filepath.Join(root, "dev", "sources.json")
	}
	if sourcesFile, err = filepath.Abs(sourcesFile); err != nil {
		return err
	}
	fmt.Fprintln(out, "lambda: building the bootstraps (make build-<Function>) and starting the runtime emulators ...")
	dir := filepath.Join(root, ".local", "lambda")
	stack, err := lambdalocal.StartStack(ctx, lambdalocal.StackOptions{
		Template: tpl, RepoRoot: root, Dir: dir,
		Env: map[string][]string{
			"*":                {"DATABASE_URL=" + url, "LOG_LEVEL=info"},
			"ReceiverFunction": {"WEBHOOK_SOURCES_FILE=" + sourcesFile},
			"ArchiverFunction": {
				"ARCHIVE_BUCKET=" + devBucket, "ARCHIVE_MIN_AGE=" + o.archiveAge.String(),
				"S3_ENDPOINT=" + s3.Endpoint(), "S3_ACCESS_KEY_ID=" + locals3.AccessKeyID,
				"S3_SECRET_ACCESS_KEY=" + locals3.SecretAccessKey, "AWS_REGION=" + locals3.Region,
			},
		},
		Logger: settings.Logger(0),
	})
	if err != nil {
		return err
	}
	defer stack.Close()
	ids := make([]string, 0, len(stack.Functions))
	for id := range stack.Functions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(out, "lambda: %s running; its output: %s\n", id, stack.Functions[id].LogPath())
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.addr, err)
	}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "api: %s/webhooks/{source} -> ReceiverFunction\n", base)
	sources, _, err := devenv.Sources(os.Getenv)
	if err == nil {
		printSamples(out, sources, base)
	}
	fmt.Fprintln(out, "Ctrl-C stops everything.")
	go func() { _ = stack.RunSchedules(ctx, every, settings.Logger(0)) }()
	err = stack.Serve(ctx, ln)
	for id, d := range stack.InitDurations() {
		fmt.Fprintf(out, "lambda: %s init duration %v\n", id, d)
	}
	return err
}
