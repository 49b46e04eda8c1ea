package main

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/cost"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
)

// make cost prints the block and passes while docs/deploy.md holds it.
func TestCostPrintsTheBlockTheDocHolds(t *testing.T) {
	tier.Heavy(t, "runs the SAM translator; internal/cost checks the block under -short")
	out, err := run(t, nil, "cost")
	if errors.Is(err, samtemplate.ErrNoTranslator) && os.Getenv("CI") != "true" {
		t.Skipf("%v: cost needs it", err)
	}
	if err != nil {
		t.Fatalf("cost: %v\n%s", err, out)
	}
	for _, want := range []string{cost.Begin, "#### standard", "| **total** |", cost.End} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
