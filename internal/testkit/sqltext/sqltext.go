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
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/modfile"
)

// Storage returns the text of shared/storage's query name (its
// `-- name: <name> :kind` line in shared/storage/queries), as sqlc wrote it
// into the generated package.
func Storage(name string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("query %s: %w", name, err)
	}
	return Find(filepath.Join(root, "shared", "storage", "internal", "dbsqlc"), name)
}

// module is the main module's path, whose root holds shared/.
const module = "github.com/webhook-inbox/webhook-inbox"

// moduleRoot finds the main module's folder from the working directory (a
// test's is its package's, the bench's is bench/, a module of its own):
// the nearest folder above whose go.mod declares module. The source file's
// own path would not do: a -trimpath build records none.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modfile.ModulePath(data) == module {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no folder above the working directory holds the go.mod of %s", module)
		}
		dir = parent
	}
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
