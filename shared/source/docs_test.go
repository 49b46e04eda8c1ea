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

// failedDeliveryHeading heads, on every kind's page, what the sender does
// with a delivery webhook-inbox could not store: retries, their window,
// redelivery by hand. The receiver's promise ends at its 503; whether the
// event ever arrives is the sender's, and must be written down.
const failedDeliveryHeading = "## When a delivery fails"

// throttleHeading is the section of docs/sources/README.md that every
// failed-delivery section refers to.
const throttleHeading = "## What a throttle looks like to a sender"

// Every kind's page says what its sender does with a failed delivery,
// cites the sender's own documentation, is dated, and refers to what a
// throttle looks like to a sender.
func TestDocsEveryKindSaysWhenADeliveryFails(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "docs", "sources")
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(readme), "\n"), throttleHeading) {
		t.Errorf("docs/sources/README.md has no %q section", throttleHeading)
	}
	for _, kind := range Kinds() {
		text, err := os.ReadFile(filepath.Join(dir, kind+".md"))
		if err != nil {
			t.Errorf("kind %s has no page: %v", kind, err)
			continue
		}
		for _, problem := range failedDeliveryProblems(string(text)) {
			t.Errorf("docs/sources/%s.md: %s", kind, problem)
		}
	}
}

// The check itself: it must fail a page that lacks the section or any part
// of it, and pass one that has them all.
func TestFailedDeliveryProblems(t *testing.T) {
	t.Parallel()
	const (
		intro    = "# `x`: X\n\n## What is verified\n\nText with [a link](https://example.com/verify).\n\n"
		good     = "## When a delivery fails\n\nChecked on 2026-12-02. X retries for 3 days ([X's docs](https://x.example/retries)); see [throttles](README.md#what-a-throttle-looks-like-to-a-sender).\n\n"
		outro    = "## Test delivery\n\nRun it.\n"
		noLink   = "## When a delivery fails\n\nChecked on 2026-12-02. X retries (see [throttles](README.md#what-a-throttle-looks-like-to-a-sender)).\n\n"
		httpOnly = "## When a delivery fails\n\nChecked on 2026-12-02. [X's docs](http://x.example/retries), [throttles](README.md#what-a-throttle-looks-like-to-a-sender).\n\n"
		noDate   = "## When a delivery fails\n\nX retries ([X's docs](https://x.example/retries)); [throttles](README.md#what-a-throttle-looks-like-to-a-sender).\n\n"
		noRef    = "## When a delivery fails\n\nChecked on 2026-12-02. X retries ([X's docs](https://x.example/retries)).\n\n"
	)
	cases := []struct {
		name, page, want string
	}{
		{"complete", intro + good + outro, ""},
		{"complete, last section", intro + good, ""},
		{"no section", intro + outro, "no \"## When a delivery fails\" section"},
		{"a deeper heading is not the section", intro + "#" + good + outro, "no \"## When a delivery fails\" section"},
		{"repeated", intro + good + good + outro, "2 \"## When a delivery fails\" sections"},
		{"no https link in the section", intro + noLink + outro, "cites no https link"},
		{"only an http link", intro + httpOnly + outro, "cites no https link"},
		{"a link in another section does not count", intro + noLink + "## More\n\n[X](https://x.example/retries)\n", "cites no https link"},
		{"undated", intro + noDate + outro, "is not dated"},
		{"no reference to throttles", intro + noRef + outro, "does not refer to README.md#what-a-throttle-looks-like-to-a-sender"},
	}
	for _, c := range cases {
		problems := failedDeliveryProblems(c.page)
		switch {
		case c.want == "" && len(problems) > 0:
			t.Errorf("%s: unexpected problems %q", c.name, problems)
		case c.want != "" && !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, c.want) }):
			t.Errorf("%s: problems %q do not include %q", c.name, problems, c.want)
		}
	}
}

var (
	httpsLink   = regexp.MustCompile(`\]\(https://[^)\s]+\)`)
	checkedOn   = regexp.MustCompile(`Checked on \d{4}-\d{2}-\d{2}`)
	throttleRef = "README.md#what-a-throttle-looks-like-to-a-sender"
)

// failedDeliveryProblems says what a kind's page lacks in its failed-delivery
// section; nil when nothing.
func failedDeliveryProblems(page string) []string {
	lines := strings.Split(page, "\n")
	var starts []int
	for i, l := range lines {
		if strings.TrimRight(l, " ") == failedDeliveryHeading {
			starts = append(starts, i)
		}
	}
	switch len(starts) {
	case 0:
		return []string{fmt.Sprintf("no %q section", failedDeliveryHeading)}
	case 1:
	default:
		return []string{fmt.Sprintf("%d %q sections; one is the rule", len(starts), failedDeliveryHeading)}
	}
	end := len(lines)
	for i := starts[0] + 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "## ") || strings.HasPrefix(lines[i], "# ") {
			end = i
			break
		}
	}
	section := strings.Join(lines[starts[0]+1:end], "\n")
	var problems []string
	if !httpsLink.MatchString(section) {
		problems = append(problems, fmt.Sprintf("%q cites no https link to the sender's documentation", failedDeliveryHeading))
	}
	if !checkedOn.MatchString(section) {
		problems = append(problems, fmt.Sprintf("%q is not dated (\"Checked on YYYY-MM-DD\")", failedDeliveryHeading))
	}
	if !strings.Contains(section, throttleRef) {
		problems = append(problems, fmt.Sprintf("%q does not refer to %s", failedDeliveryHeading, throttleRef))
	}
	return problems
}
