package samtemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Stack is a CloudFormation template evaluated for one set of parameter
// values, as CloudFormation would deploy it: the conditions decided,
// Fn::If branches chosen, parameters and pseudo parameters substituted,
// AWS::NoValue removed, and the resources and outputs whose condition is
// false left out. What only exists once deployed (a Ref to a resource, a
// Fn::GetAtt, a Fn::Sub over either) stays in its long form, so a check can
// still see what it points at.
//
// It understands the functions this project's template uses: Ref,
// Condition, Fn::If, Fn::Equals, Fn::Not, Fn::And, Fn::Or, Fn::Sub,
// Fn::Join, Fn::Select, Fn::Split, and the rule functions Fn::Contains,
// Fn::EachMemberEquals and Fn::EachMemberIn; the others (Fn::GetAtt,
// Fn::GetAZs, Fn::Cidr, ...) are left as they are.
type Stack struct {
	doc      map[string]any
	params   map[string]any // string, or []string for list types
	condDefs map[string]any
	conds    map[string]bool
	visiting map[string]bool
	pseudo   map[string]string
}

// Pseudo parameters as a stack in us-east-1 of account 123456789012 named
// webhook-inbox sees them, unless NewStack's params say otherwise.
var pseudo = map[string]string{
	"AWS::AccountId": "123456789012",
	"AWS::Region":    "us-east-1",
	"AWS::Partition": "aws",
	"AWS::StackName": "webhook-inbox",
	"AWS::URLSuffix": "amazonaws.com",
}

// noValue is what Ref AWS::NoValue resolves to: its key or list item is
// removed.
type noValue struct{}

// NewStack evaluates doc (ReadFile's form, or a translated template's JSON)
// for params, which name parameters and their values as CloudFormation takes
// them (a list type is one comma-separated string). Parameters not given
// take their Default; a value outside AllowedValues, AllowedPattern (for
// each item of a list), MinValue or MaxValue, or a missing one without a
// default, is an error, as CloudFormation refuses it. A pseudo parameter
// among params ("AWS::Region": "il-central-1") replaces its value, for a
// stack deployed elsewhere.
func NewStack(doc map[string]any, params map[string]string) (*Stack, error) {
	s := &Stack{doc: doc, params: map[string]any{}, conds: map[string]bool{}, visiting: map[string]bool{}, pseudo: maps.Clone(pseudo)}
	s.condDefs, _ = doc["Conditions"].(map[string]any)
	decl, _ := doc["Parameters"].(map[string]any)
	for name, v := range params {
		if _, ok := pseudo[name]; ok {
			s.pseudo[name] = v
			continue
		}
		if _, ok := decl[name]; !ok {
			return nil, fmt.Errorf("parameter %s: the template declares no such parameter", name)
		}
	}
	var errs []error
	for name, d := range decl {
		def, _ := d.(map[string]any)
		val, given := params[name]
		if !given {
			dv, ok := def["Default"]
			if !ok {
				errs = append(errs, fmt.Errorf("parameter %s: no value and no default", name))
				continue
			}
			val = scalarString(dv)
		}
		typ, _ := def["Type"].(string)
		isList := strings.HasPrefix(typ, "List<") || typ == "CommaDelimitedList"
		items := []string{val}
		if isList {
			items = strings.Split(val, ",")
			for i := range items {
				items[i] = strings.TrimSpace(items[i])
			}
			s.params[name] = items
		} else {
			s.params[name] = val
		}
		if err := checkParam(name, def, items); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

func checkParam(name string, def map[string]any, items []string) error {
	if allowed, ok := def["AllowedValues"].([]any); ok {
		for _, it := range items {
			found := false
			for _, a := range allowed {
				found = found || scalarString(a) == it
			}
			if !found {
				return fmt.Errorf("parameter %s: %q is not an allowed value", name, it)
			}
		}
	}
	if pat, ok := def["AllowedPattern"].(string); ok {
		re, err := regexp.Compile(pat)
		if err != nil {
			return fmt.Errorf("parameter %s: AllowedPattern: %w", name, err)
		}
		for _, it := range items {
			if !re.MatchString(it) {
				return fmt.Errorf("parameter %s: %q does not match %s", name, it, pat)
			}
		}
	}
	for _, bound := range []string{"MinValue", "MaxValue"} {
		b, ok := def[bound]
		if !ok {
			continue
		}
		limit, _ := strconv.ParseFloat(scalarString(b), 64)
		v, err := strconv.ParseFloat(items[0], 64)
		if err != nil {
			return fmt.Errorf("parameter %s: %q is not a number", name, items[0])
		}
		if (bound == "MinValue" && v < limit) || (bound == "MaxValue" && v > limit) {
			return fmt.Errorf("parameter %s: %v is out of %s %v", name, v, bound, limit)
		}
	}
	return nil
}

// Param returns a parameter's value: a string, or []string for a list.
func (s *Stack) Param(name string) any { return s.params[name] }

// Condition returns the value of the named condition.
func (s *Stack) Condition(name string) (bool, error) {
	if v, ok := s.conds[name]; ok {
		return v, nil
	}
	def, ok := s.condDefs[name]
	if !ok {
		return false, fmt.Errorf("no condition named %s", name)
	}
	if s.visiting[name] {
		return false, fmt.Errorf("condition %s refers to itself", name)
	}
	s.visiting[name] = true
	defer delete(s.visiting, name)
	v, err := s.Resolve(def)
	if err != nil {
		return false, fmt.Errorf("condition %s: %w", name, err)
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("condition %s is not true or false: %v", name, v)
	}
	s.conds[name] = b
	return b, nil
}

// Resource is one resource of the evaluated stack.
type Resource struct {
	Type       string
	Properties map[string]any
	DependsOn  []string
	Metadata   map[string]any
}

// Resources returns the resources the stack would have, by logical id, with
// their properties evaluated.
func (s *Stack) Resources() (map[string]Resource, error) {
	raw, _ := s.doc["Resources"].(map[string]any)
	out := map[string]Resource{}
	for id, r := range raw {
		rm, _ := r.(map[string]any)
		if c, ok := rm["Condition"].(string); ok {
			on, err := s.Condition(c)
			if err != nil {
				return nil, fmt.Errorf("resource %s: %w", id, err)
			}
			if !on {
				continue
			}
		}
		res := Resource{}
		res.Type, _ = rm["Type"].(string)
		if p, ok := rm["Properties"]; ok {
			v, err := s.Resolve(p)
			if err != nil {
				return nil, fmt.Errorf("resource %s: %w", id, err)
			}
			res.Properties, _ = v.(map[string]any)
		}
		if res.Properties == nil {
			res.Properties = map[string]any{}
		}
		res.DependsOn = Strings(rm["DependsOn"])
		res.Metadata, _ = rm["Metadata"].(map[string]any)
		out[id] = res
	}
	return out, nil
}

// Outputs returns the outputs the stack would have, with their values
// evaluated.
func (s *Stack) Outputs() (map[string]any, error) {
	raw, _ := s.doc["Outputs"].(map[string]any)
	out := map[string]any{}
	for id, o := range raw {
		om, _ := o.(map[string]any)
		if c, ok := om["Condition"].(string); ok {
			on, err := s.Condition(c)
			if err != nil {
				return nil, fmt.Errorf("output %s: %w", id, err)
			}
			if !on {
				continue
			}
		}
		v, err := s.Resolve(om["Value"])
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", id, err)
		}
		out[id] = v
	}
	return out, nil
}

// FailedRules returns the AssertDescription of every rule assertion these
// parameter values break (sorted): CloudFormation refuses to create or
// update the stack with any of them.
func (s *Stack) FailedRules() ([]string, error) {
	rules, _ := s.doc["Rules"].(map[string]any)
	var failed []string
	for name, r := range rules {
		rm, _ := r.(map[string]any)
		if cond, ok := rm["RuleCondition"]; ok {
			v, err := s.Resolve(cond)
			if err != nil {
				return nil, fmt.Errorf("rule %s: %w", name, err)
			}
			if on, _ := v.(bool); !on {
				continue
			}
		}
		asserts, _ := rm["Assertions"].([]any)
		for i, a := range asserts {
			am, _ := a.(map[string]any)
			v, err := s.Resolve(am["Assert"])
			if err != nil {
				return nil, fmt.Errorf("rule %s assertion %d: %w", name, i, err)
			}
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("rule %s assertion %d is not true or false: %v", name, i, v)
			}
			if !b {
				desc, _ := am["AssertDescription"].(string)
				failed = append(failed, name+": "+desc)
			}
		}
	}
	sort.Strings(failed)
	return failed, nil
}

// Resolve evaluates v: see Stack.
func (s *Stack) Resolve(v any) (any, error) {
	r, err := s.resolve(v)
	if _, ok := r.(noValue); ok {
		return nil, err
	}
	return r, err
}

func (s *Stack) resolve(v any) (any, error) {
	switch x := v.(type) {
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			r, err := s.resolve(e)
			if err != nil {
				return nil, err
			}
			if _, skip := r.(noValue); !skip {
				out = append(out, r)
			}
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::") {
					return s.function(k, arg)
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := s.resolve(e)
			if err != nil {
				return nil, err
			}
			if _, skip := r.(noValue); !skip {
				out[k] = r
			}
		}
		return out, nil
	}
	return v, nil
}

func (s *Stack) function(name string, arg any) (any, error) {
	switch name {
	case "Ref":
		ref, _ := arg.(string)
		if ref == "AWS::NoValue" {
			return noValue{}, nil
		}
		if p, ok := s.params[ref]; ok {
			if l, isList := p.([]string); isList {
				out := make([]any, len(l))
				for i, e := range l {
					out[i] = e
				}
				return out, nil
			}
			return p, nil
		}
		if p, ok := s.pseudo[ref]; ok {
			return p, nil
		}
		return map[string]any{"Ref": ref}, nil // a resource: known once deployed
	case "Condition":
		c, _ := arg.(string)
		return s.Condition(c)
	case "Fn::If":
		a, _ := arg.([]any)
		if len(a) != 3 {
			return nil, fmt.Errorf("Fn::If takes [condition, then, else]: %v", arg)
		}
		c, _ := a[0].(string)
		on, err := s.Condition(c)
		if err != nil {
			return nil, err
		}
		if on {
			return s.resolve(a[1])
		}
		return s.resolve(a[2])
	case "Fn::Equals":
		a, err := s.args(name, arg, 2)
		if err != nil {
			return nil, err
		}
		return canonical(a[0]) == canonical(a[1]), nil
	case "Fn::Not":
		a, err := s.bools(name, arg)
		if err != nil || len(a) != 1 {
			return nil, errors.Join(err, fmt.Errorf("Fn::Not takes one condition: %v", arg))
		}
		return !a[0], nil
	case "Fn::And", "Fn::Or":
		a, err := s.bools(name, arg)
		if err != nil {
			return nil, err
		}
		and := name == "Fn::And"
		for _, b := range a {
			if b != and {
				return !and, nil
			}
		}
		return and, nil
	case "Fn::Sub":
		return s.sub(arg)
	case "Fn::Join":
		a, err := s.args(name, arg, 2)
		if err != nil {
			return nil, err
		}
		sep, _ := a[0].(string)
		list, ok := a[1].([]any)
		if !ok {
			return map[string]any{name: a}, nil
		}
		parts := make([]string, len(list))
		for i, e := range list {
			str, ok := scalar(e)
			if !ok {
				return map[string]any{name: a}, nil
			}
			parts[i] = str
		}
		return strings.Join(parts, sep), nil
	case "Fn::Split":
		a, err := s.args(name, arg, 2)
		if err != nil {
			return nil, err
		}
		sep, _ := a[0].(string)
		var out []any
		switch str := a[1].(type) {
		case string:
			for _, p := range strings.Split(str, sep) {
				out = append(out, p)
			}
			return out, nil
		case map[string]any:
			// Split(sep, Join(sep, [...])) over items known only once
			// deployed (ids, which hold no separator) is the joined items
			// themselves, the known strings split.
			j, _ := str["Fn::Join"].([]any)
			if len(str) == 1 && len(j) == 2 && j[0] == sep {
				items, _ := j[1].([]any)
				for _, it := range items {
					if s, isString := it.(string); isString {
						for _, p := range strings.Split(s, sep) {
							out = append(out, p)
						}
					} else {
						out = append(out, it)
					}
				}
				return out, nil
			}
		}
		return map[string]any{name: a}, nil
	case "Fn::Select":
		a, err := s.args(name, arg, 2)
		if err != nil {
			return nil, err
		}
		idxStr, _ := scalar(a[0])
		idx, err := strconv.Atoi(idxStr)
		if err != nil {
			return nil, fmt.Errorf("Fn::Select: index %v", a[0])
		}
		list, ok := a[1].([]any)
		if !ok {
			return map[string]any{name: a}, nil
		}
		if idx < 0 || idx >= len(list) {
			return nil, fmt.Errorf("Fn::Select: index %d out of %d items", idx, len(list))
		}
		return list[idx], nil
	case "Fn::Contains", "Fn::EachMemberEquals", "Fn::EachMemberIn":
		a, err := s.args(name, arg, 2)
		if err != nil {
			return nil, err
		}
		switch name {
		case "Fn::Contains":
			list, _ := a[0].([]any)
			return containsCanonical(list, a[1]), nil
		case "Fn::EachMemberEquals":
			list, _ := a[0].([]any)
			for _, e := range list {
				if canonical(e) != canonical(a[1]) {
					return false, nil
				}
			}
			return true, nil
		default:
			list, _ := a[0].([]any)
			allowed, _ := a[1].([]any)
			for _, e := range list {
				if !containsCanonical(allowed, e) {
					return false, nil
				}
			}
			return true, nil
		}
	}
	// Known once deployed (Fn::GetAtt, Fn::GetAZs, Fn::Cidr, ...): kept,
	// with whatever the arguments resolve to.
	r, err := s.resolve(arg)
	if err != nil {
		return nil, err
	}
	return map[string]any{name: r}, nil
}

func (s *Stack) args(name string, arg any, n int) ([]any, error) {
	r, err := s.resolve(arg)
	if err != nil {
		return nil, err
	}
	a, ok := r.([]any)
	if !ok || len(a) != n {
		return nil, fmt.Errorf("%s takes %d arguments: %v", name, n, arg)
	}
	return a, nil
}

func (s *Stack) bools(name string, arg any) ([]bool, error) {
	raw, ok := arg.([]any)
	if !ok {
		return nil, fmt.Errorf("%s takes a list: %v", name, arg)
	}
	out := make([]bool, len(raw))
	for i, e := range raw {
		r, err := s.resolve(e)
		if err != nil {
			return nil, err
		}
		b, ok := r.(bool)
		if !ok {
			return nil, fmt.Errorf("%s: %v is not a condition", name, e)
		}
		out[i] = b
	}
	return out, nil
}

var subRef = regexp.MustCompile(`\$\{([^}]*)\}`)

// sub substitutes what is known now; a reference to a resource (or to a
// variable that is not known yet) leaves the result in the long form
// [string, {unknown variables}], the known parts substituted.
func (s *Stack) sub(arg any) (any, error) {
	var tmpl string
	vars := map[string]any{}
	switch a := arg.(type) {
	case string:
		tmpl = a
	case []any:
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::Sub takes a string or [string, variables]: %v", arg)
		}
		tmpl, _ = a[0].(string)
		raw, _ := a[1].(map[string]any)
		for k, v := range raw {
			r, err := s.resolve(v)
			if err != nil {
				return nil, err
			}
			vars[k] = r
		}
	default:
		return nil, fmt.Errorf("Fn::Sub takes a string or [string, variables]: %v", arg)
	}
	unknown := map[string]any{}
	var firstErr error
	out := subRef.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[2 : len(m)-1]
		if strings.HasPrefix(name, "!") {
			return "${" + name[1:] + "}" // ${!Literal}
		}
		if v, ok := vars[name]; ok {
			if str, ok := scalar(v); ok {
				return str
			}
			unknown[name] = v
			return m
		}
		if p, ok := s.params[name]; ok {
			str, isString := p.(string)
			if !isString {
				firstErr = fmt.Errorf("Fn::Sub: ${%s} is a list", name)
			}
			return str
		}
		if p, ok := s.pseudo[name]; ok {
			return p
		}
		unknown[name] = nil // a resource or one of its attributes
		return m
	})
	if firstErr != nil {
		return nil, firstErr
	}
	if len(unknown) == 0 {
		return out, nil
	}
	keep := map[string]any{}
	for k, v := range unknown {
		if v != nil {
			keep[k] = v
		}
	}
	return map[string]any{"Fn::Sub": []any{out, keep}}, nil
}

// scalar returns v as CloudFormation turns it into a string, if it is a
// string, number or boolean.
func scalar(v any) (string, bool) {
	switch v.(type) {
	case string, bool, int, int64, float64, json.Number:
		return scalarString(v), true
	}
	return "", false
}

func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// canonical is a value's form for comparisons: CloudFormation compares
// strings, so 0 equals "0".
func canonical(v any) string {
	if s, ok := scalar(v); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func containsCanonical(list []any, v any) bool {
	for _, e := range list {
		if canonical(e) == canonical(v) {
			return true
		}
	}
	return false
}

// Strings returns v as a list of strings: a string is a list of one, a
// list keeps its string items.
func Strings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
