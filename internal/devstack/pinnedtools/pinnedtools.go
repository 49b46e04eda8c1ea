// Package pinnedtools finds the repository and the developer tools pinned in
// its tools/go.mod (versitygw, the Lambda Runtime Interface Emulator,
// gotestsum), building them into Go's build cache on first use, so tests and
// the local stacks run the exact pinned versions with no install step.
package pinnedtools

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// RepoRoot returns the repository's root: the nearest folder at or above the
// working directory holding both go.mod and tools/go.mod. Tests run in their
// package's folder and the make targets in the root, so both find it.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if exists(filepath.Join(dir, "go.mod")) && exists(filepath.Join(dir, "tools", "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no repository root (go.mod and tools/go.mod) above the working directory")
		}
		dir = parent
	}
}

var (
	mu    sync.Mutex
	built = map[string]string{}
)

// Tool returns the path of the pinned tool named name (the last element of
// its package path, as `go tool` names it): the file named by the
// environment variable env when that is set, else `go tool -n name` from
// tools/go.mod, which builds it once into Go's build cache (later calls,
// and later processes, are cache hits).
func Tool(ctx context.Context, name, env string) (string, error) {
	if env != "" {
		if p := os.Getenv(env); p != "" {
			if !exists(p) {
				return "", fmt.Errorf("%s=%s: no such file", env, p)
			}
			return p, nil
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if p, ok := built[name]; ok {
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	// A first build can take a minute on 2 cores; the deadline only guards
	// against a hung toolchain.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "tool", "-modfile="+filepath.Join(root, "tools", "go.mod"), "-n", name)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s from tools/go.mod (run `make setup`): %w\n%s", name, err, strings.TrimSpace(stderr.String()))
	}
	p := strings.TrimSpace(stdout.String())
	if !exists(p) {
		return "", fmt.Errorf("go tool -n %s printed %q, which does not exist", name, p)
	}
	built[name] = p
	return p, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
