package watch_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/watch"
)

// fakeChild is a stack that runs until stopped.
type fakeChild struct {
	id      int
	done    chan struct{}
	once    sync.Once
	stopped chan int
}

func (c *fakeChild) Stop() error {
	c.once.Do(func() { close(c.done); c.stopped <- c.id })
	return nil
}
func (c *fakeChild) Done() <-chan struct{} { return c.done }

// lockedBuffer is the supervisor's output, read while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// env is a module in a temporary folder under a Supervisor whose polls the
// test steps (tick), whose builds fail while buildErr is set, and whose
// starts and stops are reported on channels.
type env struct {
	root     string
	tick     chan time.Time
	started  chan int
	stopped  chan int
	built    chan error
	mu       sync.Mutex
	buildErr error
	out      lockedBuffer
	done     chan error
	cancel   context.CancelFunc
}

func setup(t *testing.T) *env {
	t.Helper()
	e := &env{
		root: t.TempDir(), tick: make(chan time.Time),
		started: make(chan int, 10), stopped: make(chan int, 10), built: make(chan error, 10), done: make(chan error, 1),
	}
	e.write(t, "go.mod", "module example.com/m\n")
	e.write(t, "main.go", "package main\n")
	e.write(t, "dev/sources.json", "{}")
	n := 0
	s := &watch.Supervisor{
		Files: watch.Files{Root: e.root, Extra: []string{"dev/sources.json"}},
		After: func(time.Duration) <-chan time.Time { return e.tick },
		Build: func(context.Context) error {
			e.mu.Lock()
			err := e.buildErr
			e.mu.Unlock()
			e.built <- err
			return err
		},
		Start: func(context.Context) (watch.Child, error) {
			n++
			e.started <- n
			return &fakeChild{id: n, done: make(chan struct{}), stopped: e.stopped}, nil
		},
		Out: &e.out,
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() { e.done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			t.Error("the supervisor did not return")
		}
	})
	e.expect(t, e.built, nil, "first build")
	e.expect(t, e.started, 1, "first start")
	return e
}

// write writes a file of the module, with a modification time of its own
// so that the change shows whatever the file system's granularity.
var clock = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
var clockMu sync.Mutex

func (e *env) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(e.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	clockMu.Lock()
	clock = clock.Add(time.Second)
	at := clock
	clockMu.Unlock()
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
}

// poll lets the supervisor scan once.
func (e *env) poll(t *testing.T) {
	t.Helper()
	select {
	case e.tick <- time.Now():
	case <-time.After(10 * time.Second):
		t.Fatalf("the supervisor does not poll\n%s", e.out.String())
	}
}

func expectOn[T comparable](t *testing.T, ch chan T, want T, what string, out func() string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("%s: got %v, want %v\n%s", what, got, want, out())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing happened\n%s", what, out())
	}
}

func (e *env) expect(t *testing.T, ch any, want any, what string) {
	t.Helper()
	switch ch := ch.(type) {
	case chan int:
		expectOn(t, ch, want.(int), what, e.out.String)
	case chan error:
		var w error
		if want != nil {
			w = want.(error)
		}
		expectOn(t, ch, w, what, e.out.String)
	}
}

// quiet checks that nothing was started or stopped.
func (e *env) quiet(t *testing.T) {
	t.Helper()
	select {
	case n := <-e.started:
		t.Fatalf("stack %d started unasked\n%s", n, e.out.String())
	case n := <-e.stopped:
		t.Fatalf("stack %d stopped unasked\n%s", n, e.out.String())
	default:
	}
}

// TestChangeRestarts: a saved .go file rebuilds and replaces the stack,
// once the burst of writes has settled; polls without a change do nothing.
func TestChangeRestarts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.poll(t)
	e.poll(t)
	e.quiet(t)

	e.write(t, "shared/handlers/paid/paid.go", "package paid\n")
	e.poll(t) // sees the change
	e.poll(t) // settled
	e.expect(t, e.built, nil, "the rebuild")
	e.expect(t, e.stopped, 1, "the old stack's stop")
	e.expect(t, e.started, 2, "the new stack")
	if !strings.Contains(e.out.String(), "watch: shared/handlers/paid/paid.go changed: building") {
		t.Errorf("the change is not named:\n%s", e.out.String())
	}

	// The sources document restarts it too.
	e.write(t, "dev/sources.json", `{"sources":{}}`)
	e.poll(t)
	e.poll(t)
	e.expect(t, e.built, nil, "the rebuild for the sources")
	e.expect(t, e.stopped, 2, "the stop for the sources")
	e.expect(t, e.started, 3, "the start for the sources")

	e.cancel()
	e.expect(t, e.stopped, 3, "the stop at Ctrl-C")
}

// TestBuildErrorKeepsTheStack: code that does not compile is said, and
// the running stack stays until the code compiles again.
func TestBuildErrorKeepsTheStack(t *testing.T) {
	t.Parallel()
	e := setup(t)
	broken := errors.New("go build ./cmd/webhookdev: exit status 1\nshared/handlers/paid/paid.go:3:1: syntax error")
	e.mu.Lock()
	e.buildErr = broken
	e.mu.Unlock()
	e.write(t, "shared/handlers/paid/paid.go", "package paid\nfunc {\n")
	e.poll(t)
	e.poll(t)
	e.expect(t, e.built, broken, "the failed build")
	e.poll(t)
	e.quiet(t)
	if out := e.out.String(); !strings.Contains(out, "the build failed (the running stack stays until it compiles)") || !strings.Contains(out, "syntax error") {
		t.Errorf("the build's failure is not said:\n%s", out)
	}

	e.mu.Lock()
	e.buildErr = nil
	e.mu.Unlock()
	e.write(t, "shared/handlers/paid/paid.go", "package paid\n")
	e.poll(t)
	e.poll(t)
	e.expect(t, e.built, nil, "the fixed build")
	e.expect(t, e.stopped, 1, "the old stack's stop")
	e.expect(t, e.started, 2, "the new stack")
}

// TestScanWatchesWhatMakesTheBinary: .go files but tests, .sql, go.mod
// and the extra files; not tests, testdata, hidden folders or nested
// modules.
func TestScanWatchesWhatMakesTheBinary(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, f := range []string{
		"go.mod", "go.sum", "main.go", "shared/a/a.go", "shared/a/a_test.go", "shared/a/testdata/x.go",
		"shared/m/migrations/00001_x.sql", ".local/gen.go", ".git/x.go", "tools/go.mod", "tools/t.go",
		"README.md", "dev/sources.json",
	} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := watch.Files{Root: root, Extra: []string{"dev/sources.json", "dev/missing.json"}}.Scan()
	if err != nil {
		t.Fatal(err)
	}
	got := watch.Changed(nil, snap)
	want := []string{"dev/sources.json", "go.mod", "go.sum", "main.go", "shared/a/a.go", "shared/m/migrations/00001_x.sql"}
	if !slices.Equal(got, want) {
		t.Errorf("watched %v, want %v", got, want)
	}
	if err := os.Remove(filepath.Join(root, "shared/a/a.go")); err != nil {
		t.Fatal(err)
	}
	after, err := watch.Files{Root: root}.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if got := watch.Changed(snap, after); !slices.Contains(got, "shared/a/a.go") {
		t.Errorf("a removed file is no change: %v", got)
	}
}
