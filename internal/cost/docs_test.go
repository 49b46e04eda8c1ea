package cost_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/cost"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
)

var repoRoot = filepath.Join("..", "..")

var (
	translateOnce sync.Once
	translatedDoc map[string]any
	translateErr  error
)

// translated returns the template SAM hands CloudFormation. Without the
// SAM translator the checks skip, saying so, except in CI (CI=true), where
// a skip would hide a stale docs/deploy.md.
func translated(t *testing.T) map[string]any {
	t.Helper()
	translateOnce.Do(func() {
		translatedDoc, translateErr = samtemplate.Translate(context.Background(), repoRoot, filepath.Join(repoRoot, "template.yaml"))
	})
	if errors.Is(translateErr, samtemplate.ErrNoTranslator) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v; CI must check the cost block", translateErr)
		}
		t.Skipf("%v: the cost of the real template needs it", translateErr)
	}
	if translateErr != nil {
		t.Fatal(translateErr)
	}
	return translatedDoc
}

func profiles(t *testing.T) []cost.Result {
	t.Helper()
	results, err := cost.EstimateProfiles(translated(t), cost.Profiles, cost.DefaultUsage())
	if err != nil {
		t.Fatal(err)
	}
	return results
}

// The block in docs/deploy.md is what make cost computes from the
// template: a change to the template, the prices or the assumptions that
// moves a figure fails here until the block is regenerated.
func TestDeployDocAgreesWithTheTemplatesCost(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, cost.DocPath))
	if err != nil {
		t.Fatal(err)
	}
	got, err := cost.Block(string(raw))
	if err != nil {
		t.Fatalf("%s: %v", cost.DocPath, err)
	}
	if want := cost.Markdown(profiles(t), cost.DefaultUsage()); got != want {
		t.Errorf("%s's cost block is stale: run `go run ./cmd/webhookdev cost -w` (make cost shows the difference)", cost.DocPath)
	}
}

// declaresProfiles skips a check of the profiles until the template has
// its Profile parameter.
func declaresProfiles(t *testing.T) {
	t.Helper()
	params, _ := translated(t)["Parameters"].(map[string]any)
	if _, ok := params["Profile"]; !ok {
		t.Skip("the template declares no Profile parameter yet")
	}
}

func TestNoProfilePollsAtIdle(t *testing.T) {
	t.Parallel()
	declaresProfiles(t)
	for _, r := range profiles(t) {
		if len(r.Estimate.Polls) > 0 {
			t.Errorf("profile %s polls at idle: %+v", r.Profile.Name, r.Estimate.Polls)
		}
	}
}

func TestProfilesMeetTheirIdleTargets(t *testing.T) {
	t.Parallel()
	declaresProfiles(t)
	for _, r := range profiles(t) {
		if usd, _ := cost.Totals(r.Estimate.Idle); r.Profile.IdleTarget > 0 && usd > r.Profile.IdleTarget {
			t.Errorf("profile %s costs $%.2f a month at idle, over its target of $%.2f", r.Profile.Name, usd, r.Profile.IdleTarget)
		}
	}
}

// Today's template is priced whole in every profile: every resource it
// creates has a rule or is known to be free.
func TestEveryResourceOfTheTemplateIsPriced(t *testing.T) {
	t.Parallel()
	for _, r := range profiles(t) {
		if total, _ := cost.Totals(r.Estimate.Idle); total <= 0 {
			t.Errorf("profile %s: idle total %v", r.Profile.Name, total)
		}
	}
}

// Every way to deploy today's template prices: none creates a resource
// without a rule.
func TestEveryWayToDeployIsPriced(t *testing.T) {
	t.Parallel()
	const admin = "arn:aws:secretsmanager:us-east-1:123456789012:secret:rds!cluster-0abc-AbCdEf"
	existing := map[string]string{"DatabaseMode": "existing", "DatabaseHost": "db.example.internal", "DatabaseAdminSecretArn": admin}
	vpc := map[string]string{"SubnetIds": "subnet-0a1b2c3d,subnet-0e5f6a7b", "SecurityGroupIds": "sg-0db0000001", "VpcId": "vpc-0123abcd", "RouteTableIds": "rtb-0a0a0a0a,rtb-0b0b0b0b"}
	for name, params := range map[string][]map[string]string{
		"create, iam":                        {{"DatabaseAuth": "iam"}},
		"create, paused when idle":           {{"Profile": "high-volume", "DatabaseMinCapacity": "0", "DatabaseMaxCapacity": "2"}},
		"existing, no VPC":                   {existing},
		"existing, VPC with endpoints":       {existing, vpc},
		"existing, VPC with NAT, iam direct": {existing, vpc, {"VpcEndpoints": "none", "RouteTableIds": "", "DatabaseAuth": "iam", "DatabaseResourceId": "db-ABCDEFGHIJKL"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := map[string]string{"SourcesSecretArn": cost.ExampleSourcesSecret}
			for _, m := range params {
				for k, v := range m {
					p[k] = v
				}
			}
			est, err := cost.Compute(translated(t), p, cost.DefaultUsage())
			if err != nil {
				t.Fatal(err)
			}
			if usd, _ := cost.Totals(est.Idle); usd <= 0 {
				t.Errorf("idle total %v", usd)
			}
		})
	}
}
