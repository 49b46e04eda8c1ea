package samtemplate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// ErrNoTranslator is returned (wrapped) by Translate when no Python with the
// SAM translator is found (make setup installs cfn-lint, which brings it).
var ErrNoTranslator = errors.New("the SAM translator is not installed (make setup installs cfn-lint, which brings it)")

// TranslateScript is the script, relative to the repository root, that
// prints the translated template.
var TranslateScript = filepath.Join("scripts", "sam-translate.py")

// EnvPython names the Python interpreter that has cfn-lint (and so the SAM
// translator), when it is not python3 or cfn-lint's own.
const EnvPython = "SAM_TRANSLATE_PYTHON"

// Translate returns the CloudFormation template AWS SAM makes of the SAM
// template at path (what `sam deploy` hands CloudFormation: the functions'
// roles, permissions, versions and event rules SAM generates), by running
// the SAM translator cfn-lint ships (scripts/sam-translate.py). Parameters
// and conditions are left for NewStack.
//
// The interpreter is the first of $SAM_TRANSLATE_PYTHON, python3, the one
// the cfn-lint on PATH runs with, and the one make setup installs cfn-lint
// into (scripts/setup-cfn-lint.sh) that has the translator.
func Translate(ctx context.Context, repoRoot, path string) (map[string]any, error) {
	var missing []string
	for _, python := range pythons() {
		cmd := exec.CommandContext(ctx, python, filepath.Join(repoRoot, TranslateScript), path)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit) && exit.ExitCode() == 3:
			missing = append(missing, python+": "+string(bytes.TrimSpace(stderr.Bytes())))
			continue
		case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return nil, fmt.Errorf("translate %s with %s: %w: %s", path, python, err, bytes.TrimSpace(stderr.Bytes()))
		}
		var doc map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
			return nil, fmt.Errorf("translate %s: the translator's output is not JSON: %w", path, err)
		}
		return doc, nil
	}
	if len(missing) == 0 {
		missing = append(missing, "no python3 found")
	}
	return nil, fmt.Errorf("%w: %s", ErrNoTranslator, strings.Join(missing, "; "))
}

// SetupVenv is where scripts/setup-cfn-lint.sh installs cfn-lint when the
// machine has none: a virtual environment under the user's data folder.
func SetupVenv() string {
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(base, "webhook-inbox", "cfn-lint")
}

func pythons() []string {
	candidates := []string{os.Getenv(EnvPython)}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	if lint, err := exec.LookPath("cfn-lint"); err == nil {
		candidates = append(candidates, shebang(lint))
	}
	candidates = append(candidates, filepath.Join(SetupVenv(), "bin", "python"))
	var out []string
	for _, p := range candidates {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// shebang returns the interpreter a Python script names on its first line
// ("" for anything else, such as a pyenv shim).
func shebang(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if !strings.HasPrefix(line, "#!") || len(fields) == 0 {
		return ""
	}
	if filepath.Base(fields[0]) == "env" && len(fields) > 1 {
		return fields[1]
	}
	if strings.Contains(filepath.Base(fields[0]), "python") {
		return fields[0]
	}
	return ""
}
