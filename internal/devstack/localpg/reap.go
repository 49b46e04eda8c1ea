package localpg

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	// tempPrefix names the temporary cluster folders, so that reapStale
	// finds them and people can tell what they are.
	tempPrefix = "localpg-"
	// ownerFile holds the PID of the process that created a temporary
	// cluster.
	ownerFile = "owner.pid"
)

// reapStale stops and removes the temporary clusters under base whose
// creating process is gone. pg_ctl detaches the server from this process, so
// a test binary that dies without calling Close (go test -timeout, Ctrl-C, a
// crash) leaves a server running and a data folder behind; the next Start
// cleans up. Errors are ignored: reaping is a courtesy, and a folder that
// cannot be reaped (another user's, say) is simply left alone.
func reapStale(ctx context.Context, base, bin string, cred *syscall.Credential) {
	dirs, _ := filepath.Glob(filepath.Join(base, tempPrefix+"*"))
	for _, d := range dirs {
		owner, ok := readPID(filepath.Join(d, ownerFile))
		// No owner file: the folder is being created, or is not ours.
		if !ok || alive(owner) {
			continue
		}
		data := filepath.Join(d, "data")
		pidFile := filepath.Join(data, "postmaster.pid")
		if _, err := os.Stat(pidFile); err == nil {
			_, _ = runAs(ctx, bin, cred, d, "pg_ctl", "stop", "-D", data, "-m", "immediate", "-w", "-t", "10")
			// pg_ctl leaves the PID file behind when the server had
			// already died; only a live server keeps the folder.
			if pid, ok := readPID(pidFile); ok && alive(pid) {
				continue
			}
		}
		_ = os.RemoveAll(d)
	}
}

// readPID reads the PID on the first line of path (an owner file, or
// postmaster.pid whose first line is the postmaster's PID).
func readPID(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	return pid, err == nil && pid > 0
}

// alive reports whether a process with that PID exists; EPERM means it does,
// under another user.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
