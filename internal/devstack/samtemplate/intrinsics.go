package samtemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// function evaluates one intrinsic function call. A function whose value is
// known only once deployed (Fn::GetAtt, Fn::GetAZs, Fn::Cidr, ...), or one
// over such a value, is kept in its long form, its arguments resolved.
func (s *Stack) function(name string, arg any) (any, error) {
	switch name {
	case "Ref":
		return s.ref(arg), nil
	case "Condition":
		c, _ := arg.(string)
		return s.Condition(c)
	case "Fn::If":
		return s.fnIf(arg)
	case "Fn::Equals":
		a, err := s.args(name, arg, 2)
		if err != nil {
			return nil, err
		}
		return canonical(a[0]) == canonical(a[1]), nil
	case "Fn::Not", "Fn::And", "Fn::Or":
		return s.logic(name, arg)
	case "Fn::Sub":
		return s.sub(arg)
	case "Fn::Join":
		return s.join(arg)
	case "Fn::Split":
		return s.split(arg)
	case "Fn::Select":
		return s.selectItem(arg)
	case "Fn::Contains", "Fn::EachMemberEquals", "Fn::EachMemberIn":
		return s.ruleFunction(name, arg)
	case "Fn::GetAtt":
		return s.getAtt(arg)
	}
	r, err := s.resolve(arg)
	if err != nil {
		return nil, err
	}
	if s.deployed != nil {
		// Only CloudFormation evaluates it (Fn::GetAZs, Fn::Cidr, ...).
		*s.missing = append(*s.missing, name)
	}
	return map[string]any{name: r}, nil
}

// ref resolves a Ref: a parameter's value (a list as []any), a pseudo
// parameter's, noValue for AWS::NoValue, and a resource's Ref kept.
func (s *Stack) ref(arg any) any {
	name, _ := arg.(string)
	if name == "AWS::NoValue" {
		return noValue{}
	}
	if p, ok := s.params[name]; ok {
		if l, isList := p.([]string); isList {
			out := make([]any, len(l))
			for i, e := range l {
				out[i] = e
			}
			return out
		}
		return p
	}
	if p, ok := s.pseudo[name]; ok {
		return p
	}
	if v, ok := s.deployedValue(name, "", "Ref "+name); ok {
		return v
	}
	return map[string]any{"Ref": name}
}

// getAtt resolves Fn::GetAtt: "Resource.Attribute" or [Resource,
// Attribute], the attribute possibly a Ref.
func (s *Stack) getAtt(arg any) (any, error) {
	r, err := s.resolve(arg)
	if err != nil {
		return nil, err
	}
	var id, attr string
	switch a := r.(type) {
	case string:
		id, attr, _ = strings.Cut(a, ".")
	case []any:
		if len(a) == 2 {
			id, _ = a[0].(string)
			attr, _ = scalar(a[1])
		}
	}
	if id == "" || attr == "" {
		return nil, fmt.Errorf("Fn::GetAtt takes Resource.Attribute or [Resource, Attribute]: %v", arg)
	}
	if v, ok := s.deployedValue(id, attr, "Fn::GetAtt "+id+"."+attr); ok {
		return v, nil
	}
	return map[string]any{"Fn::GetAtt": r}, nil
}

// deployedValue asks ResolveDeployed's lookup for a resource's Ref
// (attribute "") or attribute, and records what (the reference as the
// template writes it) when it has none. Outside ResolveDeployed it knows
// nothing.
func (s *Stack) deployedValue(id, attribute, what string) (string, bool) {
	if s.deployed == nil {
		return "", false
	}
	if v, ok := s.deployed(id, attribute); ok {
		return v, true
	}
	*s.missing = append(*s.missing, what)
	return "", false
}

// fnIf resolves only the branch its condition chooses: the other may
// refer to what this set of parameters leaves out.
func (s *Stack) fnIf(arg any) (any, error) {
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
}

// logic evaluates Fn::Not (one condition), Fn::And and Fn::Or.
func (s *Stack) logic(name string, arg any) (any, error) {
	raw, ok := arg.([]any)
	if !ok {
		return nil, fmt.Errorf("%s takes a list: %v", name, arg)
	}
	values := make([]bool, len(raw))
	for i, e := range raw {
		r, err := s.resolve(e)
		if err != nil {
			return nil, err
		}
		if values[i], ok = r.(bool); !ok {
			return nil, fmt.Errorf("%s: %v is not a condition", name, e)
		}
	}
	switch name {
	case "Fn::Not":
		if len(values) != 1 {
			return nil, fmt.Errorf("Fn::Not takes one condition: %v", arg)
		}
		return !values[0], nil
	case "Fn::And":
		return !slices.Contains(values, false), nil
	}
	return slices.Contains(values, true), nil
}

func (s *Stack) join(arg any) (any, error) {
	a, err := s.args("Fn::Join", arg, 2)
	if err != nil {
		return nil, err
	}
	sep, _ := a[0].(string)
	list, ok := a[1].([]any)
	if !ok {
		return map[string]any{"Fn::Join": a}, nil
	}
	parts := make([]string, len(list))
	for i, e := range list {
		if parts[i], ok = scalar(e); !ok {
			return map[string]any{"Fn::Join": a}, nil
		}
	}
	return strings.Join(parts, sep), nil
}

func (s *Stack) split(arg any) (any, error) {
	a, err := s.args("Fn::Split", arg, 2)
	if err != nil {
		return nil, err
	}
	sep, _ := a[0].(string)
	switch str := a[1].(type) {
	case string:
		return splitString(str, sep), nil
	case map[string]any:
		if items, ok := splitJoined(str, sep); ok {
			return items, nil
		}
	}
	return map[string]any{"Fn::Split": a}, nil
}

func splitString(str, sep string) []any {
	var out []any
	for _, p := range strings.Split(str, sep) {
		out = append(out, p)
	}
	return out
}

// splitJoined is Split(sep, Join(sep, items)) when some items are known
// only once deployed (ids, which hold no separator): the items themselves,
// the known strings split.
func splitJoined(m map[string]any, sep string) ([]any, bool) {
	j, _ := m["Fn::Join"].([]any)
	if len(m) != 1 || len(j) != 2 || j[0] != sep {
		return nil, false
	}
	items, _ := j[1].([]any)
	var out []any
	for _, it := range items {
		if str, isString := it.(string); isString {
			out = append(out, splitString(str, sep)...)
		} else {
			out = append(out, it)
		}
	}
	return out, true
}

func (s *Stack) selectItem(arg any) (any, error) {
	a, err := s.args("Fn::Select", arg, 2)
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
		return map[string]any{"Fn::Select": a}, nil
	}
	if idx < 0 || idx >= len(list) {
		return nil, fmt.Errorf("Fn::Select: index %d out of %d items", idx, len(list))
	}
	return list[idx], nil
}

// args resolves a function's argument list, which must have n items.
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

var subRef = regexp.MustCompile(`\$\{([^}]*)\}`)

// sub substitutes what is known now; a reference to a resource (or to a
// variable that is not known yet) leaves the result in the long form
// [string, {unknown variables}], the known parts substituted. That string
// is read again once deployed (ResolveDeployed), so it keeps ${!Literal}
// as written and escapes a "${" in a substituted value: neither may be
// read as a variable then.
func (s *Stack) sub(arg any) (any, error) {
	tmpl, vars, err := s.subArgs(arg)
	if err != nil {
		return nil, err
	}
	known := map[string]string{}
	unknown := map[string]bool{}
	var errs []error
	for _, m := range subRef.FindAllStringSubmatch(tmpl, -1) {
		name := m[1]
		if _, seen := known[name]; seen || unknown[name] {
			continue
		}
		str, ok, err := s.subValue(name, vars)
		errs = append(errs, err)
		if ok {
			known[name] = str
		} else {
			unknown[name] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := subRef.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[2 : len(m)-1]
		str, ok := known[name]
		literal, isLiteral := strings.CutPrefix(name, "!")
		switch {
		case !ok || (isLiteral && len(unknown) > 0):
			return m
		case isLiteral:
			return "${" + literal + "}"
		case len(unknown) > 0:
			return strings.ReplaceAll(str, "${", "${!")
		}
		return str
	})
	if len(unknown) == 0 {
		return out, nil
	}
	// The variables the result still needs; a resource or its attribute
	// (${Res}, ${Res.Attr}) needs none.
	keep := map[string]any{}
	for name := range unknown {
		if v := vars[name]; v != nil {
			keep[name] = v
		}
	}
	return map[string]any{"Fn::Sub": []any{out, keep}}, nil
}

// subArgs reads Fn::Sub's argument: a string, or [string, {variables}],
// the variables resolved.
func (s *Stack) subArgs(arg any) (string, map[string]any, error) {
	if tmpl, ok := arg.(string); ok {
		return tmpl, nil, nil
	}
	a, ok := arg.([]any)
	if !ok || len(a) != 2 {
		return "", nil, fmt.Errorf("Fn::Sub takes a string or [string, variables]: %v", arg)
	}
	tmpl, _ := a[0].(string)
	raw, _ := a[1].(map[string]any)
	vars := make(map[string]any, len(raw))
	for k, v := range raw {
		r, err := s.resolve(v)
		if err != nil {
			return "", nil, err
		}
		vars[k] = r
	}
	return tmpl, vars, nil
}

// subValue returns what ${name} stands for, if it is known now.
func (s *Stack) subValue(name string, vars map[string]any) (string, bool, error) {
	if strings.HasPrefix(name, "!") {
		return "", true, nil // a literal: sub writes it
	}
	if v, ok := vars[name]; ok {
		str, isScalar := scalar(v)
		return str, isScalar, nil
	}
	if p, ok := s.params[name]; ok {
		str, isString := p.(string)
		if !isString {
			return "", true, fmt.Errorf("Fn::Sub: ${%s} is a list", name)
		}
		return str, true, nil
	}
	if p, ok := s.pseudo[name]; ok {
		return p, true, nil
	}
	id, attribute, _ := strings.Cut(name, ".")
	str, ok := s.deployedValue(id, attribute, "Fn::Sub ${"+name+"}")
	return str, ok, nil
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
