package source

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every JSON configuration example in docs/sources parses: a whole
// document as is, a single source's options wrapped into one.
func TestDocsConfigExamplesParse(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "sources", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/sources pages: %v", err)
	}
	block := regexp.MustCompile("(?s)```json\n(.*?)```")
	var examples int
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range block.FindAllStringSubmatch(string(text), -1) {
			doc := strings.TrimSpace(m[1])
			if strings.HasPrefix(doc, `{"kind"`) {
				doc = `{"sources":{"example":` + doc + `}}`
			}
			if _, err := Parse([]byte(doc)); err != nil {
				t.Errorf("%s: example does not parse: %v\n%s", filepath.Base(page), err, doc)
			}
			examples++
		}
	}
	if examples < 7 {
		t.Fatalf("found %d JSON examples; every kind's page has one", examples)
	}
	for _, kind := range Kinds() {
		if _, err := os.Stat(filepath.Join("..", "..", "docs", "sources", kind+".md")); err != nil {
			t.Errorf("kind %s has no page: %v", kind, err)
		}
	}
}

// dev/sources.json, what `make dev` serves, has a source of every kind.
func TestDevSourcesCoverEveryKind(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "dev", "sources.json"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, name := range set.Names() {
		src, _ := set.Lookup(name)
		have[src.Kind] = true
	}
	for _, kind := range Kinds() {
		if !have[kind] {
			t.Errorf("dev/sources.json has no %s source", kind)
		}
	}
}

// The kinds tables of README.md and docs/sources/README.md, where an
// operator chooses a kind, have a row for every kind.
func TestKindsTablesHaveEveryKind(t *testing.T) {
	t.Parallel()
	rows := map[string]string{ // page: the start of a kind's row
		filepath.Join("..", "..", "README.md"):                    "| `%s` |",
		filepath.Join("..", "..", "docs", "sources", "README.md"): "| [`%s`](%[1]s.md) |",
	}
	for page, row := range rows {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(text), "\n")
		for _, kind := range Kinds() {
			start := fmt.Sprintf(row, kind)
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, start) }) {
				t.Errorf("%s: the kinds table has no row for %s (a line starting %q)", page, kind, start)
			}
		}
	}
}
