// Package sqltext reads, for tests and the bench, the text of a storage
// query exactly as sqlc generated it for shared/storage (its parameters
// numbered $1, $2, ...): what the product sends, without the product
// exporting it. It reads the generated source files from the repository,
// so it works where the source tree is, as tests and `make bench` run.
package sqltext

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/pinnedtools"
)

// Storage returns the text of shared/storage's query name (its
// `-- name: <name> :kind` line in shared/storage/queries), as sqlc wrote it
// into the generated package.
func Storage(name string) (string, error) {
	root, err := pinnedtools.RepoRoot()
	if err != nil {
		return "", fmt.Errorf("query %s: %w", name, err)
	}
	return Find(filepath.Join(root, "shared", "storage", "internal", "dbsqlc"), name)
}

// Find returns the text of the query name among the string constants of the
// generated Go files in dir: the one that starts with its `-- name:` line.
func Find(dir, name string) (string, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.sql.go"))
	if err != nil {
		return "", fmt.Errorf("query %s: %w", name, err)
	}
	if len(files) == 0 {
		return "", fmt.Errorf("query %s: no generated queries in %s", name, dir)
	}
	prefix := "-- name: " + name + " :"
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return "", fmt.Errorf("query %s: %w", name, err)
		}
		var found string
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || found != "" {
				return found == ""
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(s, prefix) {
				found = s
			}
			return true
		})
		if found != "" {
			return found, nil
		}
	}
	return "", fmt.Errorf("query %s: not among the generated queries in %s", name, dir)
}
