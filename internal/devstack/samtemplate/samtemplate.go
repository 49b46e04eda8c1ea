// Package samtemplate reads the project's AWS SAM template, with
// awslabs/goformation, into what the local Lambda runner and the template
// checks need: each function's build, runtime and environment, its HTTP API
// routes and its schedules, with SAM's Globals applied. Reading the template
// itself keeps the local run from drifting into a second copy of it.
package samtemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/awslabs/goformation/v7"
	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/cloudformation/global"
	"github.com/awslabs/goformation/v7/cloudformation/serverless"
	"github.com/awslabs/goformation/v7/intrinsics"
)

// Template is a parsed SAM template.
type Template struct {
	// Raw is goformation's model, with intrinsics resolved against the
	// parameters' defaults and the overrides given to Open.
	Raw       *cloudformation.Template
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
	Environment   map[string]string
	Routes        []Route
	Schedules     []Schedule
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

var parseMu sync.Mutex

// Open parses the template at path. overrides give parameter values (for
// parameters without a default, or to replace one).
func Open(path string, overrides map[string]any) (*Template, error) {
	// goformation registers its YAML tag resolvers in a package-level map
	// on every parse, which races when two goroutines parse at once.
	parseMu.Lock()
	raw, err := goformation.OpenWithOptions(path, &intrinsics.ProcessorOptions{ParameterOverrides: overrides})
	parseMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	t := &Template{Raw: raw, Functions: map[string]*Function{}}
	globals, _ := raw.GetServerlessGlobalFunction() // none is fine
	params := map[string]string{}
	for name, p := range raw.Parameters {
		if p.Default != nil {
			params[name] = paramString(p.Default)
		}
	}
	for name, v := range overrides {
		params[name] = paramString(v)
	}
	for id, fn := range raw.GetAllServerlessFunctionResources() {
		f, err := newFunction(id, fn, globals)
		if err != nil {
			return nil, fmt.Errorf("%s: function %s: %w", path, id, err)
		}
		// goformation leaves !Sub "${Param}" as written; environment
		// values are strings, so numeric parameters are passed that way.
		for k, v := range f.Environment {
			f.Environment[k] = subParam.ReplaceAllStringFunc(v, func(m string) string {
				if val, ok := params[m[2:len(m)-1]]; ok {
					return val
				}
				return m
			})
		}
		t.Functions[id] = f
	}
	return t, nil
}

// subParam matches ${Name} references (not ${AWS::...} pseudo parameters).
var subParam = regexp.MustCompile(`\$\{[A-Za-z0-9]+\}`)

// FunctionIDs returns the functions' logical ids, sorted.
func (t *Template) FunctionIDs() []string {
	ids := make([]string, 0, len(t.Functions))
	for id := range t.Functions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// newFunction reads fn, taking from Globals.Function what fn leaves unset,
// as SAM does (environment variables merge, the function's winning).
func newFunction(id string, fn *serverless.Function, g *global.Function) (*Function, error) {
	f := &Function{LogicalID: id, Environment: map[string]string{}}
	if g != nil {
		f.Handler = deref(g.Handler)
		f.Runtime = deref(g.Runtime)
		if g.Architectures != nil {
			f.Architectures = *g.Architectures
		}
		if g.Timeout != nil {
			f.Timeout = time.Duration(*g.Timeout) * time.Second
		}
		if g.MemorySize != nil {
			f.MemorySize = *g.MemorySize
		}
		if g.CodeUri != nil && g.CodeUri.String != nil {
			f.CodeURI = *g.CodeUri.String
		}
		if g.Environment != nil {
			for k, v := range g.Environment.Variables {
				f.Environment[k] = v
			}
		}
	}
	if fn.Handler != nil {
		f.Handler = *fn.Handler
	}
	if fn.Runtime != nil {
		f.Runtime = *fn.Runtime
	}
	if len(fn.Architectures) > 0 {
		f.Architectures = fn.Architectures
	}
	if fn.Timeout != nil {
		f.Timeout = time.Duration(*fn.Timeout) * time.Second
	}
	if fn.MemorySize != nil {
		f.MemorySize = *fn.MemorySize
	}
	if fn.CodeUri != nil && fn.CodeUri.String != nil {
		f.CodeURI = *fn.CodeUri.String
	}
	if fn.Environment != nil {
		for k, v := range fn.Environment.Variables {
			f.Environment[k] = v
		}
	}
	if bm, ok := fn.AWSCloudFormationMetadata["BuildMethod"].(string); ok {
		f.BuildMethod = bm
	}
	names := make([]string, 0, len(fn.Events))
	for name := range fn.Events {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ev := fn.Events[name]
		switch ev.Type {
		case "HttpApi":
			api := ev.Properties.HttpApiEvent
			if api == nil {
				return nil, fmt.Errorf("event %s: HttpApi without properties", name)
			}
			f.Routes = append(f.Routes, Route{Event: name, Method: deref(api.Method), Path: deref(api.Path), Payload: deref(api.PayloadFormatVersion)})
		case "Schedule":
			sch := ev.Properties.ScheduleEvent
			if sch == nil {
				return nil, fmt.Errorf("event %s: Schedule without properties", name)
			}
			f.Schedules = append(f.Schedules, Schedule{Event: name, Expression: sch.Schedule, Enabled: sch.Enabled == nil || *sch.Enabled})
		}
	}
	return f, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// JSON returns the template, intrinsics resolved, as a generic JSON value,
// for checks that walk every resource (IAM statements, bucket settings).
func (t *Template) JSON() (map[string]any, error) {
	b, err := t.Raw.JSON()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
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

// paramString renders a parameter value as CloudFormation does: numbers
// parsed from the template are float64, and 1048576 must not become
// 1.048576e+06.
func paramString(v any) string {
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return strconv.FormatInt(int64(f), 10)
	}
	return fmt.Sprint(v)
}
