// Package samtemplate reads the project's AWS SAM template into what the
// local Lambda runner and the template checks need: each function's build,
// runtime and environment, its HTTP API routes, its schedules and its
// function URL, with SAM's Globals applied, for one set of parameter
// values (Open). Reading the template itself keeps the local run from
// drifting into a second copy of it.
//
// The template SAM hands CloudFormation comes from SAM's own translator
// (Translate, through cfn-lint's copy of it), so the checks read what is
// really deployed. What no maintained tool does is evaluate a template for
// one set of parameter values as CloudFormation would (see Stack for why);
// that part is written here, by job: ReadFile reads the YAML short forms
// (yaml.go), NewStack takes and checks the parameter values
// (parameters.go), decides the conditions and keeps the resources and
// outputs they leave in (stack.go), resolves the intrinsic functions
// (intrinsics.go) and applies the Rules (rules.go).
package samtemplate

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"time"
)

// Template is a parsed SAM template, evaluated for one set of parameter
// values.
type Template struct {
	// Stack is the template (SAM resources as written, Globals applied to
	// the functions) evaluated for the parameters given to Open.
	Stack     *Stack
	Functions map[string]*Function
}

// Function is one AWS::Serverless::Function, Globals applied.
type Function struct {
	LogicalID     string
	BuildMethod   string // Metadata.BuildMethod ("makefile")
	Handler       string
	Runtime       string
	Architectures []string
	CodeURI       string
	Timeout       time.Duration
	MemorySize    int
	// Environment holds the variables the template declares; a value known
	// only once deployed (a resource's Ref or attribute) is empty here, and
	// a local run sets its own.
	Environment map[string]string
	Routes      []Route
	Schedules   []Schedule
	// URL is the function's FunctionUrlConfig; nil when it has none.
	URL *FunctionURL
}

// FunctionURL is a function's Lambda function URL (FunctionUrlConfig).
type FunctionURL struct {
	AuthType   string // "AWS_IAM" or "NONE"
	InvokeMode string // "BUFFERED" (the default) or "RESPONSE_STREAM"
}

// Route is an HttpApi event: METHOD PATH (a path may hold {params}).
type Route struct {
	Event   string
	Method  string
	Path    string
	Payload string // PayloadFormatVersion
}

// Schedule is a Schedule event.
type Schedule struct {
	Event      string
	Expression string // rate(...) or cron(...)
	Enabled    bool
}

// Open parses the template at path and evaluates it for params (parameter
// values, as CloudFormation takes them; the others take their defaults).
// A name the template does not declare is ignored, so that a caller written
// for another revision of the template still opens it; a value the
// parameter does not allow is an error.
func Open(path string, params map[string]any) (*Template, error) {
	doc, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	declared, _ := doc["Parameters"].(map[string]any)
	values := map[string]string{}
	for k, v := range params {
		if _, ok := declared[k]; ok {
			values[k] = scalarString(v)
		}
	}
	applyGlobals(doc)
	st, err := NewStack(doc, values)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	res, err := st.Resources()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t := &Template{Stack: st, Functions: map[string]*Function{}}
	for id, r := range res {
		if r.Type != "AWS::Serverless::Function" {
			continue
		}
		f, err := newFunction(id, r)
		if err != nil {
			return nil, fmt.Errorf("%s: function %s: %w", path, id, err)
		}
		t.Functions[id] = f
	}
	return t, nil
}

// applyGlobals merges Globals.Function into every AWS::Serverless::Function
// as SAM does: a map merges (the function's keys winning), a list is the
// Globals' items then the function's, anything else (an intrinsic function
// included) is the function's when it sets one.
func applyGlobals(doc map[string]any) {
	globals, _ := doc["Globals"].(map[string]any)
	g, _ := globals["Function"].(map[string]any)
	resources, _ := doc["Resources"].(map[string]any)
	if g == nil {
		return
	}
	for _, r := range resources {
		rm, _ := r.(map[string]any)
		if rm["Type"] != "AWS::Serverless::Function" {
			continue
		}
		props, _ := rm["Properties"].(map[string]any)
		if props == nil {
			props = map[string]any{}
		}
		rm["Properties"] = mergeGlobal(g, props)
	}
}

func mergeGlobal(global, local any) any {
	gm, gIsMap := global.(map[string]any)
	lm, lIsMap := local.(map[string]any)
	_, _, gCall := intrinsic(gm)
	_, _, lCall := intrinsic(lm)
	if gIsMap && lIsMap && !gCall && !lCall {
		out := map[string]any{}
		for k, v := range gm {
			out[k] = v
		}
		for k, v := range lm {
			if gv, ok := gm[k]; ok {
				out[k] = mergeGlobal(gv, v)
			} else {
				out[k] = v
			}
		}
		return out
	}
	gl, gIsList := global.([]any)
	ll, lIsList := local.([]any)
	if gIsList && lIsList {
		return append(append([]any{}, gl...), ll...)
	}
	return local
}

func newFunction(id string, r Resource) (*Function, error) {
	p := r.Properties
	f := &Function{LogicalID: id, Environment: map[string]string{}}
	f.Handler, _ = p["Handler"].(string)
	f.Runtime, _ = p["Runtime"].(string)
	f.Architectures = Strings(p["Architectures"])
	f.CodeURI, _ = p["CodeUri"].(string)
	if v, ok := p["Timeout"]; ok {
		n, err := strconv.Atoi(scalarString(v))
		if err != nil {
			return nil, fmt.Errorf("timeout %v: %w", v, err)
		}
		f.Timeout = time.Duration(n) * time.Second
	}
	if v, ok := p["MemorySize"]; ok {
		n, err := strconv.Atoi(scalarString(v))
		if err != nil {
			return nil, fmt.Errorf("memory size %v: %w", v, err)
		}
		f.MemorySize = n
	}
	env, _ := p["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	for k, v := range vars {
		f.Environment[k], _ = scalar(v) // known once deployed: empty here
	}
	f.BuildMethod, _ = r.Metadata["BuildMethod"].(string)
	if v, ok := p["FunctionUrlConfig"]; ok {
		u, err := newFunctionURL(v)
		if err != nil {
			return nil, err
		}
		f.URL = u
	}
	events, _ := p["Events"].(map[string]any)
	if err := f.readEvents(events); err != nil {
		return nil, err
	}
	return f, nil
}

// readEvents reads the function's HttpApi and Schedule events, by name.
func (f *Function) readEvents(events map[string]any) error {
	for _, name := range slices.Sorted(maps.Keys(events)) {
		ev, _ := events[name].(map[string]any)
		props, _ := ev["Properties"].(map[string]any)
		switch ev["Type"] {
		case "HttpApi":
			if props == nil {
				return fmt.Errorf("event %s: HttpApi without properties", name)
			}
			rt := Route{Event: name}
			rt.Method, _ = props["Method"].(string)
			rt.Path, _ = props["Path"].(string)
			rt.Payload, _ = props["PayloadFormatVersion"].(string)
			f.Routes = append(f.Routes, rt)
		case "Schedule":
			if props == nil {
				return fmt.Errorf("event %s: Schedule without properties", name)
			}
			sc := Schedule{Event: name, Enabled: true}
			sc.Expression, _ = props["Schedule"].(string)
			if e, ok := props["Enabled"].(bool); ok {
				sc.Enabled = e
			}
			f.Schedules = append(f.Schedules, sc)
		}
	}
	return nil
}

// newFunctionURL reads a FunctionUrlConfig as SAM and Lambda accept it:
// AuthType is required, InvokeMode defaults to BUFFERED.
func newFunctionURL(v any) (*FunctionURL, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("FunctionUrlConfig is not a map: %v", v)
	}
	u := &FunctionURL{InvokeMode: "BUFFERED"}
	u.AuthType, _ = scalar(m["AuthType"])
	if u.AuthType != "AWS_IAM" && u.AuthType != "NONE" {
		return nil, fmt.Errorf("FunctionUrlConfig.AuthType %v: want AWS_IAM or NONE", m["AuthType"])
	}
	if mode, ok := m["InvokeMode"]; ok {
		u.InvokeMode, _ = scalar(mode)
		if u.InvokeMode != "BUFFERED" && u.InvokeMode != "RESPONSE_STREAM" {
			return nil, fmt.Errorf("FunctionUrlConfig.InvokeMode %v: want BUFFERED or RESPONSE_STREAM", mode)
		}
	}
	return u, nil
}

// FunctionIDs returns the functions' logical ids, sorted.
func (t *Template) FunctionIDs() []string {
	ids := make([]string, 0, len(t.Functions))
	for id := range t.Functions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

var rateExpr = regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$`)

// ParseRate turns a schedule's rate(N unit) expression into its period.
// cron() expressions are refused: a local run has no use for calendars.
func ParseRate(expr string) (time.Duration, error) {
	m := rateExpr.FindStringSubmatch(expr)
	if m == nil {
		return 0, fmt.Errorf("schedule %q: only rate(N minute[s]|hour[s]|day[s]) is supported", expr)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n <= 0 {
		return 0, errors.New("schedule " + expr + ": the rate must be a positive number")
	}
	// EventBridge insists on the singular for 1 and the plural otherwise.
	if (n == 1) != (m[2] == "minute" || m[2] == "hour" || m[2] == "day") {
		return 0, fmt.Errorf("schedule %q: EventBridge wants %q with 1 and the plural otherwise", expr, m[2])
	}
	unit := map[string]time.Duration{"minute": time.Minute, "minutes": time.Minute, "hour": time.Hour, "hours": time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour}[m[2]]
	return time.Duration(n) * unit, nil
}
