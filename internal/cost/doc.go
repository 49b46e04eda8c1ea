package cost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
)

// ErrStale is returned (wrapped) by CheckDoc when docs/deploy.md's block
// is not what the template costs.
var ErrStale = errors.New("docs/deploy.md's cost block is not what the template costs: run `go run ./cmd/webhookdev cost -w` and review the change")

// Generate translates root's template.yaml as SAM would, estimates each
// profile with the default assumptions, and returns the block.
func Generate(ctx context.Context, root string) (string, error) {
	doc, err := samtemplate.Translate(ctx, root, filepath.Join(root, "template.yaml"))
	if err != nil {
		return "", err
	}
	results, err := EstimateProfiles(doc, Profiles, DefaultUsage())
	if err != nil {
		return "", err
	}
	return Markdown(results, DefaultUsage()), nil
}

// CheckDoc compares root's docs/deploy.md block with block.
func CheckDoc(root, block string) error {
	raw, err := os.ReadFile(filepath.Join(root, DocPath))
	if err != nil {
		return err
	}
	have, err := Block(string(raw))
	if err != nil {
		return fmt.Errorf("%s: %w", DocPath, err)
	}
	if have == block {
		return nil
	}
	a, b := strings.Split(have, "\n"), strings.Split(block, "\n")
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Errorf("%w (line %d of the block: the document has %q, the template gives %q)", ErrStale, i+1, x, y)
		}
	}
	return ErrStale
}

// WriteDoc replaces root's docs/deploy.md block with block.
func WriteDoc(root, block string) error {
	path := filepath.Join(root, DocPath)
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := ReplaceBlock(string(raw), block)
	if err != nil {
		return fmt.Errorf("%s: %w", DocPath, err)
	}
	return os.WriteFile(path, []byte(out), 0o644)
}
