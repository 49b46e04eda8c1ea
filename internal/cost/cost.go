// Package cost computes what a deployed stack costs a month from the
// template CloudFormation gets (SAM's translation, evaluated for one set
// of parameters by internal/devstack/samtemplate): the billable inventory
// is read from the resources really created (database instances and
// clusters, proxies, interface endpoints, secrets, alarms, functions,
// schedules, ...), priced with the dated unit-price table (Prices) under
// stated usage assumptions (Usage), at idle and per million webhooks a
// month. A resource type it does not know fails the estimate, so a new
// resource is never silently free; the types known to cost nothing are
// listed (freeTypes). It also reports what invokes a function on a
// schedule, which costs money and keeps the database awake while nothing
// arrives (Estimate.Polls). `webhookdev cost` (make cost) prints the
// estimate and keeps docs/deploy.md's copy of it current.
package cost

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
)

// Line is one billed item of an estimate.
type Line struct {
	Item      string
	Resources []string // the logical ids it comes from
	Usage     string   // the arithmetic, in words
	// Price is the key of the unit price; "" for a line that bills
	// nothing, its Usage saying why.
	Price    string
	Quantity float64 // in the price's unit
	USD      float64 // Quantity at the price, without any free tier
	// FreeUSD is USD after the always-free tier, which every line of the
	// same price shares, idle lines first.
	FreeUSD float64
}

// Poll is something in the template that invokes a function on a
// recurring schedule: it bills invocations, and keeps the database awake,
// while nothing arrives.
type Poll struct {
	Resource   string // the rule or schedule
	Expression string // rate(...)
	Target     string // the function's logical id
	Period     time.Duration
	PerMonth   float64
}

// Estimate is a stack's monthly cost.
type Estimate struct {
	Idle       []Line // a month with no webhooks
	PerMillion []Line // what one million webhooks a month add
	Polls      []Poll
	// Ignored names the parameters given that the template does not
	// declare (a profile written for a newer template).
	Ignored []string
	// Wake says how a webhook reaches the processor: "invoke", "s3" (a
	// wake marker's event), "poll" (scheduled runs) or "none".
	Wake string
}

// Totals returns the sum of lines, without and with the free tiers.
func Totals(lines []Line) (usd, free float64) {
	for _, l := range lines {
		usd += l.USD
		free += l.FreeUSD
	}
	return usd, free
}

// Compute estimates the stack doc (a translated template, as
// samtemplate.Translate returns it) deployed with params. Parameters the
// template does not declare are left out and listed in Ignored; values
// CloudFormation would refuse, or a rule they break, are errors.
func Compute(doc map[string]any, params map[string]string, u Usage) (*Estimate, error) {
	est := &Estimate{}
	declared, _ := doc["Parameters"].(map[string]any)
	kept := map[string]string{}
	for k, v := range params {
		if _, ok := declared[k]; ok {
			kept[k] = v
		} else {
			est.Ignored = append(est.Ignored, k)
		}
	}
	sort.Strings(est.Ignored)
	st, err := samtemplate.NewStack(doc, kept)
	if err != nil {
		return nil, fmt.Errorf("evaluate the template: %w", err)
	}
	if failed, err := st.FailedRules(); err != nil || len(failed) > 0 {
		return nil, errors.Join(err, fmt.Errorf("CloudFormation would refuse these parameters: %s", strings.Join(failed, "; ")))
	}
	res, err := st.Resources()
	if err != nil {
		return nil, fmt.Errorf("evaluate the template's resources: %w", err)
	}
	c := &calc{res: res, u: u, est: est, ids: sortedKeys(res)}
	if err := c.run(); err != nil {
		return nil, err
	}
	for _, name := range sortedKeys(declared) {
		if v, ok := st.Param(name).(string); ok && secretARN.MatchString(v) {
			c.givenSecrets = append(c.givenSecrets, name)
		}
	}
	c.secretsLine()
	applyFreeTiers(est)
	return est, nil
}

var secretARN = regexp.MustCompile(`^arn:[a-z-]+:secretsmanager:`)

// applyFreeTiers prices each line after the always-free tier of its price,
// which idle lines use first: what one million webhooks add is what they
// cost once idle has used what it uses.
func applyFreeTiers(est *Estimate) {
	left := map[string]float64{}
	for _, p := range Prices {
		left[p.Key] = p.Free
	}
	for _, lines := range [][]Line{est.Idle, est.PerMillion} {
		for i := range lines {
			l := &lines[i]
			if l.Price == "" {
				continue
			}
			take := min(l.Quantity, left[l.Price])
			left[l.Price] -= take
			l.FreeUSD = (l.Quantity - take) * lookup(l.Price).Value
		}
	}
}

// line makes a priced line.
func line(item string, resources []string, price string, qty float64, usage string) Line {
	return Line{Item: item, Resources: resources, Usage: usage, Price: price, Quantity: qty, USD: qty * lookup(price).Value}
}

// note makes a line that bills nothing, usage saying why.
func note(item string, resources []string, usage string) Line {
	return Line{Item: item, Resources: resources, Usage: usage}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
