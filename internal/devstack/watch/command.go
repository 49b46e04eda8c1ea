package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Command is the Supervisor's Build and Start for a real binary: `go
// build` of Package in Dir into Binary, run with Args.
type Command struct {
	// Dir is the module's folder, where go build and the binary run.
	Dir string
	// Package is what is built ("./cmd/webhookdev").
	Package string
	// Binary is the built file's path.
	Binary string
	// Args are the binary's arguments.
	Args []string
	// Stdout and Stderr receive the binary's output.
	Stdout, Stderr io.Writer
	// StopTimeout is how long Stop waits after Ctrl-C before killing;
	// 0 means 30s (the stack's own shutdown gives its parts 10s each).
	StopTimeout time.Duration
}

// Build builds Binary. The new file is written beside it and renamed
// over it, so a stack still running the old one is never disturbed.
func (c *Command) Build(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(c.Binary), 0o755); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	tmp := c.Binary + ".new"
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, c.Package)
	cmd.Dir = c.Dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", c.Package, err, strings.TrimSpace(out.String()))
	}
	if err := os.Rename(tmp, c.Binary); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	return nil
}

// Start runs Binary with Args. It stays in this process's group, so that
// Ctrl-C at the terminal reaches it as it reaches the supervisor.
func (c *Command) Start(context.Context) (Child, error) {
	cmd := exec.Command(c.Binary, c.Args...)
	cmd.Dir = c.Dir
	cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("watch: start %s: %w", c.Binary, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{}), timeout: c.StopTimeout}
	if p.timeout <= 0 {
		p.timeout = 30 * time.Second
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// process is a started Binary.
type process struct {
	cmd     *exec.Cmd
	done    chan struct{}
	err     error // cmd.Wait's, once done is closed
	timeout time.Duration
	once    sync.Once
}

func (p *process) Done() <-chan struct{} { return p.done }

// Stop interrupts the process as Ctrl-C does, so that it stops its servers
// and its database cleanly, and kills it if it has not exited in time.
func (p *process) Stop() error {
	var err error
	p.once.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		if e := p.cmd.Process.Signal(os.Interrupt); e != nil && !errors.Is(e, os.ErrProcessDone) {
			err = fmt.Errorf("watch: interrupt the stack: %w", e)
		}
		select {
		case <-p.done:
		case <-time.After(p.timeout):
			_ = p.cmd.Process.Kill()
			<-p.done
			err = fmt.Errorf("watch: the stack did not stop within %s after Ctrl-C: killed", p.timeout)
		}
	})
	return err
}
