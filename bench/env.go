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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localpg"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/pinnedtools"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// Databases of the bench clusters. Each workload has its own, so that one's
// leftovers never change another's figures.
const (
	dbIngestNew = "ingest_new"    // emptied before every new-event run
	dbIngestDup = "ingest_dup"    // holds the duplicate set
	dbDrain     = "drain"         // reloaded before every drain run; archived at the end
	dbRiver     = "river"         // River's schema (rivermigrate)
	dbLambda    = "lambda"        // what the Lambda binaries talk to
	dbLatency   = "latency"       // the receiver and a real-time processor at a fixed rate
	dbHistory   = "history"       // millions of processed, archived events, then ingest and drain
	dbRiverHist = "river_history" // River's, with as many completed jobs
	dbConsole   = "console"       // a million events behind the console's pages
	dbPause     = "pause"         // a drain beside a paused source's held events, and without
	// dbHistoryEmpty is the history stage's empty tables, measured in
	// turns with the history.
	dbHistoryEmpty = "history_empty"
)

// riverDBs are the databases River migrates itself; the others get the
// project's migrations.
var riverDBs = []string{dbRiver, dbRiverHist}

// archiveBucket is the versitygw bucket of the archive stage.
const archiveBucket = "webhook-inbox-bench"

// Cluster kinds: the tests' fast cluster and one that runs as production
// does.
const (
	clusterFast    = "fast"
	clusterDurable = "durable"
)

// Env is one of the bench's Postgres clusters and, for the fast one, its S3
// server.
type Env struct {
	// Kind is clusterFast (fsync off, in memory when there is room) or
	// clusterDurable (fsync and full-page writes on, on disk).
	Kind      string
	Cluster   *localpg.Cluster
	S3        *locals3.Server
	PGBinDir  string
	Pgbench   string
	admin     *pgxpool.Pool
	pgVersion string
}

// envOptions says which cluster to start and what it holds.
type envOptions struct {
	Durable bool
	// DBs are created and migrated (River's with rivermigrate, later).
	DBs []string
	// S3 starts versitygw with the archive bucket too.
	S3 bool
}

// startEnv starts a Postgres cluster (and versitygw when asked) and creates
// and migrates the databases.
func startEnv(ctx context.Context, log *slog.Logger, opts envOptions) (*Env, error) {
	bin, err := localpg.BinDir()
	if err != nil {
		return nil, err
	}
	e := &Env{PGBinDir: bin, Kind: clusterFast}
	if opts.Durable {
		e.Kind = clusterDurable
	}
	if e.Pgbench, err = findPgbench(bin); err != nil {
		return nil, err
	}
	log.Info("starting PostgreSQL", "cluster", e.Kind, "bindir", bin)
	if e.Cluster, err = localpg.Start(ctx, localpg.Options{Durable: opts.Durable}); err != nil {
		return nil, err
	}
	if e.admin, err = pgxpool.New(ctx, e.Cluster.URL("postgres")); err != nil {
		e.Close()
		return nil, fmt.Errorf("connect to the %s cluster: %w", e.Kind, err)
	}
	if err := e.admin.QueryRow(ctx, `SHOW server_version`).Scan(&e.pgVersion); err != nil {
		e.Close()
		return nil, fmt.Errorf("read server version: %w", err)
	}
	for _, db := range opts.DBs {
		if _, err := e.admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
			e.Close()
			return nil, fmt.Errorf("create database %s: %w", db, err)
		}
		if slices.Contains(riverDBs, db) {
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
	if !opts.S3 {
		return e, nil
	}
	log.Info("starting versitygw")
	if e.S3, err = locals3.Start(ctx, locals3.Options{}); err != nil {
		e.Close()
		return nil, err
	}
	if err := locals3.CreateBucket(ctx, e.S3.BlobConfig(archiveBucket), false); err != nil {
		e.Close()
		return nil, fmt.Errorf("create bucket %s: %w", archiveBucket, err)
	}
	return e, nil
}

// target is one database of one cluster: where a workload runs.
type target struct {
	env *Env
	db  string
}

// URL returns the target's connection URL.
func (t target) URL() string { return t.env.URL(t.db) }

// snapshot is the target cluster's Usage.
func (t target) snapshot(ctx context.Context) Usage { return t.env.snapshot(ctx) }

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

// Close stops the servers and removes their folders. A nil Env is a no-op.
func (e *Env) Close() {
	if e == nil {
		return
	}
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
	// Durable describes the durable cluster, when one ran.
	Durable *ClusterInfo `json:"durable_cluster,omitempty"`
	River   string       `json:"river"`
	Pgx     string       `json:"pgx"`
	// Versitygw and RIE are the S3 server's and the Lambda emulator's.
	Versitygw string `json:"versitygw"`
	RIE       string `json:"aws_lambda_rie"`
	Commit    string `json:"commit"`
}

// ClusterInfo is where a cluster kept its data and how it was set.
type ClusterInfo struct {
	// Data is the folder the cluster was made in; FileSystem the file
	// system and device under it, from /proc/self/mountinfo.
	Data       string `json:"data"`
	FileSystem string `json:"file_system"`
	Settings   string `json:"settings"`
	// FlushMsP50 and FlushMsP99 time an 8 KiB write and fdatasync in the
	// cluster's folder, as a commit's WAL flush does (flushSamples of them).
	FlushMsP50 float64 `json:"flush_ms_p50"`
	FlushMsP99 float64 `json:"flush_ms_p99"`
}

// describeMachine gathers the machine's and the tools' identities; durable
// is the durable cluster or nil.
func describeMachine(ctx context.Context, e, durable *Env) (Machine, error) {
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
	fast, err := e.describe(ctx)
	if err != nil {
		return m, err
	}
	m.PostgresData = fast.Data
	if strings.HasPrefix(m.PostgresData, "/dev/shm") {
		m.PostgresData += " (tmpfs, in memory)"
	} else {
		m.PostgresData += " (disk: " + fast.FileSystem + ")"
	}
	m.PostgresConf = fast.Settings
	if durable != nil {
		info, err := durable.describe(ctx)
		if err != nil {
			return m, err
		}
		m.Durable = &info
	}
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
	if root, err := pinnedtools.RepoRoot(); err == nil {
		if out, err := exec.CommandContext(ctx, "git", "-C", root, "describe", "--always", "--dirty").Output(); err == nil {
			m.Commit = strings.TrimSpace(string(out))
		}
	}
	return m, nil
}

// describe reads where the cluster keeps its data, the file system under
// it, its settings, and how long a flush takes there.
func (e *Env) describe(ctx context.Context) (ClusterInfo, error) {
	// The folder the throwaway cluster was made in (its own name is random).
	info := ClusterInfo{Data: filepath.Dir(e.Cluster.Dir()), FileSystem: fileSystemOf(e.Cluster.Dir())}
	rows, err := e.admin.Query(ctx, `SELECT name || '=' || setting || COALESCE(unit, '') FROM pg_settings
WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', 'max_wal_size', 'wal_level', 'max_connections') ORDER BY name`)
	if err != nil {
		return info, fmt.Errorf("read server settings: %w", err)
	}
	settings, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return info, fmt.Errorf("read server settings: %w", err)
	}
	info.Settings = strings.Join(settings, ", ")
	lat, err := flushLatencies(e.Cluster.Dir())
	if err != nil {
		return info, err
	}
	info.FlushMsP50, info.FlushMsP99 = percentile(lat, 50), percentile(lat, 99)
	return info, nil
}

// flushSamples is how many write-and-flush pairs flushLatencies times.
const flushSamples = 200

// flushLatencies times flushSamples 8 KiB writes, each followed by
// fdatasync, to one file in dir: what a commit waits for on a cluster with
// fsync on. Sorted.
func flushLatencies(dir string) ([]time.Duration, error) {
	f, err := os.CreateTemp(dir, "bench-flush-")
	if err != nil {
		return nil, fmt.Errorf("flush test: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := make([]byte, 8192)
	lat := make([]time.Duration, 0, flushSamples)
	for i := range flushSamples {
		t0 := time.Now()
		if _, err := f.WriteAt(page, int64(i%16)*int64(len(page))); err != nil {
			return nil, fmt.Errorf("flush test: %w", err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, fmt.Errorf("flush test: %w", err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	return lat, nil
}

// fileSystemOf names the file system holding path ("ext4 on /dev/vda,
// mounted at /"), from the longest mount point above it in
// /proc/self/mountinfo; "unknown" when that cannot be read.
func fileSystemOf(path string) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "unknown"
	}
	best, desc := "", "unknown"
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options... - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 2 {
			continue
		}
		mnt := f[4]
		under := path == mnt || mnt == "/" || strings.HasPrefix(path, strings.TrimSuffix(mnt, "/")+"/")
		if under && len(mnt) >= len(best) {
			best, desc = mnt, g[0]+" on "+g[1]+", mounted at "+mnt
		}
	}
	return desc
}

// toolVersion reads the module version a pinned tool was built from.
func toolVersion(ctx context.Context, name, env string) string {
	p, err := pinnedtools.Tool(ctx, name, env)
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
