package main

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/devtools"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localpg"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// Databases of the bench cluster. Each workload has its own, so that one's
// leftovers never change another's figures.
const (
	dbIngestNew = "ingest_new" // emptied before every new-event run
	dbIngestDup = "ingest_dup" // holds the duplicate set
	dbDrain     = "drain"      // reloaded before every drain run; archived at the end
	dbRiver     = "river"      // River's schema (rivermigrate)
	dbLambda    = "lambda"     // what the Lambda binaries talk to
)

// archiveBucket is the versitygw bucket of the archive stage.
const archiveBucket = "webhook-inbox-bench"

// Env is the bench's own Postgres cluster and S3 server.
type Env struct {
	Cluster   *localpg.Cluster
	S3        *locals3.Server
	PGBinDir  string
	Pgbench   string
	admin     *pgxpool.Pool
	pgVersion string
}

// startEnv starts Postgres and versitygw and creates and migrates the
// databases.
func startEnv(ctx context.Context, log *slog.Logger, tmp string) (*Env, error) {
	bin, err := localpg.BinDir()
	if err != nil {
		return nil, err
	}
	e := &Env{PGBinDir: bin}
	if e.Pgbench, err = findPgbench(bin); err != nil {
		return nil, err
	}
	log.Info("starting PostgreSQL", "bindir", bin)
	if e.Cluster, err = localpg.Start(ctx, localpg.Options{}); err != nil {
		return nil, err
	}
	if e.admin, err = pgxpool.New(ctx, e.Cluster.URL("postgres")); err != nil {
		e.Close()
		return nil, fmt.Errorf("connect to the bench cluster: %w", err)
	}
	if err := e.admin.QueryRow(ctx, `SHOW server_version`).Scan(&e.pgVersion); err != nil {
		e.Close()
		return nil, fmt.Errorf("read server version: %w", err)
	}
	for _, db := range []string{dbIngestNew, dbIngestDup, dbDrain, dbRiver, dbLambda} {
		if _, err := e.admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
			e.Close()
			return nil, fmt.Errorf("create database %s: %w", db, err)
		}
		if db == dbRiver {
			continue // River migrates its own
		}
		pool, err := pgxpool.New(ctx, e.Cluster.URL(db))
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("connect to %s: %w", db, err)
		}
		_, err = migrate.Up(ctx, pool)
		pool.Close()
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("migrate %s: %w", db, err)
		}
	}
	log.Info("starting versitygw")
	if e.S3, err = locals3.Start(ctx, locals3.Options{}); err != nil {
		e.Close()
		return nil, err
	}
	blobs, err := blobstore.Open(ctx, e.S3.BlobConfig(archiveBucket))
	if err != nil {
		e.Close()
		return nil, err
	}
	if err := blobs.CreateBucket(ctx); err != nil {
		e.Close()
		return nil, fmt.Errorf("create bucket %s: %w", archiveBucket, err)
	}
	return e, nil
}

// findPgbench returns the pgbench of the server binaries in bin: beside
// initdb there or, when bin holds links to them (as /usr/local/bin may),
// beside the file initdb links to, so that client and server are of one
// version.
func findPgbench(bin string) (string, error) {
	dirs := []string{bin}
	if real, err := filepath.EvalSymlinks(filepath.Join(bin, "initdb")); err == nil {
		dirs = append(dirs, filepath.Dir(real))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "pgbench")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("pgbench not found beside initdb in %s (Debian: apt-get install postgresql, which installs it)", strings.Join(dirs, " or "))
}

// URL returns the connection URL of one of the bench databases.
func (e *Env) URL(db string) string { return e.Cluster.URL(db) }

// Close stops the servers and removes their folders.
func (e *Env) Close() {
	if e.admin != nil {
		e.admin.Close()
	}
	if e.S3 != nil {
		_ = e.S3.Close()
	}
	if e.Cluster != nil {
		_ = e.Cluster.Close()
	}
}

// clockTicks is USER_HZ, the unit of /proc CPU times: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// Usage is a snapshot of CPU time and WAL position, taken before and after
// a measured run so that its costs per event can be told apart: this
// process (the receiver or processor plus its load generator), the
// Postgres server (all its processes), and the whole machine, whose rest
// is the other work on a shared machine.
type Usage struct {
	At          time.Time
	SelfCPU     time.Duration
	PostgresCPU time.Duration
	MachineBusy time.Duration // all cores, every process
	WALBytes    int64
}

// snapshot reads a Usage; a failure to read one of the figures leaves it
// zero rather than failing the run (they are diagnostics).
func (e *Env) snapshot(ctx context.Context) Usage {
	u := Usage{At: time.Now()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		u.SelfCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	u.PostgresCPU = e.postgresCPU()
	u.MachineBusy = machineBusy()
	var lsn int64
	if err := e.admin.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'::pg_lsn`).Scan(&lsn); err == nil {
		u.WALBytes = lsn
	}
	return u
}

// postgresCPU sums the CPU time of the postmaster and its live children,
// plus the time of the children it already reaped (a backend that exited),
// which the kernel adds to the postmaster's cutime/cstime.
func (e *Env) postgresCPU() time.Duration {
	b, err := os.ReadFile(filepath.Join(e.Cluster.Dir(), "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	pm, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return 0
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks int64
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		f, ok := procStat(pid)
		if !ok {
			continue
		}
		// Fields after the command: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
		ppid, _ := strconv.Atoi(f[1])
		if pid != pm && ppid != pm {
			continue
		}
		for _, i := range []int{11, 12} {
			n, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += n
		}
		if pid == pm {
			for _, i := range []int{13, 14} {
				n, _ := strconv.ParseInt(f[i], 10, 64)
				ticks += n
			}
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// procStat returns the fields of /proc/PID/stat after the command name.
func procStat(pid int) ([]string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return nil, false
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 15 {
		return nil, false
	}
	return f, true
}

// machineBusy returns the non-idle CPU time of all cores since boot.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	// user nice system idle iowait irq softirq steal: all but idle and iowait.
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i > 7 {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * time.Second / clockTicks
}

// loadAvg returns the one-minute load average.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// Machine describes where the figures were taken.
type Machine struct {
	CPU          string  `json:"cpu"`
	Cores        int     `json:"cores"`
	MemoryGiB    float64 `json:"memory_gib"`
	Kernel       string  `json:"kernel"`
	OS           string  `json:"os"`
	Go           string  `json:"go"`
	Postgres     string  `json:"postgres"`
	Pgbench      string  `json:"pgbench"`
	PostgresData string  `json:"postgres_data"`
	PostgresConf string  `json:"postgres_settings"`
	River        string  `json:"river"`
	Pgx          string  `json:"pgx"`
	Versitygw    string  `json:"versitygw"`
	RIE          string  `json:"aws_lambda_rie"`
	Commit       string  `json:"commit"`
}

// describeMachine gathers the machine's and the tools' identities.
func describeMachine(ctx context.Context, e *Env) (Machine, error) {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), Postgres: e.pgVersion}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				m.MemoryGiB = kb / (1 << 20)
			}
		}
	}
	var uts syscall.Utsname
	if syscall.Uname(&uts) == nil {
		m.Kernel = cString(uts.Sysname[:]) + " " + cString(uts.Release[:]) + " " + cString(uts.Machine[:])
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				m.OS = strings.Trim(v, `"`)
			}
		}
	}
	if out, err := exec.CommandContext(ctx, e.Pgbench, "--version").Output(); err == nil {
		m.Pgbench = strings.TrimSpace(string(out))
	}
	// The folder the throwaway cluster was made in (its own name is random).
	m.PostgresData = filepath.Dir(e.Cluster.Dir())
	if strings.HasPrefix(m.PostgresData, "/dev/shm") {
		m.PostgresData += " (tmpfs, in memory)"
	} else {
		m.PostgresData += " (disk)"
	}
	var settings []string
	rows, err := e.admin.Query(ctx, `SELECT name || '=' || setting || COALESCE(unit, '') FROM pg_settings
WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', 'max_wal_size', 'wal_level', 'max_connections') ORDER BY name`)
	if err != nil {
		return m, fmt.Errorf("read server settings: %w", err)
	}
	if settings, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return m, fmt.Errorf("read server settings: %w", err)
	}
	m.PostgresConf = strings.Join(settings, ", ")
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/riverqueue/river":
				m.River = d.Version
			case "github.com/jackc/pgx/v5":
				m.Pgx = d.Version
			}
		}
	}
	m.Versitygw = toolVersion(ctx, "versitygw", locals3.EnvBinary)
	m.RIE = toolVersion(ctx, "aws-lambda-rie", "AWS_LAMBDA_RIE")
	if root, err := devtools.RepoRoot(); err == nil {
		if out, err := exec.CommandContext(ctx, "git", "-C", root, "describe", "--always", "--dirty").Output(); err == nil {
			m.Commit = strings.TrimSpace(string(out))
		}
	}
	return m, nil
}

// toolVersion reads the module version a pinned tool was built from.
func toolVersion(ctx context.Context, name, env string) string {
	p, err := devtools.Tool(ctx, name, env)
	if err != nil {
		return "unknown"
	}
	bi, err := buildinfo.ReadFile(p)
	if err != nil {
		return "unknown"
	}
	return bi.Main.Path + " " + bi.Main.Version
}

// cString reads a NUL-terminated utsname field (int8 or uint8 by
// architecture).
func cString[T int8 | uint8](b []T) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
