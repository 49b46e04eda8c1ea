// Package localpg starts throwaway PostgreSQL clusters from the machine's own
// initdb/pg_ctl, for tests and the local dev stack.
//
// A cluster is one folder: the data directory (data/), the server log
// (postgres.log) and, when the path is short enough, the Unix socket. Clients
// connect over TCP on 127.0.0.1 with trust authentication as user postgres,
// so nothing needs a password and nothing listens beyond the loopback.
// Options.Passwords makes every other role log in with a password, as on a
// managed database, for tests of credentials and their rotation, and
// Options.SuperuserPassword postgres too: the dev stack's cluster, which
// lives on, is so, since any local user may connect to the loopback and a
// trusted superuser can run programs as the server's user (COPY ... TO
// PROGRAM). The Unix socket, in the cluster folder (mode 0700), stays
// trusted: only the folder's owner reaches it, who can read the data and
// the password anyway.
//
// The server runs with fsync=off and full_page_writes=off: the data only has
// to survive the server stopping or crashing (the kernel still holds every
// write), not the machine losing power, and skipping the flushes makes
// initdb, CREATE DATABASE and commits much faster. Options.Durable runs it
// as production does instead (fsync and full-page writes on, on disk), for
// measurements of that case.
//
// A temporary cluster whose process died without calling Close (a go test
// timeout, Ctrl-C) keeps running, since pg_ctl detaches the server; the next
// Start of a temporary cluster on the machine stops and removes it.
package localpg

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoServerBinaries is returned (wrapped) by BinDir and Start when neither
// $PG_BINDIR, PATH nor the Debian layout provides initdb and pg_ctl.
var ErrNoServerBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl) not found; run `make setup` (Debian/Ubuntu: apt-get install postgresql) or set DATABASE_URL")

// serverUser is the account initdb and postgres run as when this process is
// root: both refuse to run as root, and Debian's package creates this user.
const serverUser = "postgres"

// Options configures Start.
type Options struct {
	// Dir is the folder that holds the cluster. An existing Dir/data is
	// reused as is, so the dev stack keeps its data from one run to the
	// next. "" means a new temporary folder that Close removes: in /dev/shm
	// when that is a tmpfs with room (memory makes the cluster several times
	// faster), else under os.TempDir().
	Dir string
	// Port is the TCP port on 127.0.0.1; 0 picks a free one. With a
	// given Dir, the port picked is remembered in Dir/port and taken
	// again by the next Start while it is free, so the dev stack's
	// database keeps its address across restarts (a psql session, a GUI
	// client's saved connection); Cluster.PortMoved says when it was not
	// free.
	Port int
	// Passwords makes TCP connections of every role but postgres
	// authenticate with a SCRAM-SHA-256 password, as RDS and Aurora do, so
	// a wrong or rotated password is refused as it is there. The superuser
	// postgres stays trusted, so URL (and a test's own set-up) needs none.
	// Off, every role is trusted: nothing on this machine needs a password.
	Passwords bool
	// SuperuserPassword, with Passwords, makes postgres authenticate over
	// TCP with a SCRAM-SHA-256 password too: one generated at the first
	// Start and kept in the cluster folder (superuser-password, mode 0600)
	// for the next, set at each Start before the server listens (a cluster
	// created without it gets it then), and carried by URL. For the dev
	// stack's cluster, which outlives a test run: any local user can reach
	// the loopback port.
	SuperuserPassword bool
	// Durable runs the server as in production: fsync=on,
	// full_page_writes=on, PostgreSQL's default max_wal_size, and a
	// temporary folder on disk, never in /dev/shm, so that every commit
	// waits for its WAL flush to reach the disk. The benchmarks measure
	// that case beside the fast one.
	Durable bool
	// TLS, when set, makes the server offer TLS (ssl=on) with this
	// certificate, as RDS does, for tests of how clients check it. The
	// server still takes plaintext from a client that asks for no TLS.
	TLS *ServerCert
	// MaxConnections is the server's max_connections; 0 means 200, room
	// for one test package's parallel pools. A server that several test
	// processes share at once (webhookdev postgres) needs more.
	MaxConnections int
}

// ServerCert is a server's certificate and private key, PEM-encoded; the
// certificate may be followed by its intermediates.
type ServerCert struct {
	CertPEM, KeyPEM []byte
}

// Cluster is a PostgreSQL server started by Start. Its methods are safe for
// concurrent use.
type Cluster struct {
	bin     string
	dir     string
	dataDir string
	logPath string
	sockDir string // "" when the path is too long for a Unix socket
	owned   bool   // dir was created by Start, so Close removes it
	cred    *syscall.Credential

	port    int    // fixed once Start returns, so URLs handed out stay valid
	moved   int    // the remembered port, when it was taken and another picked
	durable bool   // Options.Durable
	superPW string // Options.SuperuserPassword: postgres's password, "" when trusted
	tls     bool   // Options.TLS: server.crt and server.key are in dir
	maxConn int    // Options.MaxConnections, 200 when 0

	mu      sync.Mutex // serialises Start, Stop, Kill and Close
	running bool
	closed  bool
}

// BinDir returns the folder holding initdb and pg_ctl: $PG_BINDIR when set,
// else the first PATH entry holding both, else the newest
// /usr/lib/postgresql/<version>/bin, where Debian and Ubuntu install them
// without putting them on PATH.
func BinDir() (string, error) {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		if hasServerBins(d) {
			return d, nil
		}
		return "", fmt.Errorf("PG_BINDIR=%s holds no initdb and pg_ctl: %w", d, ErrNoServerBinaries)
	}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if d != "" && hasServerBins(d) {
			return d, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Versions sort numerically so that 10 beats 9.6; names that are not
	// numbers sort last.
	version := func(d string) float64 {
		v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
		if err != nil {
			return -1
		}
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int {
		va, vb := version(a), version(b)
		switch {
		case va > vb:
			return -1
		case va < vb:
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, d := range dirs {
		if hasServerBins(d) {
			return d, nil
		}
	}
	return "", ErrNoServerBinaries
}

func hasServerBins(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// Start creates the cluster (unless opts.Dir already holds one) and starts
// the server, returning once it accepts connections. Close it when done.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, cred: cred, port: opts.Port, durable: opts.Durable, maxConn: opts.MaxConnections}

	if opts.Dir == "" {
		bases := tempBases()
		for _, base := range bases {
			reapStale(ctx, base, bin, cred)
		}
		if opts.Durable && len(bases) > 1 && bases[0] == memoryDir() {
			bases = bases[1:] // on disk: a flush must reach a device
		}
		if c.dir, err = makeTempDir(bases, cred); err != nil {
			return nil, err
		}
		c.owned = true
		// The owner file lets a later Start remove this cluster if this
		// process dies without calling Close (go test -timeout, Ctrl-C).
		if err := os.WriteFile(filepath.Join(c.dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			c.removeDir()
			return nil, fmt.Errorf("localpg: %w", err)
		}
	} else {
		if c.dir, err = filepath.Abs(opts.Dir); err != nil {
			return nil, fmt.Errorf("localpg: %w", err)
		}
		// Parents made here (such as .local) must stay searchable by the
		// server user when we are root; the cluster folder itself is private.
		if err := os.MkdirAll(filepath.Dir(c.dir), 0o755); err != nil {
			return nil, fmt.Errorf("localpg: create cluster folder: %w", err)
		}
		if err := os.Mkdir(c.dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("localpg: create cluster folder: %w", err)
		}
		if cred != nil {
			if err := searchable(filepath.Dir(c.dir), cred); err != nil {
				return nil, err
			}
		}
	}
	c.dataDir = filepath.Join(c.dir, "data")
	c.logPath = filepath.Join(c.dir, "postgres.log")
	// A Unix socket path must fit sun_path (104 bytes on macOS, 108 on
	// Linux). Clients here use TCP, so a long folder just goes without one.
	if len(c.dir)+len("/.s.PGSQL.65535") < 100 {
		c.sockDir = c.dir
	}

	if err := c.create(ctx); err != nil {
		c.removeDir()
		return nil, err
	}
	if opts.SuperuserPassword && !opts.Passwords {
		c.removeDir()
		return nil, errors.New("localpg: SuperuserPassword needs Passwords")
	}
	if opts.SuperuserPassword {
		if err := c.setSuperuserPassword(ctx); err != nil {
			c.removeDir()
			return nil, err
		}
	}
	if opts.Passwords {
		if err := c.requirePasswords(); err != nil {
			c.removeDir()
			return nil, err
		}
	}
	if opts.TLS != nil {
		if err := c.writeCert(*opts.TLS); err != nil {
			c.removeDir()
			return nil, err
		}
	}
	pick := opts.Port == 0
	remembered := 0
	if pick && !c.owned {
		remembered = readPortFile(c.dir)
	}
	if remembered > 0 {
		if err := c.startRemembered(ctx, remembered); err != nil {
			c.Close()
			return nil, err
		}
	} else if err := c.startPicking(ctx, pick); err != nil {
		// A server that missed pg_ctl's deadline may still come up.
		c.Close()
		return nil, err
	}
	if pick && !c.owned {
		// Best effort: without the file the next start picks a new port,
		// which is what happened before there was one.
		_ = os.WriteFile(filepath.Join(c.dir, portFile), []byte(strconv.Itoa(c.port)+"\n"), 0o644)
	}
	return c, nil
}

// portFile, in a given Dir, holds the port the cluster last started on.
const portFile = "port"

// readPortFile returns the port remembered in dir, 0 when there is none
// or it is not a port (a hand-edited file is not worth failing over).
func readPortFile(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, portFile))
	if err != nil {
		return 0
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || p <= 0 || p > 65535 {
		return 0
	}
	return p
}

// startRemembered starts the server on the port it had last time, or, when
// another process holds that port now, on a fresh one (PortMoved).
func (c *Cluster) startRemembered(ctx context.Context, port int) error {
	c.port = port
	if portFree(port) {
		err := c.start(ctx)
		if err == nil || !errors.Is(err, errPortInUse) {
			return err
		}
	}
	c.moved = port
	return c.startPicking(ctx, true)
}

// portFree reports whether port can be bound on the loopback now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// create prepares the folder for the server user and runs initdb unless the
// data directory already exists.
func (c *Cluster) create(ctx context.Context) error {
	if c.cred != nil {
		if err := os.Chmod(c.dir, 0o700); err != nil {
			return fmt.Errorf("localpg: %w", err)
		}
		if err := chownTree(c.dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("localpg: hand %s to user %s: %w", c.dir, serverUser, err)
		}
	}
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err == nil {
		return nil
	}
	// --no-sync: a throwaway cluster does not need its files flushed to
	// disk, and the flushes are most of initdb's time on slow disks.
	out, err := c.run(ctx, "initdb", "-D", c.dataDir, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	if err != nil {
		return fmt.Errorf("localpg: initdb: %w\n%s", err, out)
	}
	return nil
}

// passwordHBA is pg_hba.conf for Options.Passwords: the Unix socket and
// postgres over TCP trusted, everyone else over TCP by password. The server
// listens on 127.0.0.1 only; the IPv6 line covers a later change of that.
const passwordHBA = `# Written by localpg (Options.Passwords).
local all all                  trust
host  all postgres 127.0.0.1/32 trust
host  all postgres ::1/128      trust
host  all all      127.0.0.1/32 scram-sha-256
host  all all      ::1/128      scram-sha-256
`

// superuserHBA is pg_hba.conf for Options.SuperuserPassword: as
// passwordHBA, postgres included over TCP. The socket is in the cluster
// folder, which only its owner may enter.
const superuserHBA = `# Written by localpg (Options.SuperuserPassword).
local all all                  trust
host  all all      127.0.0.1/32 scram-sha-256
host  all all      ::1/128      scram-sha-256
`

// superuserPasswordFile, in the cluster folder, keeps postgres's password
// (Options.SuperuserPassword).
const superuserPasswordFile = "superuser-password"

// setSuperuserPassword reads postgres's password from the cluster folder,
// generating it the first time, and sets it in the catalogue with the
// server in single-user mode, before it listens: a cluster created while
// postgres was trusted gets it as well. The password goes to the server on
// its standard input, hashed there with SCRAM-SHA-256; nothing logs it.
func (c *Cluster) setSuperuserPassword(ctx context.Context) error {
	path := filepath.Join(c.dir, superuserPasswordFile)
	b, err := os.ReadFile(path)
	pw := strings.TrimSpace(string(b))
	switch {
	case err == nil && validPassword(pw):
	case err == nil || errors.Is(err, os.ErrNotExist):
		pw = rand.Text() // 26 base32 characters: 130 bits
		if err := os.WriteFile(path, []byte(pw+"\n"), 0o600); err != nil {
			return fmt.Errorf("localpg: keep the superuser's password: %w", err)
		}
	default:
		return fmt.Errorf("localpg: read the superuser's password: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	stmt := "SET password_encryption = 'scram-sha-256'; ALTER ROLE postgres PASSWORD '" + pw + "'\n"
	out, err := runAsWithInput(ctx, c.bin, c.cred, c.dir, stmt, "postgres", "--single", "-D", c.dataDir, "-c", "log_statement=none", "postgres")
	if err == nil && strings.Contains(out, "ERROR") {
		err = errors.New("the statement failed")
	}
	if err != nil {
		return fmt.Errorf("localpg: set the superuser's password (single-user mode): %w\n%s", err, strings.ReplaceAll(out, pw, "<password>"))
	}
	c.superPW = pw
	return nil
}

// validPassword: pw is one setSuperuserPassword could have written (it is
// put in a statement as is).
func validPassword(pw string) bool {
	if len(pw) < 20 {
		return false
	}
	for _, r := range pw {
		if !('A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// requirePasswords writes passwordHBA over the data directory's
// pg_hba.conf, before the server starts and reads it.
func (c *Cluster) requirePasswords() error {
	path := filepath.Join(c.dataDir, "pg_hba.conf")
	hba := passwordHBA
	if c.superPW != "" {
		hba = superuserHBA
	}
	if err := os.WriteFile(path, []byte(hba), 0o600); err != nil {
		return fmt.Errorf("localpg: write %s: %w", path, err)
	}
	if c.cred != nil {
		// The server runs as its own user, which must read the file.
		if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("localpg: hand %s to user %s: %w", path, serverUser, err)
		}
	}
	return nil
}

// writeCert puts the server's certificate and key in the cluster folder,
// the key readable by the server's user alone, as the server insists.
func (c *Cluster) writeCert(cert ServerCert) error {
	for name, data := range map[string][]byte{"server.crt": cert.CertPEM, "server.key": cert.KeyPEM} {
		path := filepath.Join(c.dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("localpg: write %s: %w", path, err)
		}
		if c.cred != nil {
			if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return fmt.Errorf("localpg: hand %s to user %s: %w", path, serverUser, err)
			}
		}
	}
	c.tls = true
	return nil
}

// startPicking starts the server, and when the port is ours to choose,
// retries on a fresh port if another process took the one picked between
// probing it and the server binding it.
func (c *Cluster) startPicking(ctx context.Context, pick bool) error {
	const attempts = 5
	for i := 0; ; i++ {
		if pick {
			p, err := freePort()
			if err != nil {
				return err
			}
			c.port = p
		}
		err := c.start(ctx)
		if err == nil || !pick || i == attempts-1 || !errors.Is(err, errPortInUse) {
			return err
		}
	}
}

var errPortInUse = errors.New("port in use")

// start runs pg_ctl start on c.port. The caller holds c.mu or owns c alone.
func (c *Cluster) start(ctx context.Context) error {
	logStart := fileSize(c.logPath)
	// pg_ctl hands -o to /bin/sh, hence the quoting.
	serverOpts := strings.Join([]string{
		"-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1",
		"-k", shellQuote(c.sockDir), // '' disables the Unix socket
		"-c", "max_connections=" + strconv.Itoa(cmp.Or(c.maxConn, 200)),
	}, " ")
	if c.tls {
		serverOpts += " -c ssl=on -c ssl_cert_file=" + shellQuote(filepath.Join(c.dir, "server.crt")) +
			" -c ssl_key_file=" + shellQuote(filepath.Join(c.dir, "server.key"))
	}
	if c.durable {
		// PostgreSQL's defaults for these (fsync, full_page_writes and
		// max_wal_size 1GB), said outright.
		serverOpts += " -c fsync=on -c full_page_writes=on -c max_wal_size=1GB"
	} else {
		// Every CREATE DATABASE writes its copy to the WAL; a small
		// max_wal_size checkpoints and recycles it early rather than let
		// up to 1GB pile up, in memory when the cluster is in /dev/shm.
		serverOpts += " -c fsync=off -c full_page_writes=off -c max_wal_size=128MB -c min_wal_size=32MB"
	}
	// -l sends the server's output to a file: postgres outlives pg_ctl, and
	// a pipe it inherited would keep this process (and go test) waiting.
	out, err := c.run(ctx, "pg_ctl", "start", "-D", c.dataDir, "-l", c.logPath,
		"-w", "-t", "60", "-o", serverOpts)
	if err != nil {
		serverLog := logTail(c.logPath, logStart)
		if strings.Contains(serverLog, "Address already in use") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return fmt.Errorf("localpg: start server on port %d: %w\n%s\nserver log %s:\n%s", c.port, err, out, c.logPath, serverLog)
	}
	c.running = true
	return nil
}

// URL returns the connection URL of database dbname on the cluster.
//
// With Options.SuperuserPassword it carries postgres's password: print it
// redacted.
func (c *Cluster) URL(dbname string) string {
	user := url.User("postgres")
	if c.superPW != "" {
		user = url.UserPassword("postgres", c.superPW)
	}
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", user.String(), c.port, url.PathEscape(dbname))
}

// Port returns the server's TCP port, which stays the same across Stop and
// Start so that URLs handed out stay valid.
func (c *Cluster) Port() int { return c.port }

// PortMoved returns the port the cluster had last time in its Dir when
// another process held it at Start, so that it runs on Port instead; 0
// when it kept its port (or had none remembered).
func (c *Cluster) PortMoved() int { return c.moved }

// Dir returns the cluster folder (data directory, server log, socket).
func (c *Cluster) Dir() string { return c.dir }

// LogPath returns the server log file, the first place to look when the
// server misbehaves.
func (c *Cluster) LogPath() string { return c.logPath }

// Start starts a stopped cluster again on the same port and data, as after
// Stop or Kill: what an outage test needs to bring the database back. It
// fails if another process took the port meanwhile. A running server is
// left alone.
func (c *Cluster) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("localpg: cluster is closed")
	}
	// pg_ctl status rather than c.running alone: the server may have died
	// (or been killed) behind this Cluster's back.
	if c.running {
		if _, err := c.run(ctx, "pg_ctl", "status", "-D", c.dataDir); err == nil {
			return nil
		}
	}
	return c.start(ctx)
}

// Stop shuts the server down cleanly: open sessions are disconnected and
// transactions in flight rolled back. The data stays; Start brings it back.
func (c *Cluster) Stop(ctx context.Context) error {
	return c.stop(ctx, "fast")
}

// Kill stops the server without a clean shutdown, like a crash: the next
// Start runs crash recovery. The data committed before stays.
func (c *Cluster) Kill(ctx context.Context) error {
	return c.stop(ctx, "immediate")
}

func (c *Cluster) stop(ctx context.Context, mode string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("localpg: cluster is closed")
	}
	return c.stopLocked(ctx, mode)
}

func (c *Cluster) stopLocked(ctx context.Context, mode string) error {
	out, err := c.run(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-m", mode, "-w", "-t", "60")
	if err != nil && c.serverAlive() {
		return fmt.Errorf("localpg: stop server (%s): %w\n%s", mode, err, out)
	}
	// pg_ctl fails when the server was already down, stopped or crashed
	// behind this Cluster's back; down is all that was asked.
	c.running = false
	return nil
}

// serverAlive reports whether the postmaster named by the PID file runs. A
// crashed server leaves its PID file behind, so the file alone proves
// nothing.
func (c *Cluster) serverAlive() bool {
	pid, ok := readPID(filepath.Join(c.dataDir, "postmaster.pid"))
	return ok && alive(pid)
}

// Close stops the server at once (no clean shutdown: the data is about to be
// deleted, or a dev cluster recovers on its next start) and removes the
// folder if Start created it. Calling it again does nothing.
func (c *Cluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	if c.running || c.serverAlive() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.stopLocked(ctx, "immediate"); err != nil {
			errs = append(errs, err)
		}
	}
	// A server still running would recreate files in the folder, so it
	// stays until the server is known to be down.
	if len(errs) == 0 {
		if err := c.removeDir(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) removeDir() error {
	if !c.owned {
		return nil
	}
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("localpg: remove %s: %w", c.dir, err)
	}
	return nil
}

// run runs one of the server programs as the server user and returns its
// combined output. The output goes to a buffer, never to this process's own
// stdout/stderr, which go test reads until every holder closes them.
func (c *Cluster) run(ctx context.Context, name string, args ...string) (string, error) {
	return runAs(ctx, c.bin, c.cred, c.dir, name, args...)
}

func runAs(ctx context.Context, bin string, cred *syscall.Credential, dir, name string, args ...string) (string, error) {
	return runAsWithInput(ctx, bin, cred, dir, "", name, args...)
}

// runAsWithInput is runAs with input on the program's standard input.
func runAsWithInput(ctx context.Context, bin string, cred *syscall.Credential, dir, input, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
	cmd.Stdin = strings.NewReader(input)
	cmd.Dir = dir // the caller's working folder may be closed to the server user
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// Should a child keep the pipe open after exiting, Wait gives up on it
	// instead of blocking for ever.
	cmd.WaitDelay = 5 * time.Second
	if cred != nil {
		// Setting the credential directly, rather than through runuser or
		// su, needs no PAM session and no extra program.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// serverCredential returns nil when this process may run the server itself,
// and the server user's identity when it is root, which initdb and postgres
// refuse to run as.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return nil, fmt.Errorf("localpg: running as root, which PostgreSQL refuses, and there is no %q user to run it as (%v); create one (useradd --system %s) or run as a normal user", serverUser, err, serverUser)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("localpg: user %s has a non-numeric uid/gid %s/%s", serverUser, u.Uid, u.Gid)
	}
	// Groups is empty on purpose: the server needs no supplementary group,
	// and an empty list drops root's.
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// tempBases lists the folders a temporary cluster may go in, best first:
// memory when there is room (see memoryDir), then os.TempDir(), then /tmp
// for a root process whose TMPDIR the server user cannot reach.
func tempBases() []string {
	var bases []string
	if d := memoryDir(); d != "" {
		bases = append(bases, d)
	}
	bases = append(bases, os.TempDir())
	if bases[len(bases)-1] != "/tmp" {
		bases = append(bases, "/tmp")
	}
	return bases
}

// makeTempDir creates a cluster folder in the first of bases that takes it.
func makeTempDir(bases []string, cred *syscall.Credential) (string, error) {
	var errs []error
	for _, base := range bases {
		if cred != nil {
			if err := searchable(base, cred); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		dir, err := os.MkdirTemp(base, tempPrefix)
		if err == nil {
			return dir, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("localpg: create cluster folder: %w", errors.Join(errs...))
}

// searchable checks that uid/gid of cred may traverse dir and every folder
// above it, going by mode bits: a root-only TMPDIR such as /root/tmp would
// otherwise fail deep inside initdb with a terse "Permission denied".
func searchable(dir string, cred *syscall.Credential) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("localpg: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		// The owner bits apply to the owner, else the group bits to the
		// group, else the others bits, as the kernel checks them.
		search := fi.Mode().Perm() & 0o001
		switch {
		case st.Uid == cred.Uid:
			search = fi.Mode().Perm() & 0o100
		case st.Gid == cred.Gid:
			search = fi.Mode().Perm() & 0o010
		}
		if search == 0 {
			return fmt.Errorf("localpg: %s is not reachable by user %s, which runs the server because this process is root; use a folder under a world-searchable one such as /tmp", d, serverUser)
		}
		if p := filepath.Dir(d); p == d {
			return nil
		}
	}
}

func chownTree(root string, uid, gid int) error {
	return filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// freePort asks the kernel for a free loopback port. It is free only until
// someone else takes it, which startPicking handles by retrying.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("localpg: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logTail returns the end of what the server logged from offset on, enough
// to see why it did not start without flooding the error.
func logTail(path string, offset int64) string {
	const max = 4 << 10
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no server log: %v)", err)
	}
	defer f.Close()
	if size := fileSize(path); size-offset > max {
		offset = size - max
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Sprintf("(read server log: %v)", err)
	}
	b, _ := io.ReadAll(io.LimitReader(f, max))
	return strings.TrimSpace(string(b))
}
