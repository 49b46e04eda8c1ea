package cost

import (
	"fmt"
	"maps"
)

// ExampleSourcesSecret stands for the sources secret every deployment
// names (SourcesSecretArn has no default).
const ExampleSourcesSecret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:inbox-sources-AbCdEf"

// Profile is one way to deploy the stack, as `make cost` prices it.
type Profile struct {
	Name   string
	Params map[string]string
	// IdleTarget is the most its idle month may cost, in dollars, without
	// any free tier (0: no target).
	IdleTarget float64
}

// Profiles are the deployment profiles, in create mode: the template's
// Profile parameter chooses among them. A template that does not declare
// Profile yet is evaluated without it (Estimate.Ignored says so), so every
// profile is then today's single shape.
var Profiles = []Profile{
	{Name: "economy", Params: createParams("economy"), IdleTarget: 8},
	{Name: "standard", Params: createParams("standard"), IdleTarget: 25},
	{Name: "high-volume", Params: createParams("high-volume")},
}

func createParams(profile string) map[string]string {
	return map[string]string{"Profile": profile, "DatabaseMode": "create", "SourcesSecretArn": ExampleSourcesSecret}
}

// Result is one profile's estimate.
type Result struct {
	Profile  Profile
	Estimate *Estimate
	// SameAs names an earlier profile the template evaluates to the same
	// stack for (the parameters that tell them apart are not declared).
	SameAs string
	params map[string]string // the parameters the template declares
}

// EstimateProfiles computes each profile's estimate of the translated
// template doc.
func EstimateProfiles(doc map[string]any, profiles []Profile, u Usage) ([]Result, error) {
	var out []Result
	for _, p := range profiles {
		est, err := Compute(doc, p.Params, u)
		if err != nil {
			return nil, fmt.Errorf("profile %s: %w", p.Name, err)
		}
		r := Result{Profile: p, Estimate: est, params: maps.Clone(p.Params)}
		for _, name := range est.Ignored {
			delete(r.params, name)
		}
		for _, prev := range out {
			if prev.SameAs == "" && maps.Equal(prev.params, r.params) {
				r.SameAs = prev.Profile.Name
				break
			}
		}
		out = append(out, r)
	}
	return out, nil
}
