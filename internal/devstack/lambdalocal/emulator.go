// Package lambdalocal runs the project's real Lambda bootstrap binaries on
// this machine under the AWS Lambda Runtime Interface Emulator (RIE), as
// template.yaml describes them: built by the same Makefile targets `sam
// build` calls, fronted by a local HTTP API that turns requests into API
// Gateway v2 events and by local function URLs (AuthType AWS_IAM checked
// by iamlocal). StartStack deploys a whole template as CloudFormation
// would, on local stand-ins of the AWS services the functions call, which
// their real SDK clients reach: S3 (locals3, whose notifications feed
// localevents, EventBridge's default bus with the template's rules),
// Secrets Manager (localsecrets), EventBridge Scheduler (localscheduler)
// and the Lambda Invoke API (localinvoke, which runs every function's
// invocations, whoever makes them); the custom resources are created
// through their functions. So the functions wake each other as the
// deployed stack's do, and nothing runs on a clock. It is `sam local`
// without Docker, so the artefacts that get deployed are the ones tested.
package lambdalocal

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// invokePath is the RIE's invocation endpoint (the Lambda Invoke API path).
const invokePath = "/2015-03-31/functions/function/invocations"

// Build runs `make build-<id>` for each function, as `sam build` does with
// BuildMethod: makefile, but for this machine's architecture, and returns
// the bootstrap path of each. dir receives one folder per function.
func Build(ctx context.Context, repoRoot, dir string, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		artifacts := filepath.Join(dir, id)
		if err := os.MkdirAll(artifacts, 0o755); err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", repoRoot, "build-"+id,
			"ARTIFACTS_DIR="+artifacts, "LAMBDA_GOARCH="+runtime.GOARCH)
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("make build-%s: %w\n%s", id, err, b)
		}
		out[id] = filepath.Join(artifacts, "bootstrap")
	}
	return out, nil
}

// Emulator is one function's bootstrap running under the RIE. The RIE
// serves one invocation at a time, like a Lambda execution environment, so
// Invoke calls are serialised.
type Emulator struct {
	Name    string
	addr    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	mu      sync.Mutex // one invocation at a time
	client  *http.Client
}

// EmulatorOptions configures StartEmulator.
type EmulatorOptions struct {
	Name      string   // function logical id, for logs and AWS_LAMBDA_FUNCTION_NAME
	RIE       string   // path of aws-lambda-rie
	Bootstrap string   // path of the function's bootstrap
	Env       []string // the function's environment ("K=V")
	Timeout   time.Duration
	MemoryMB  int
	LogPath   string // the emulator's and the function's output
}

// StartEmulator starts the RIE with the bootstrap on free loopback ports and
// waits until it accepts invocations.
func StartEmulator(ctx context.Context, o EmulatorOptions) (*Emulator, error) {
	apiPort, err := freePort()
	if err != nil {
		return nil, err
	}
	rtPort, err := freePort()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(o.LogPath)
	if err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MemoryMB <= 0 {
		o.MemoryMB = 128
	}
	e := &Emulator{Name: o.Name, addr: fmt.Sprintf("127.0.0.1:%d", apiPort), logPath: o.LogPath, done: make(chan struct{}),
		client: &http.Client{Timeout: o.Timeout + 10*time.Second}}
	// Two emulators must not share the Runtime API port (default 9001).
	e.cmd = exec.Command(o.RIE,
		"--runtime-interface-emulator-address", e.addr,
		"--runtime-api-address", fmt.Sprintf("127.0.0.1:%d", rtPort),
		o.Bootstrap)
	e.cmd.Dir = filepath.Dir(o.Bootstrap)
	e.cmd.Env = append(baseEnv(), o.Env...)
	e.cmd.Env = append(e.cmd.Env,
		"AWS_LAMBDA_FUNCTION_NAME="+o.Name,
		"AWS_LAMBDA_FUNCTION_TIMEOUT="+strconv.Itoa(int(o.Timeout/time.Second)),
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE="+strconv.Itoa(o.MemoryMB),
	)
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	// Its own process group, so Close can end the bootstrap it spawned too.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := e.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start the runtime emulator for %s: %w", o.Name, err)
	}
	go func() { _ = e.cmd.Wait(); logf.Close(); close(e.done) }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", e.addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return e, nil
		}
		select {
		case <-e.done:
			return nil, fmt.Errorf("runtime emulator for %s exited:\n%s", o.Name, tail(o.LogPath))
		case <-ctx.Done():
			e.Close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.Close()
			return nil, fmt.Errorf("runtime emulator for %s did not listen on %s", o.Name, e.addr)
		}
	}
}

// baseEnv is what a Lambda environment has that the function may rely on,
// without this shell's variables leaking in (a developer's DATABASE_URL
// must not override the function's).
func baseEnv() []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "TZ=UTC", "LANG=C.UTF-8", "AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1"}
	if h := os.Getenv("HOME"); h != "" {
		env = append(env, "HOME="+h)
	}
	return env
}

// Invoke sends payload to the function and returns its response payload.
// A function error (the runtime's error response) is returned as an error.
func (e *Emulator) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+e.addr+invokePath, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", e.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", e.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("invoke %s: emulator answered %d: %s\n%s", e.Name, resp.StatusCode, body, tail(e.logPath))
	}
	if bytes.Contains(body, []byte(`"errorType"`)) && bytes.Contains(body, []byte(`"errorMessage"`)) {
		return body, fmt.Errorf("invoke %s: function error: %s", e.Name, body)
	}
	return body, nil
}

// The emulator logs "INIT REPORT(durationMs: N)" when the init phase of a
// cold start ends (the RIE initialises lazily, on the first invoke, as
// Lambda does on a cold start), and older versions only put "Init
// Duration: N ms" on the first REPORT line; either is read.
var (
	initReport   = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)
	initDuration = regexp.MustCompile(`Init Duration: ([0-9.]+) ms`)
)

// InitDuration returns the duration of the function's first init phase as
// the emulator reported it, once the function has been invoked.
func (e *Emulator) InitDuration() (time.Duration, bool) {
	f, err := os.Open(e.logPath)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := initReport.FindStringSubmatch(sc.Text())
		if m == nil {
			m = initDuration.FindStringSubmatch(sc.Text())
		}
		if m != nil {
			if ms, err := strconv.ParseFloat(m[1], 64); err == nil {
				return time.Duration(ms * float64(time.Millisecond)), true
			}
		}
	}
	return 0, false
}

// Endpoint is the emulator's URL: the Lambda Invoke API's path
// (/2015-03-31/functions/function/invocations) is served there, so an AWS
// SDK Lambda client with this BaseEndpoint (or AWS_ENDPOINT_URL_LAMBDA)
// invokes the function as FunctionName "function".
func (e *Emulator) Endpoint() string { return "http://" + e.addr }

// LogPath is the file holding the emulator's and the function's output.
func (e *Emulator) LogPath() string { return e.logPath }

// Close stops the emulator and its bootstrap: SIGTERM first, as Lambda does
// at shutdown (the functions close their pools on it), then SIGKILL.
func (e *Emulator) Close() error {
	if e.cmd.Process == nil {
		return nil
	}
	_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
		<-e.done
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last lines of a log, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}
