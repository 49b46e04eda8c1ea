package checkout

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// StackFile is where a running `webhookdev dev` describes itself, relative
// to the repository root.
var StackFile = filepath.Join(".local", "devstack.json")

// Stack is what a running dev stack tells the operator's tools: its
// process, and the environment an operator command needs to reach it (the
// database, the archive's bucket and S3 server, the sources file), since
// the local database listens on a port picked at random.
type Stack struct {
	PID int               `json:"pid"`
	Env map[string]string `json:"env"`
	// Operator is the stack's operator API, when it serves one.
	Operator *OperatorAPI `json:"operator,omitempty"`
}

// OperatorAPI is the dev stack's operator API: the stack's two function
// URLs, served locally behind a stand-in for Lambda's IAM check, and the
// credentials of the local identities it admits (fresh at each start).
type OperatorAPI struct {
	// URL acts; ReadURL only reads.
	URL     string `json:"url"`
	ReadURL string `json:"read_url"`
	// Region is what requests are signed for.
	Region string `json:"region"`
	// Identities are the local principals, by name: "operator" may act,
	// "viewer" may only read.
	Identities map[string]Credentials `json:"identities"`
}

// Credentials are one local principal's temporary credentials and ARN.
type Credentials struct {
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	SessionToken    string `json:"session_token"`
	ARN             string `json:"arn"`
}

// WriteStack writes s to path. The file is readable by its owner only: a
// DATABASE_URL the developer set may hold a password. It is replaced
// whole (a temporary file renamed), so a reader never sees half of it.
func WriteStack(path string, s Stack) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write the dev stack's file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".devstack-*.json")
	if err != nil {
		return fmt.Errorf("write the dev stack's file: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write the dev stack's file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write the dev stack's file: %w", err)
	}
	return nil
}

// RemoveStack removes the file at path if it still describes process pid:
// a second dev stack started since then owns it now.
func RemoveStack(path string, pid int) error {
	s, err := readStack(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil || s.PID != pid {
		return err
	}
	return os.Remove(path)
}

// FindStack looks for StackFile in dir and then in each parent folder, and
// returns the first one whose process is alive, with its path. A file left
// by a dev stack that could not remove it (killed, or the machine
// restarted) names a dead process and is skipped. ok is false when no
// running stack was found.
func FindStack(dir string) (s Stack, path string, ok bool, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return Stack{}, "", false, err
	}
	for {
		path = filepath.Join(dir, StackFile)
		s, err := readStack(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return Stack{}, path, false, err
		case alive(s.PID):
			return s, path, true, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return Stack{}, "", false, nil
		}
		dir = parent
	}
}

// Overlay returns getenv with the stack's variables in front. They win
// over the caller's environment because they describe one running stack
// together: a shell's AWS_REGION, say, would not reach the local S3. The
// stack's sources file also hides a WEBHOOK_SOURCES, which would otherwise
// conflict with it.
func (s Stack) Overlay(getenv func(string) string) func(string) string {
	return func(k string) string {
		if v, ok := s.Env[k]; ok {
			return v
		}
		if k == source.EnvSources && s.Env[source.EnvSourcesFile] != "" {
			return ""
		}
		return getenv(k)
	}
}

func readStack(path string) (Stack, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Stack{}, err
	}
	var s Stack
	if err := json.Unmarshal(b, &s); err != nil || s.PID <= 0 {
		return Stack{}, fmt.Errorf("%s is not a dev stack's file (delete it): %v", path, err)
	}
	return s, nil
}

// alive reports whether process pid exists: signal 0 checks without
// sending anything, and EPERM means it exists under another user.
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}
