package cost

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Begin and End mark the generated block in docs/deploy.md.
const (
	Begin = "<!-- make cost: begin -->"
	End   = "<!-- make cost: end -->"
)

// DocPath is the document, relative to the repository root, that holds
// the block.
const DocPath = "docs/deploy.md"

// Markdown renders the price table, the assumptions and each profile's
// estimate: the block `make cost` prints and docs/deploy.md holds between
// Begin and End (the markers included).
func Markdown(results []Result, u Usage) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("%s\n", Begin)
	w("<!-- Generated from template.yaml (SAM's translation) and internal/cost by `make cost`; `go run ./cmd/webhookdev cost -w` rewrites it. Edit the code, not this block. -->\n\n")
	w("**Unit prices**, us-east-1, on demand, in US dollars. *AWS*: the figure is on AWS's own page; *third party*: it is not, and AWS's page, where found, showed no figure in the copies read; *not confirmed*: assumed, as the source column says. Check each on AWS's page for your region before you rely on a total.\n\n")
	w("| item | price | free a month | kind | source | read |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, p := range Prices {
		w("| %s | %s per %s | %s | %s | %s | %s |\n", p.Item, dollars(p.Value), p.Unit, p.FreeText, p.Kind, p.Source, p.Read)
	}
	w("\n**Usage assumptions** (internal/cost's `DefaultUsage`):\n\n| assumption | value |\n| --- | --- |\n")
	for _, a := range u.Assumptions() {
		w("| %s | %s |\n", a.Name, a.Value)
	}
	w("\nEach total is given without any free tier, and with the always-free tiers of the price table applied (idle first, then the million webhooks); a profile's target is checked against the first.\n")
	for _, r := range results {
		w("\n#### %s\n\n", r.Profile.Name)
		w("Parameters: %s.", paramsText(r.Profile.Params))
		if len(r.Estimate.Ignored) > 0 {
			w(" The template does not declare %s yet: evaluated without.", codeList(r.Estimate.Ignored))
		}
		w("\n")
		if r.SameAs != "" {
			w("\nThe same stack as %s.\n", r.SameAs)
			continue
		}
		e := r.Estimate
		w("\nA stored webhook reaches the processor by: %s.\n", wakeText(e.Wake))
		if len(e.Polls) == 0 {
			w("Polls at idle: none.\n")
		} else {
			var ps []string
			for _, p := range e.Polls {
				ps = append(ps, fmt.Sprintf("`%s` runs `%s` %s (%s a month)", p.Resource, p.Target, p.Expression, num(p.PerMonth)))
			}
			w("Polls at idle: %s.\n", strings.Join(ps, "; "))
		}
		table(&b, "idle", e.Idle)
		usd, _ := Totals(e.Idle)
		switch t := r.Profile.IdleTarget; {
		case t > 0 && len(e.Ignored) > 0:
			w("\nTarget at idle: at most %s, checked once the template declares %s.\n", money(t), codeList(e.Ignored))
		case t > 0:
			verdict := "met"
			if usd > t {
				verdict = "**missed** by " + money(usd-t)
			}
			w("\nTarget at idle: at most %s; %s.\n", money(t), verdict)
		}
		table(&b, "per million webhooks a month", e.PerMillion)
	}
	w("\n%s\n", End)
	return b.String()
}

func table(b *strings.Builder, title string, lines []Line) {
	fmt.Fprintf(b, "\n| %s | resources | usage | per month | with free tiers |\n| --- | --- | --- | --- | --- |\n", title)
	for _, l := range lines {
		amount, free := money(l.USD), money(l.FreeUSD)
		if l.Price == "" {
			amount, free = "$0", "$0"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", l.Item, resourcesText(l.Resources), l.Usage, amount, free)
	}
	usd, free := Totals(lines)
	fmt.Fprintf(b, "| **total** | | | **%s** | **%s** |\n", money(usd), money(free))
}

func wakeText(wake string) string {
	switch wake {
	case "invoke":
		return "an asynchronous invoke from the receiver after each commit"
	case "s3":
		return "a wake marker the receiver writes to S3, whose EventBridge event invokes it"
	case "poll":
		return "the processor's own scheduled runs"
	}
	return "nothing in the template"
}

func paramsText(params map[string]string) string {
	var out []string
	for _, k := range sortedKeys(params) {
		out = append(out, "`"+k+"="+params[k]+"`")
	}
	return strings.Join(out, ", ")
}

func codeList(names []string) string {
	var out []string
	for _, n := range names {
		out = append(out, "`"+n+"`")
	}
	return strings.Join(out, ", ")
}

func resourcesText(ids []string) string {
	if len(ids) > 3 {
		return fmt.Sprintf("%s and %d more", strings.Join(ids[:3], ", "), len(ids)-3)
	}
	return strings.Join(ids, ", ")
}

// Block returns the generated block of doc, markers included.
func Block(doc string) (string, error) {
	i := strings.Index(doc, Begin)
	j := strings.Index(doc, End)
	if i < 0 || j < i {
		return "", errors.New("no block between " + Begin + " and " + End)
	}
	if strings.Count(doc, Begin) != 1 || strings.Count(doc, End) != 1 {
		return "", errors.New("more than one " + Begin + " or " + End)
	}
	return doc[i:j+len(End)] + "\n", nil
}

// ReplaceBlock returns doc with its block replaced by block.
func ReplaceBlock(doc, block string) (string, error) {
	old, err := Block(doc)
	if err != nil {
		return "", err
	}
	i := strings.Index(doc, Begin)
	rest := doc[i+len(old)-1:] // old ends with the "\n" Block adds
	return doc[:i] + strings.TrimSuffix(block, "\n") + rest, nil
}

// dollars is a unit price, to its last digit.
func dollars(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if _, frac, _ := strings.Cut(s, "."); len(frac) < 2 {
		s = strconv.FormatFloat(v, 'f', 2, 64)
	}
	return "$" + s
}

// money is an amount, to the cent.
func money(v float64) string {
	switch {
	case v == 0:
		return "$0"
	case v < 0.005:
		return "<$0.01"
	}
	return "$" + commas(strconv.FormatFloat(v, 'f', 2, 64))
}

// num is a quantity: thousands separated, at most 3 decimals.
func num(v float64) string {
	if v == math.Trunc(v) {
		return commas(strconv.FormatFloat(v, 'f', 0, 64))
	}
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return commas(s)
}

func gbText(gb float64) string {
	return strconv.FormatFloat(gb, 'f', 2, 64) + " GB"
}

func commas(s string) string {
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if frac != "" {
		return b.String() + "." + frac
	}
	return b.String()
}

func plural(n float64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func instancesText(n float64) string {
	return num(n) + " " + plural(n, "instance", "instances")
}
