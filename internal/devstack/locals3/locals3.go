// Package locals3 runs a real S3-compatible server on this machine for tests
// and the dev stack: versitygw (Apache-2.0, Go) over a POSIX folder, on a
// loopback port, with fixed root credentials.
//
// It is a real server, not a mock: the archiver talks to it through the same
// aws-sdk-go-v2 client code it uses in AWS (endpoint override, path-style
// addressing), so requests, checksums, ranges and outages are the real thing.
//
// The binary is versitygw pinned in tools/go.mod. Binary finds it: $VERSITYGW
// when set, else `go tool -modfile=tools/go.mod -n versitygw`, which builds it
// once into Go's build cache (make setup does that ahead of time) and prints
// its path; later calls take a fraction of a second and need no network.
//
// A server started here dies with the process that started it (on Linux the
// kernel sends it SIGKILL when its parent dies), so a test binary killed by a
// timeout leaves no server behind; a temporary folder left behind that way is
// removed by the next Start.
package locals3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/pinnedtools"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
)

// Fixed root credentials of local servers. They guard nothing (the server
// listens on the loopback only) and being fixed lets `make dev` print them.
const (
	AccessKeyID     = "locals3"
	SecretAccessKey = "locals3-secret-key"
	// Region is what clients sign requests for; versitygw checks it.
	Region = "us-east-1"
)

// EnvBinary names an explicit versitygw binary, which skips building one.
const EnvBinary = "VERSITYGW"

// Options configures Start.
type Options struct {
	// Dir is the folder holding the buckets (one sub-folder each). An
	// existing Dir is reused as is, so the dev stack keeps its objects from
	// one run to the next. "" means a new temporary folder that Close
	// removes.
	Dir string
	// Port is the TCP port on 127.0.0.1; 0 picks a free one.
	Port int
	// Binary is the versitygw executable; "" means Binary(ctx).
	Binary string
	// Region, AccessKeyID and SecretAccessKey are what the server accepts;
	// "" means the fixed ones (Region, AccessKeyID, SecretAccessKey). The
	// dev stack passes the developer's S3_ACCESS_KEY_ID,
	// S3_SECRET_ACCESS_KEY and AWS_REGION when set, so that they are
	// honoured rather than ignored.
	Region, AccessKeyID, SecretAccessKey string
	// Versioning lets buckets turn versioning on (PutBucketVersioning):
	// versitygw keeps older versions in a folder of its own (the posix
	// backend's --versioning-dir), beside the buckets. Off, a request to
	// turn it on is refused.
	Versioning bool
	// EventWebhookURL, when set, is where the server POSTs a notification
	// of each object created or deleted, in any bucket (versitygw's
	// --event-webhook-url): one JSON document per object, shaped like S3's
	// event notification ({"Records": [...]}), sent once, without retry,
	// from a goroutine of its own (so not in order). The URL must answer
	// when the server starts: versitygw sends it a test event then
	// ({"Event": "s3:TestEvent", ...}) and refuses to start when the
	// connection is refused. What v1.8.0 sends differs from S3's own
	// notification: see TestEventNotificationsAreS3Shaped, and
	// internal/devstack/localevents, which turns it into what S3 sends
	// EventBridge.
	EventWebhookURL string
}

// Server is a running (or stopped) versitygw. Its methods are safe for
// concurrent use.
type Server struct {
	bin      string
	dir      string // the folder of this server: buckets/ and versitygw.log
	root     string // the POSIX backend's root: one folder per bucket
	versions string // the posix backend's versioning folder; "" without Options.Versioning
	events   string // Options.EventWebhookURL
	logPath  string
	owned    bool
	port     int
	// region, access and secret are what the server accepts.
	region, access, secret string

	mu     sync.Mutex // serialises Start, Stop and Close
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd exits
	closed bool
}

const (
	tempPrefix = "locals3-"
	ownerFile  = "owner.pid"
	// readyTimeout bounds a start: versitygw listens within ~25ms, but a
	// loaded CI machine can be much slower.
	readyTimeout = 30 * time.Second
)

// Start starts a server and returns once it answers HTTP. Close it when done.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = Binary(ctx); err != nil {
			return nil, err
		}
	}
	s := &Server{bin: bin, port: opts.Port, region: Region, access: AccessKeyID, secret: SecretAccessKey, events: opts.EventWebhookURL}
	if opts.Region != "" {
		s.region = opts.Region
	}
	if opts.AccessKeyID != "" || opts.SecretAccessKey != "" {
		s.access, s.secret = opts.AccessKeyID, opts.SecretAccessKey
	}
	if opts.Dir == "" {
		reapStale(os.TempDir())
		dir, err := os.MkdirTemp("", tempPrefix)
		if err != nil {
			return nil, fmt.Errorf("locals3: create server folder: %w", err)
		}
		s.dir, s.owned = dir, true
		// The owner file lets a later Start remove this folder if this
		// process dies without calling Close.
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			s.removeDir()
			return nil, fmt.Errorf("locals3: %w", err)
		}
	} else {
		dir, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("locals3: %w", err)
		}
		s.dir = dir
	}
	s.root = filepath.Join(s.dir, "buckets")
	s.logPath = filepath.Join(s.dir, "versitygw.log")
	if err := os.MkdirAll(s.root, 0o755); err != nil {
		s.removeDir()
		return nil, fmt.Errorf("locals3: create bucket folder: %w", err)
	}
	if opts.Versioning {
		s.versions = filepath.Join(s.dir, "versions")
		if err := os.MkdirAll(s.versions, 0o755); err != nil {
			s.removeDir()
			return nil, fmt.Errorf("locals3: create versions folder: %w", err)
		}
	}
	const attempts = 5
	for i := 0; ; i++ {
		if opts.Port == 0 {
			p, err := freePort()
			if err != nil {
				s.removeDir()
				return nil, err
			}
			s.port = p
		}
		err := s.start(ctx)
		if err == nil {
			return s, nil
		}
		// Another process may have taken the port between the probe and
		// the server's bind; when the port is ours to choose, try another.
		if opts.Port != 0 || i == attempts-1 || !strings.Contains(err.Error(), "address already in use") {
			s.removeDir()
			return nil, err
		}
	}
}

// start runs versitygw on s.port and waits until it answers. The caller
// holds s.mu or owns s alone.
func (s *Server) start(ctx context.Context) error {
	// Readiness is judged by an HTTP answer on the port, so a port that
	// another server already answers on must be refused up front: the new
	// process would exit, and the other server would look like it.
	probe, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", s.port))
	if err != nil {
		return fmt.Errorf("locals3: port %d: %w", s.port, err)
	}
	probe.Close()
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("locals3: open server log: %w", err)
	}
	logStart, _ := logf.Seek(0, 2)
	// Flags come from versitygw's own CLI (cmd/versitygw/main.go and
	// cmd/internal/gwcli/posix.go at v1.8.0): global flags, then the posix
	// subcommand and its root folder. --quiet drops the per-request log.
	args := []string{
		"--port", fmt.Sprintf("127.0.0.1:%d", s.port),
		"--access", s.access,
		"--secret", s.secret,
		"--region", s.region,
		"--quiet"}
	if s.events != "" {
		args = append(args, "--event-webhook-url", s.events)
	}
	args = append(args, "posix")
	if s.versions != "" {
		args = append(args, "--versioning-dir", s.versions)
	}
	cmd := exec.Command(s.bin, append(args, s.root)...)
	// The environment is cleared of versitygw's own variables (ROOT_*,
	// VGW_*), which would otherwise override or add to the flags above.
	cmd.Env = cleanEnv(os.Environ())
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("locals3: start %s: %w", s.bin, err)
	}
	logf.Close() // the child holds its own descriptor
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited

	if err := s.waitReady(ctx, exited); err != nil {
		s.kill()
		return fmt.Errorf("locals3: versitygw on port %d: %w\nserver log %s:\n%s", s.port, err, s.logPath, logTail(s.logPath, logStart))
	}
	return nil
}

// waitReady polls until the server answers HTTP (any status: an anonymous
// request gets 403, which proves it serves), it exits, or time runs out.
func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint()+"/", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			select {
			case <-exited:
				return errors.New("exited, yet something answers on its port")
			default:
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("exited before answering (address already in use?)")
		case <-ctx.Done():
			return fmt.Errorf("not answering: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Endpoint returns the server's base URL, for an S3 client's endpoint
// override (with path-style addressing).
func (s *Server) Endpoint() string { return fmt.Sprintf("http://127.0.0.1:%d", s.port) }

// BlobConfig returns the client configuration for bucket on this server:
// endpoint override, path-style addressing and the server's static keys,
// the same client code as in AWS otherwise. Create the bucket with
// CreateBucket (bucket.go).
func (s *Server) BlobConfig(bucket string) blobstore.Config {
	return blobstore.Config{
		Bucket:          bucket,
		Region:          s.region,
		Endpoint:        s.Endpoint(),
		PathStyle:       true,
		AccessKeyID:     s.access,
		SecretAccessKey: s.secret,
	}
}

// Port returns the TCP port, which stays the same across Stop and Start so
// that clients built before keep working.
func (s *Server) Port() int { return s.port }

// Dir returns the server's folder (buckets/ and versitygw.log).
func (s *Server) Dir() string { return s.dir }

// LogPath returns the server log, the first place to look when it misbehaves.
func (s *Server) LogPath() string { return s.logPath }

// Stop stops the server, as an outage: requests fail with connection
// refused until Start. The objects stay.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("locals3: server is closed")
	}
	s.kill()
	return nil
}

// Start starts a stopped server again on the same port and folder. A running
// server is left alone.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("locals3: server is closed")
	}
	if s.running() {
		return nil
	}
	return s.start(ctx)
}

// Close stops the server and removes its folder if Start created it. Calling
// it again does nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.kill()
	return s.removeDir()
}

func (s *Server) running() bool {
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// kill stops the process and waits for it to exit, so that the port is free
// and no write is in flight when kill returns. SIGTERM first (versitygw shuts
// down cleanly on it), SIGKILL if it lingers.
func (s *Server) kill() {
	if !s.running() {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

func (s *Server) removeDir() error {
	if !s.owned {
		return nil
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("locals3: remove %s: %w", s.dir, err)
	}
	return nil
}

// Binary returns the versitygw executable: $VERSITYGW when set, else the one
// pinned in the repository's tools/go.mod, built once into Go's build cache.
func Binary(ctx context.Context) (string, error) {
	p, err := pinnedtools.Tool(ctx, "versitygw", EnvBinary)
	if err != nil {
		return "", fmt.Errorf("locals3: %w", err)
	}
	return p, nil
}

// cleanEnv drops the variables versitygw reads as flag defaults.
func cleanEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "VGW_") || strings.HasPrefix(k, "ROOT_") || k == "LOGFILE" || k == "WEBHOOK" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// reapStale removes temporary server folders whose creating process is gone.
// Errors are ignored: reaping is a courtesy.
func reapStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, tempPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue // being created, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || alive(pid) {
			continue
		}
		_ = os.RemoveAll(d)
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// freePort asks the kernel for a free loopback port. It is free only until
// someone else takes it, which Start handles by retrying.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("locals3: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// logTail returns what the server logged from offset on, bounded.
func logTail(path string, offset int64) string {
	const max = 4 << 10
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no server log: %v)", err)
	}
	if offset > int64(len(b)) {
		offset = 0
	}
	b = b[offset:]
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return strings.TrimSpace(string(b))
}
