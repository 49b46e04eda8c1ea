package checkout_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
)

func write(t *testing.T, root string, pid int, env map[string]string) string {
	t.Helper()
	path := filepath.Join(root, checkout.StackFile)
	if err := checkout.WriteStack(path, checkout.Stack{PID: pid, Env: env}); err != nil {
		t.Fatal(err)
	}
	return path
}

func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestFindStack: the nearest file of a live stack is found from below; a
// stale one (dead process) is skipped for one further up.
func TestFindStack(t *testing.T) {
	t.Parallel()
	outer := t.TempDir()
	inner := filepath.Join(outer, "checkout")
	sub := filepath.Join(inner, "cmd", "webhookctl")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := checkout.FindStack(sub); ok || err != nil {
		t.Fatalf("found a stack where none is: %v %v", ok, err)
	}
	livePath := write(t, outer, os.Getpid(), map[string]string{"DATABASE_URL": "postgres://outer"})
	stalePath := write(t, inner, deadPID(t), map[string]string{"DATABASE_URL": "postgres://stale"})
	s, path, ok, err := checkout.FindStack(sub)
	if err != nil {
		t.Fatalf("FindStack: %v", err)
	}
	if !field.Check(t, "FindStack, want the live one, past the stale "+stalePath,
		field.Eq("found", ok, true),
		field.Eq("path", path, livePath),
		field.Eq("DATABASE_URL", s.Env["DATABASE_URL"], "postgres://outer"),
	) {
		t.FailNow()
	}
	if fi, err := os.Stat(livePath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("stack file mode %v, %v; want 0600 (it may hold a password)", fi.Mode(), err)
	}
}

func TestFindStackRefusesAFileItCannotRead(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".local"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, checkout.StackFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := checkout.FindStack(root); ok || err == nil {
		t.Fatalf("a broken file was used: %v %v", ok, err)
	}
}

// TestRemoveStackKeepsANewerStacksFile: a stack removes its own file, not
// the one a second stack wrote since.
func TestRemoveStackKeepsANewerStacksFile(t *testing.T) {
	t.Parallel()
	path := write(t, t.TempDir(), os.Getpid(), nil)
	if err := checkout.RemoveStack(path, os.Getpid()+1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("another process's file was removed: %v", err)
	}
	if err := checkout.RemoveStack(path, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the file is still there: %v", err)
	}
	if err := checkout.RemoveStack(path, os.Getpid()); err != nil {
		t.Fatalf("removing a removed file: %v", err)
	}
}

// TestOverlay: the stack's variables win as a set; its sources file hides
// an inline document that would conflict with it.
func TestOverlay(t *testing.T) {
	t.Parallel()
	s := checkout.Stack{PID: 1, Env: map[string]string{"AWS_REGION": "us-east-1", "WEBHOOK_SOURCES_FILE": "/repo/dev/sources.json"}}
	shell := map[string]string{"AWS_REGION": "eu-west-1", "WEBHOOK_SOURCES": "{}", "LOG_LEVEL": "debug"}
	get := s.Overlay(func(k string) string { return shell[k] })
	if !field.Check(t, "overlay",
		field.Eq("AWS_REGION", get("AWS_REGION"), "us-east-1"),
		field.Eq("WEBHOOK_SOURCES", get("WEBHOOK_SOURCES"), ""),
		field.Eq("WEBHOOK_SOURCES_FILE", get("WEBHOOK_SOURCES_FILE"), "/repo/dev/sources.json"),
		field.Eq("LOG_LEVEL", get("LOG_LEVEL"), "debug"),
	) {
		t.FailNow()
	}
}
