// Package devstack runs the whole system on one machine, in one process:
// PostgreSQL, an S3 server, the receiver on a local port, the processor and
// the archiver (Run, what `make dev` runs), or the real Lambda binaries
// under the Runtime Interface Emulator (RunLocal, `make local`).
//
// Run builds every component as its Lambda does, through the components'
// ConfigFromEnv (ConfigsFromEnv), so make dev honours every variable the
// Lambdas read; it only fills in what makes sense locally and writes its
// log for a person. The packages below it are its parts: localpg and
// locals3 start the servers, lambdalocal and samtemplate run the Lambda
// binaries, samlocal points `sam local` at the running stack, pinnedtools
// finds the pinned tools.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/iamlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localpg"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/operatorlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/pinnedtools"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/readable"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samlocal"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/dbschema"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdahttp"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// EnvEMF, when true, makes the dev stack log as the Lambdas do (JSON lines
// with EMF records), like the --emf flag.
const EnvEMF = "WEBHOOKDEV_EMF"

// DefaultArchiveEvery is the time between the dev stack's archiver passes.
const DefaultArchiveEvery = 30 * time.Second

// ProcessorSchedule is how often the dev stack drains when
// PROCESSOR_RUN_FOR=0 (each invocation one drain). Otherwise it runs the
// deployed function's invocations back to back: the deployed processor
// runs only when woken (shared/wake) and lingers PROCESSOR_RUN_FOR, and
// the dev stack, with no Lambda to wake, keeps one lingering all the time.
const ProcessorSchedule = time.Minute

// Options are the dev stack's flags.
type Options struct {
	// Addr is the receiver's listen address.
	Addr string
	// DataDir holds the local PostgreSQL cluster (when DATABASE_URL is not
	// set) and S3Dir the local S3 server's buckets (when S3_ENDPOINT is
	// not set); both are kept between runs.
	DataDir, S3Dir string
	// ArchiveAge is --archive-age; 0 when not given (see Local.ArchiveAge).
	ArchiveAge time.Duration
	// ArchiveEvery is the time between archiver passes; 0 means
	// DefaultArchiveEvery.
	ArchiveEvery time.Duration
	// EMF logs as the Lambdas do: JSON lines and EMF records.
	EMF bool
	// StackFile is where the running stack describes itself for the
	// operator's commands; "" means checkout.StackFile under the repository
	// root. It is removed when the stack stops.
	StackFile string
	// SamEnvFile is where the stack writes env.json for `sam local`
	// (samlocal.Env); "" means samlocal.EnvFile under the repository root.
	// It is removed when the stack stops.
	SamEnvFile string
	// Getenv is the environment; nil means os.Getenv.
	Getenv func(string) string
	// Samples prints, at start-up, a curl with a freshly signed sample
	// for each source (--samples) instead of one compact `webhookdev
	// send` line per source.
	Samples bool
	// KeepUnhandled leaves the events processed without a handler as they
	// are at start-up, printing the command that replays them; by default
	// those whose route now has a handler are replayed (CatchUp).
	KeepUnhandled bool
	// ArchiveLog, when set, also gets every line the archiver logs,
	// before the quiet-idle filter drops its idle passes' (tests count
	// passes with it instead of sleeping).
	ArchiveLog slog.Handler
	// AsOwner connects every component as the database's owner (the
	// DATABASE_URL's user, or the local cluster's superuser), as make dev
	// did before it ran each as its deployed role: for a server where
	// that user may not create roles. --as-owner, or WEBHOOKDEV_AS_OWNER.
	AsOwner bool
	// RolesFile keeps the function roles' local passwords between runs;
	// "" means RolesFile under the repository root.
	RolesFile string
	// Register registers the processor's handlers; nil is
	// handlers.Register, what the processor Lambda runs.
	Register func(*processor.Registry)
	// Schemas are the handler packages' tables to migrate and grant; nil
	// is handlers.Schemas, what the migration function applies.
	Schemas []processor.HandlerSchema
	// Timeouts bound the receiver's and the local operator API's reads
	// (--read-timeout, --idle-timeout); zero fields take the defaults.
	Timeouts Timeouts
}

// Run runs the dev stack until ctx is done, writing what it does, then its
// log, to out.
func Run(ctx context.Context, out io.Writer, o Options) error {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if o.ArchiveEvery <= 0 {
		o.ArchiveEvery = DefaultArchiveEvery
	}
	root, err := pinnedtools.RepoRoot()
	if err != nil {
		root = "."
	}
	if o.StackFile == "" {
		o.StackFile = filepath.Join(root, checkout.StackFile)
	}
	if o.SamEnvFile == "" {
		o.SamEnvFile = filepath.Join(root, samlocal.EnvFile)
	}
	if o.RolesFile == "" {
		o.RolesFile = filepath.Join(root, RolesFile)
	}
	if asOwner, _ := strconv.ParseBool(getenv(EnvAsOwner)); asOwner {
		o.AsOwner = true
	}
	// Secrets named in the environment are resolved as a Lambda resolves
	// them; the stack file keeps the unresolved names (StackEnv).
	resolved, creds, err := secrets.Environment(ctx, getenv)
	if err != nil {
		return err
	}
	local := Local{SourcesFile: filepath.Join(root, checkout.SourcesFile), ArchiveAge: o.ArchiveAge, EMF: o.EMF}

	// Check everything before starting anything, so a typo fails at once;
	// the local servers' addresses are not known yet, so placeholders
	// stand in for them.
	check := local
	check.DatabaseURL, check.S3Endpoint = "postgres://127.0.0.1/"+Database, "http://127.0.0.1"
	cfgs, err := ConfigsFromEnv(resolved, check)
	if err != nil {
		return err
	}
	log := slog.New(readable.NewHandler(out, &slog.HandlerOptions{Level: cfgs.LogLevel}))
	if o.EMF {
		log = settings.JSONLogger(out, cfgs.LogLevel)
	}
	slog.SetDefault(log)

	if cfgs.LocalDatabase {
		url, stop, err := StartDatabase(ctx, out, o.DataDir)
		if err != nil {
			return err
		}
		defer stop()
		local.DatabaseURL = url
	} else {
		fmt.Fprintf(out, "database: %s (DATABASE_URL)\n", storage.RedactURL(resolved(storage.EnvDatabaseURL)))
	}
	if cfgs.LocalS3 {
		fmt.Fprintf(out, "s3: starting versitygw in %s ...\n", o.S3Dir)
		s3, err := locals3.Start(ctx, locals3.Options{
			Dir: o.S3Dir, Region: cfgs.S3.Region,
			AccessKeyID: cfgs.S3.AccessKeyID, SecretAccessKey: cfgs.S3.SecretAccessKey,
		})
		if err != nil {
			return err
		}
		defer s3.Close()
		local.S3Endpoint = s3.Endpoint()
	}
	if cfgs, err = ConfigsFromEnv(resolved, local); err != nil {
		return err
	}
	return run(ctx, out, log, o, cfgs, creds, getenv, resolved, root)
}

// run opens the pools, migrates, builds the components and serves.
func run(ctx context.Context, out io.Writer, log *slog.Logger, o Options, cfgs Configs, creds storage.Credentials, getenv, resolved func(string) string, root string) error {
	// Each component gets the pool its Lambda opens.
	var pools []*pgxpool.Pool
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	// The handlers first, as the processor Lambda does: a route registered
	// twice stops the start with one line naming both registrations,
	// before anything is migrated.
	reg := processor.NewRegistry()
	register := o.Register
	if register == nil {
		register = handlers.Register
	}
	register(reg)
	if err := reg.Err(); err != nil {
		return err
	}

	// The schema, the handlers' tables and the functions' roles, as the
	// database's owner, the one user that migrates: as the migration
	// function applies them at each deploy.
	ownerCfg := cfgs.Database
	ownerCfg.Credentials = creds
	ownerPool, err := ownerCfg.Open(ctx)
	if err != nil {
		return err
	}
	var owner string
	if err := ownerPool.QueryRow(ctx, `SELECT current_user`).Scan(&owner); err != nil {
		ownerPool.Close()
		return fmt.Errorf("database: %w", err)
	}
	passwords, version, err := migrateAndRoles(ctx, ownerPool, o)
	ownerPool.Close()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "schema: migrated to version %s as %s\n", version, owner)
	if o.AsOwner {
		fmt.Fprintf(out, "database roles: none; every component connects as %s (--as-owner: a missing grant does not fail here as it would deployed)\n", owner)
	} else {
		var as []string
		for _, c := range componentRoles {
			as = append(as, c.component+" as "+c.role)
		}
		fmt.Fprintf(out, "database roles: %s, each with its deployed grants (passwords in %s; --as-owner connects all as %s)\n", strings.Join(as, ", "), o.RolesFile, owner)
		if !cfgs.LocalDatabase {
			fmt.Fprintf(out, "database roles: roles belong to the whole server of DATABASE_URL, not to its database: make dev created or updated them there and set their passwords; a stack deployed on the same server would be locked out (give make dev a server of its own, or --as-owner)\n")
		}
	}

	// Each component gets the pool its Lambda opens, as its function's
	// role.
	open := func(c storage.PoolConfig, component, role string) (*pgxpool.Pool, error) {
		c.Credentials = creds
		if !o.AsOwner {
			c.Credentials = roleLogin{role: role, password: passwords[role]}
		}
		pool, err := c.Open(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", component, err)
		}
		pools = append(pools, pool)
		return pool, nil
	}
	procPool, err := open(cfgs.Processor.Pool(cfgs.Database), "processor", migrate.RoleProcessor)
	if err != nil {
		return err
	}

	// The archiver, as the Lambda builds it; the bucket is made if missing.
	blobs, err := blobstore.Open(ctx, cfgs.S3)
	if err != nil {
		return err
	}
	if err := locals3.CreateBucket(ctx, cfgs.S3, false); err != nil {
		return err
	}
	ac := cfgs.Archive
	archPool, err := open(ac.Pool(cfgs.Database), "archiver", migrate.RoleArchiver)
	if err != nil {
		return err
	}
	archLog := log.Handler()
	if o.ArchiveLog != nil {
		archLog = slog.NewMultiHandler(o.ArchiveLog, archLog)
	}
	arch, err := archive.New(ac, archive.Deps{Store: storage.New(archPool), Blobs: blobs, Logger: slog.New(archLog)})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "s3: %s bucket %q (access key %s)\n", cfgs.S3.Endpoint, cfgs.S3.Bucket, cfgs.S3.AccessKeyID)

	// The processor, as the Lambda builds it, reading archived bodies for
	// replays from the same archive.
	deps := processor.Deps{Pool: procPool, Registry: reg, Logger: log}
	if deps.Bodies, err = archive.OpenBodies(ctx, cfgs.S3, procPool); err != nil {
		return err
	}
	proc, err := processor.New(cfgs.Processor, deps)
	if err != nil {
		return err
	}
	// What runs, for the start-up line and the invocations' loop: the
	// settings New applied.
	procCfg := cfgs.Processor.WithDefaults()

	// The receiver, as the Lambda builds it, behind the same recovery.
	rc := cfgs.Receiver
	recvPool, err := open(rc.Pool(cfgs.Database), "receiver", migrate.RoleReceiver)
	if err != nil {
		return err
	}
	// Its sources are read again as the Lambda reads them again: from the
	// sources file (a stand-in's included) or the secret named, so that a
	// source added there is served without a restart.
	readSources, err := secrets.SourcesReader(ctx, func(k string) string {
		if v, ok := cfgs.StandIns[k]; ok {
			return v
		}
		return getenv(k)
	})
	if err != nil {
		return err
	}
	h, err := receiver.New(rc, receiver.Deps{Sources: cfgs.Sources, ReadSources: readSources, Store: storage.New(recvPool), Logger: log, RequestID: lambdahttp.RequestID})
	if err != nil {
		return err
	}
	defer func() { // its queued rejection records, before the pool closes
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = h.Close(ctx)
	}()
	// The operator function, as the template deploys it: read-only and
	// acting, each behind the stand-in for its URL's IAM check.
	opDB := cfgs.Operator.Pool(cfgs.Database)
	opPool, err := open(opDB, "operator API (acting)", migrate.RoleOperator)
	if err != nil {
		return err
	}
	readDB := opDB
	readDB.ApplicationName += "-read" // as pg_stat_activity tells the two apart
	opReadPool, err := open(readDB, "operator API (read-only)", migrate.RoleOperatorRead)
	if err != nil {
		return err
	}
	// A re-ingest verifies with the sources as the receiver reads them
	// again (an inline document never changes).
	currentSources := func(context.Context) (*source.Set, error) { return cfgs.Sources, nil }
	if readSources != nil {
		currentSources = func(ctx context.Context) (*source.Set, error) {
			doc, err := readSources(ctx)
			if err != nil {
				return nil, err
			}
			return source.Parse(doc)
		}
	}
	ops, err := operatorlocal.New(operatorlocal.Config{Store: storage.New(opPool), ReadStore: storage.New(opReadPool), Archive: cfgs.Operator.Archive, Blobs: blobs, Logger: log,
		Sources: currentSources})
	if err != nil {
		return err
	}
	// What waits since the last run: the backlog, drained as the
	// processor starts, and the events that came before their handler.
	// A failure here is said and the stack runs on: it is a convenience.
	if err := CatchUp(ctx, out, storage.New(opPool), reg, !o.KeepUnhandled); err != nil {
		fmt.Fprintf(out, "%v (the stack runs on; webhookctl replay --outcome unhandled does it by hand)\n", err)
	}
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	listen := func(addr string) (net.Listener, error) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		lns = append(lns, l)
		return l, nil
	}
	ln, err := listen(o.Addr)
	if err != nil {
		return err
	}
	// Loopback only, on ports of the system's choosing: webhookctl finds
	// them in the stack file.
	readLn, err := listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	actLn, err := listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	// The receiver's Lambda handler, fed the events API Gateway would
	// send it: a panic is answered as deployed, the receiver's 503, cause
	// internal.
	srv := NewServer(asLambda(h, h), o.Timeouts)
	readSrv := NewServer(ops.Read, o.Timeouts)
	actSrv := NewServer(ops.Act, o.Timeouts)
	base := "http://" + ln.Addr().String()
	opAPI := &checkout.OperatorAPI{
		URL: "http://" + actLn.Addr().String(), ReadURL: "http://" + readLn.Addr().String(), Region: operatorlocal.Region,
		Identities: map[string]checkout.Credentials{"operator": credentials(ops.Operator), "viewer": credentials(ops.Viewer)},
	}

	// The operator's commands find this stack by its file.
	pid := os.Getpid()
	if err := checkout.WriteStack(o.StackFile, checkout.Stack{PID: pid, Env: cfgs.StackEnv(getenv), Operator: opAPI}); err != nil {
		return err
	}
	defer func() {
		if err := checkout.RemoveStack(o.StackFile, pid); err != nil {
			fmt.Fprintln(out, "removing the stack file:", err)
		}
	}()

	rereads := ""
	if readSources != nil && rc.SourcesRefresh > 0 {
		rereads = fmt.Sprintf(", read again every %s", rc.SourcesRefresh)
	}
	fmt.Fprintf(out, "receiver: %s/webhooks/{source}   sources (%s%s): %v\n", base, cfgs.SourcesFrom, rereads, cfgs.Sources.Names())
	fmt.Fprintf(out, "processor: %s; archiver: every %s, events processed over %s ago\n", processorPlan(procCfg), o.ArchiveEvery, ac.MinAge)
	fmt.Fprintf(out, "operator: go run ./cmd/webhookctl stats (it finds this stack through %s)\n", o.StackFile)
	fmt.Fprintf(out, "operator API: %s (acting), %s (read-only), IAM stood in for: go run ./cmd/webhookctl --via-api stats\n", opAPI.URL, opAPI.ReadURL)
	if !o.EMF {
		fmt.Fprintf(out, "log: readable lines, no EMF records (--emf or %s=true logs as the Lambdas do)\n", EnvEMF)
	}
	PrintSamples(out, cfgs.Sources, base, o.Samples)
	defer samLocal(out, root, o.SamEnvFile, cfgs, resolved, passwords)()
	fmt.Fprintln(out, "Ctrl-C stops the stack.")

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var wg sync.WaitGroup
	errc := make(chan error, 5)
	wg.Go(func() { errc <- srv.Serve(ln) })
	wg.Go(func() { errc <- readSrv.Serve(readLn) })
	wg.Go(func() { errc <- actSrv.Serve(actLn) })
	wg.Go(func() {
		// The deployed function's invocations, back to back: runs of
		// PROCESSOR_RUN_FOR, each polling every PROCESSOR_POLL_INTERVAL.
		if err := serveProcessor(runCtx, proc, procCfg, ProcessorSchedule, log); err != nil {
			errc <- err
		}
	})
	wg.Go(func() { archiveEvery(runCtx, arch, o.ArchiveEvery) })
	var runErr error
	select {
	case runErr = <-errc:
	case <-ctx.Done():
	}
	stopRun()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range []*http.Server{srv, readSrv, actSrv} {
		if err := s.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) && runErr == nil {
			runErr = err
		}
	}
	wg.Wait()
	if errors.Is(runErr, http.ErrServerClosed) {
		runErr = nil
	}
	fmt.Fprintln(out, "stopped.")
	return runErr
}

// credentials is what the stack file holds of a local identity.
func credentials(id iamlocal.Identity) checkout.Credentials {
	return checkout.Credentials{AccessKeyID: id.AccessKeyID, SecretAccessKey: id.SecretAccessKey, SessionToken: id.SessionToken, ARN: id.UserARN}
}

// processorPlan says how the processor runs, for the start-up lines.
func processorPlan(c processor.Config) string {
	if c.RunFor <= 0 {
		return fmt.Sprintf("draining every %s (%s=0: one drain per invocation)", ProcessorSchedule, processor.EnvRunFor)
	}
	return fmt.Sprintf("polling every %s in runs of %s back to back (deployed, each run is a woken invocation)", c.PollInterval, c.RunFor)
}

// StartDatabase starts the local cluster in dataDir and makes sure the dev
// database exists on it; stop shuts the cluster down.
func StartDatabase(ctx context.Context, out io.Writer, dataDir string) (url string, stop func(), err error) {
	fmt.Fprintf(out, "database: starting local PostgreSQL in %s ...\n", dataDir)
	// Every role logs in with its password, as on RDS: the function roles'
	// passwords are checked here as they are there, and the superuser's,
	// generated and kept in the cluster folder, since any local user can
	// reach the port and a superuser can run programs (COPY ... TO
	// PROGRAM). The URL returned carries it, for the stack file
	// (webhookctl) and the owner's pool; it is never printed.
	cluster, err := localpg.Start(ctx, localpg.Options{Dir: dataDir, Passwords: true, SuperuserPassword: true})
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
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, Database).Scan(&exists); err != nil {
		stop()
		return "", nil, err
	}
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE DATABASE `+Database); err != nil {
			stop()
			return "", nil, fmt.Errorf("create the dev database: %w", err)
		}
	}
	if was := cluster.PortMoved(); was != 0 {
		// The port is kept across restarts (localpg's port file); said
		// when it could not be, since a saved psql or GUI connection
		// now points elsewhere. webhookctl reads the new one from the
		// stack file.
		fmt.Fprintf(out, "database: port %d, its port last time, is taken by another process: now on port %d\n", was, cluster.Port())
	}
	fmt.Fprintf(out, "database: %s (%s)\n", storage.RedactURL(cluster.URL(Database)), psqlHint(cluster.URL(Database), filepath.Join(dataDir, "superuser-password")))
	return cluster.URL(Database), stop, nil
}

// psqlHint is the psql command line for the local cluster's database at
// dbURL, which reads the superuser's password from its file rather than
// showing it.
func psqlHint(dbURL, passwordFile string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "psql"
	}
	u.User = url.User(u.User.Username())
	return fmt.Sprintf(`PGPASSWORD="$(cat %s)" psql %q`, passwordFile, u.String())
}

// migrateAndRoles applies the schema and, unless o.AsOwner, the function
// roles with their deployed grants and local passwords (dbschema.Apply, as
// the migration function runs it), returning the passwords.
func migrateAndRoles(ctx context.Context, pool *pgxpool.Pool, o Options) (map[string]string, dbschema.Versions, error) {
	schemas := o.Schemas
	if schemas == nil {
		schemas = handlers.Schemas
	}
	if o.AsOwner {
		v, err := dbschema.Migrate(ctx, pool, schemas)
		return nil, v, err
	}
	passwords, err := rolePasswords(o.RolesFile)
	if err != nil {
		return nil, dbschema.Versions{}, err
	}
	v, err := dbschema.Apply(ctx, pool, schemas, dbschema.RolesOptions{Auth: migrate.AuthPassword, Passwords: passwords})
	if err != nil {
		return nil, v, fmt.Errorf("%w (make dev connects each component as its deployed database role, which the database's owner must be able to create and grant; --as-owner or %s=true connects all as the owner instead)", err, EnvAsOwner)
	}
	return passwords, v, nil
}
