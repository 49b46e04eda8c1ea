package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/devenv"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localpg"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdahttp"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// devDatabase is the database the dev stack creates on its local cluster.
const devDatabase = "webhook_inbox"

// devOptions are the dev stack's flags.
type devOptions struct {
	addr, dataDir, s3Dir string
	archiveAge           time.Duration
	archiveEvery         time.Duration
}

func newDevCmd() *cobra.Command {
	var o devOptions
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the local stack: Postgres, S3, the receiver on http://127.0.0.1:3000, the processor and the archiver",
		Long: `dev runs webhook-inbox on this machine, in one process:

  - PostgreSQL: DATABASE_URL when set; otherwise a cluster started from the
    machine's own binaries with its data under --data (kept between runs);
  - the migrations;
  - the receiver on --addr, with the sources of WEBHOOK_SOURCES /
    WEBHOOK_SOURCES_FILE (default dev/sources.json, whose secrets are fake);
  - the processor, draining every PROCESSOR_INTERVAL (default 3s) with the
    handlers of shared/handlers, exactly as the Lambda does;
  - a local S3 (versitygw, pinned in tools/go.mod) with its objects under
    --s3-data, and the archiver every --archive-every, archiving events
    processed more than --archive-age ago (short, to see it happen).

Ctrl-C stops everything.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringVar(&o.addr, "addr", "127.0.0.1:3000", "listen address (sam local start-api uses port 3000 too)")
	cmd.Flags().StringVar(&o.dataDir, "data", filepath.Join(".local", "postgres"), "folder of the local PostgreSQL cluster when DATABASE_URL is not set")
	cmd.Flags().StringVar(&o.s3Dir, "s3-data", filepath.Join(".local", "s3"), "folder of the local S3 server's buckets")
	cmd.Flags().DurationVar(&o.archiveAge, "archive-age", time.Minute, "archive events processed longer ago than this")
	cmd.Flags().DurationVar(&o.archiveEvery, "archive-every", 30*time.Second, "time between archiver runs")
	return cmd
}

// devDatabaseURL returns DATABASE_URL, or starts the local cluster and makes
// sure the dev database exists on it. stop shuts the cluster down.
func devDatabaseURL(ctx context.Context, out io.Writer, dataDir string) (url string, stop func(), err error) {
	if u := os.Getenv(storage.EnvDatabaseURL); u != "" {
		fmt.Fprintln(out, "database: DATABASE_URL")
		return u, func() {}, nil
	}
	fmt.Fprintf(out, "database: starting local PostgreSQL in %s ...\n", dataDir)
	cluster, err := localpg.Start(ctx, localpg.Options{Dir: dataDir})
	if err != nil {
		return "", nil, err
	}
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cluster.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "stopping PostgreSQL:", err)
		}
	}
	conn, err := pgx.Connect(ctx, cluster.URL("postgres"))
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("connect to the local cluster: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, devDatabase).Scan(&exists); err != nil {
		stop()
		return "", nil, err
	}
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE DATABASE `+devDatabase); err != nil {
			stop()
			return "", nil, fmt.Errorf("create the dev database: %w", err)
		}
	}
	fmt.Fprintf(out, "database: %s (psql %q)\n", cluster.URL(devDatabase), cluster.URL(devDatabase))
	return cluster.URL(devDatabase), stop, nil
}

func runDev(ctx context.Context, out io.Writer, o devOptions) error {
	level, err := settings.LogLevel(os.Getenv)
	if err != nil {
		return err
	}
	log := settings.Logger(level)
	sources, where, err := devenv.Sources(os.Getenv)
	if err != nil {
		return err
	}
	url, stopDB, err := devDatabaseURL(ctx, out, o.dataDir)
	if err != nil {
		return err
	}
	defer stopDB()
	// The functions' own configuration loaders read the dev database from
	// here, so the dev stack runs with the settings the Lambdas would.
	getenv := func(k string) string {
		if k == storage.EnvDatabaseURL {
			return url
		}
		return os.Getenv(k)
	}
	pcfg, err := processor.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	pool, err := pcfg.Database.Open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	version, err := migrate.Up(ctx, pool)
	if err != nil {
		return err
	}
	if err := handlers.Migrate(ctx, pool); err != nil {
		return err
	}
	fmt.Fprintf(out, "schema: migrated to version %d (and the handlers' tables)\n", version)
	store := storage.New(pool)

	// The processor, as the Lambda builds it.
	reg := processor.NewRegistry()
	handlers.Register(reg)
	pc := pcfg
	pc.Pool, pc.Registry, pc.Logger, pc.Metrics = pool, reg, log, nil
	proc, err := processor.New(pc)
	if err != nil {
		return err
	}

	// Local S3 and the archiver.
	fmt.Fprintf(out, "s3: starting versitygw in %s ...\n", o.s3Dir)
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
	arch, err := archive.New(archive.Config{Store: store, Blobs: blobs, Prefix: "archive", MinAge: o.archiveAge, Logger: log})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "s3: %s bucket %q (access key %s)\n", s3.Endpoint(), devBucket, locals3.AccessKeyID)

	h, err := receiver.New(receiver.Config{Sources: sources, Store: store, Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.addr, err)
	}
	// A panic is answered as in Lambda: the receiver's 503, cause internal.
	srv := &http.Server{Handler: lambdahttp.Recover(h, h), ReadHeaderTimeout: 10 * time.Second}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "receiver: %s/webhooks/{source}   sources (%s): %v\n", base, where, sources.Names())
	fmt.Fprintf(out, "processor: draining every %s; archiver: every %s, events processed over %s ago\n", pcfg.Interval, o.archiveEvery, o.archiveAge)
	printSamples(out, sources, base)
	fmt.Fprintln(out, "Ctrl-C stops the stack.")

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	wg.Go(func() { errc <- srv.Serve(ln) })
	wg.Go(func() {
		if err := proc.RunEvery(runCtx, pcfg.Interval); err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("processor: %w", err)
		}
	})
	wg.Go(func() {
		if err := arch.RunEvery(runCtx, o.archiveEvery); err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("archiver: %w", err)
		}
	})
	var runErr error
	select {
	case runErr = <-errc:
	case <-ctx.Done():
	}
	stopRun()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) && runErr == nil {
		runErr = err
	}
	wg.Wait()
	if errors.Is(runErr, http.ErrServerClosed) {
		runErr = nil
	}
	fmt.Fprintln(out, "stopped.")
	return runErr
}

// devBucket is the local S3 bucket of the dev stack's archive.
const devBucket = "webhook-inbox-dev"

// printSamples prints, per source, a curl that posts a correctly signed new
// event. Signatures carry a timestamp: the commands work for the source's
// tolerance (5 minutes by default); `webhookdev sample` prints fresh ones.
func printSamples(out io.Writer, sources *source.Set, base string) {
	now := time.Now()
	for _, name := range sources.Names() {
		src, _ := sources.Lookup(name)
		req, err := sender.Sample(src, now)
		if err != nil {
			continue
		}
		validity := "its signature carries no timestamp, so it stays valid"
		if src.Tolerance() > 0 {
			validity = "valid for the source's tolerance, 5 minutes by default"
		}
		fmt.Fprintf(out, "\n# a signed sample %s event (%s; `go run ./cmd/webhookdev sample %s` prints a fresh one):\n%s\n", src.Kind, validity, name, req.Curl(base))
	}
	fmt.Fprintln(out)
}
