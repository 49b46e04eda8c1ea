package devstack_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

func devSources(t *testing.T) *source.Set {
	t.Helper()
	sources, _, err := checkout.Sources(func(k string) string {
		if k == "WEBHOOK_SOURCES_FILE" {
			return filepath.Join("..", "..", "dev", "sources.json")
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	return sources
}

// TestPrintSamplesCompact: at start-up, one `webhookdev send` line per
// source with its kind's sample file (and --type where the kind sends
// the type in a header, --url when the receiver is elsewhere), a line
// before and one after; the signed curls only on request.
func TestPrintSamplesCompact(t *testing.T) {
	t.Parallel()
	sources := devSources(t)
	var out bytes.Buffer
	devstack.PrintSamples(&out, sources, devstack.DefaultBase, false)
	got := out.String()
	if n, want := strings.Count(got, "\n"), len(sources.Names())+2; n != want {
		t.Errorf("%d lines, want %d:\n%s", n, want, got)
	}
	for _, line := range []string{
		"  go run ./cmd/webhookdev send stripe dev/samples/stripe.json\n",
		"  go run ./cmd/webhookdev send github dev/samples/github.json --type ",
		"  go run ./cmd/webhookdev send square dev/samples/square.json\n",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("no %q in:\n%s", line, got)
		}
	}
	if strings.Contains(got, "curl -sS") {
		t.Errorf("a curl in the compact form:\n%s", got)
	}

	out.Reset()
	devstack.PrintSamples(&out, sources, "http://127.0.0.1:3100", false)
	if !strings.Contains(out.String(), "send stripe dev/samples/stripe.json --url http://127.0.0.1:3100\n") {
		t.Errorf("no --url for another receiver:\n%s", out.String())
	}

	out.Reset()
	devstack.PrintSamples(&out, sources, devstack.DefaultBase, true)
	if n := strings.Count(out.String(), "curl -sS -X POST"); n != len(sources.Names()) {
		t.Errorf("--samples: %d curls, want one per source:\n%s", n, out.String())
	}
}
