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
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/localpg"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/sender"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// devDatabase is the database the dev stack creates on its local cluster.
const devDatabase = "webhook_inbox"

func newDevCmd() *cobra.Command {
	var addr, dataDir string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the local stack: Postgres, migrations and the receiver on http://127.0.0.1:3000",
		Long: `dev runs webhook-inbox on this machine. It uses DATABASE_URL when set;
otherwise it starts a PostgreSQL cluster from the machine's own binaries with
its data under --data (kept between runs). It applies the migrations and serves
the receiver on --addr with the sources of WEBHOOK_SOURCES / WEBHOOK_SOURCES_FILE
(default dev/sources.json, whose secrets are fake). Ctrl-C stops everything.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(cmd.Context(), cmd.OutOrStdout(), addr, dataDir)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:3000", "listen address (sam local start-api uses port 3000 too)")
	cmd.Flags().StringVar(&dataDir, "data", filepath.Join(".local", "postgres"), "folder of the local PostgreSQL cluster when DATABASE_URL is not set")
	return cmd
}

// devSources loads the sources, defaulting to the checked-in dev file.
func devSources() (*source.Set, string, error) {
	getenv := os.Getenv
	where := os.Getenv(source.EnvSourcesFile)
	if os.Getenv(source.EnvSources) != "" {
		where = source.EnvSources
	} else if where == "" {
		where = filepath.Join("dev", "sources.json")
		getenv = func(k string) string {
			if k == source.EnvSourcesFile {
				return where
			}
			return os.Getenv(k)
		}
	}
	set, err := source.Load(getenv)
	return set, where, err
}

// devDatabaseURL returns DATABASE_URL, or starts the local cluster and makes
// sure the dev database exists on it. stop shuts the cluster down.
func devDatabaseURL(ctx context.Context, out io.Writer, dataDir string) (url string, stop func(), err error) {
	if u := os.Getenv(settings.EnvDatabaseURL); u != "" {
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

func runDev(ctx context.Context, out io.Writer, addr, dataDir string) error {
	level, err := settings.LogLevel(os.Getenv)
	if err != nil {
		return err
	}
	log := settings.Logger(level)
	sources, where, err := devSources()
	if err != nil {
		return err
	}
	url, stopDB, err := devDatabaseURL(ctx, out, dataDir)
	if err != nil {
		return err
	}
	defer stopDB()
	pool, err := storage.OpenPool(ctx, url, storage.PoolOptions{ApplicationName: "webhook-inbox-dev"})
	if err != nil {
		return err
	}
	defer pool.Close()
	version, err := storage.Migrate(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "schema: migrated to version %d\n", version)
	h, err := receiver.New(receiver.Config{Sources: sources, Store: storage.New(pool), Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "receiver: %s/webhooks/{source}   sources (%s): %v\n", base, where, sources.Names())
	printSamples(out, sources, base)
	fmt.Fprintln(out, "Ctrl-C stops the stack.")

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Fprintln(out, "stopped.")
	return nil
}

// printSamples prints, per source, a curl that posts a correctly signed new
// event. Signatures carry a timestamp: the commands work for the source's
// tolerance (5 minutes by default); `webhookctl sample` prints fresh ones.
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
		fmt.Fprintf(out, "\n# a signed sample %s event (%s; `go run ./cmd/webhookctl sample %s` prints a fresh one):\n%s\n", src.Kind, validity, name, req.Curl(base))
	}
	fmt.Fprintln(out)
}
