package samtemplate

import (
	"fmt"
	"maps"
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
// It understands the functions this project's template uses (Stack.function
// lists them); the others (Fn::GetAtt, Fn::GetAZs, Fn::Cidr, ...) are kept
// as they are.
//
// No maintained evaluator does this for given values. goformation's
// intrinsics package (v7.14) resolves a resource's Ref or a Fn::GetAtt to
// nothing, leaves AWS::NoValue as a null, reads no !Condition, keeps the
// resources of a false condition and replaces a conditional output by a
// boolean; the SAM translator resolves parameters only in SAM's own
// properties, and no condition; cfn-lint enumerates every value a template
// may take, to lint it, not the ones a deployment takes. And the local run
// (Open) must not need Python.
type Stack struct {
	doc      map[string]any
	params   map[string]any // string, or []string for list types
	condDefs map[string]any
	conds    map[string]bool
	visiting map[string]bool
	pseudo   map[string]string
	// deployed is set on ResolveDeployed's copy only: what a deployed
	// stack gives, and missing what it did not.
	deployed Lookup
	missing  *[]string
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
	s := &Stack{doc: doc, conds: map[string]bool{}, visiting: map[string]bool{}, pseudo: maps.Clone(pseudo)}
	s.condDefs, _ = doc["Conditions"].(map[string]any)
	given := map[string]string{}
	for name, v := range params {
		if _, ok := pseudo[name]; ok {
			s.pseudo[name] = v
		} else {
			given[name] = v
		}
	}
	decl, _ := doc["Parameters"].(map[string]any)
	values, err := parameterValues(decl, given)
	if err != nil {
		return nil, err
	}
	s.params = values
	return s, nil
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

// included tells whether a resource or output (m) is part of the stack:
// it names no condition, or a true one.
func (s *Stack) included(m map[string]any) (bool, error) {
	c, ok := m["Condition"].(string)
	if !ok {
		return true, nil
	}
	return s.Condition(c)
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
		on, err := s.included(rm)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", id, err)
		}
		if !on {
			continue
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
		on, err := s.included(om)
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", id, err)
		}
		if !on {
			continue
		}
		v, err := s.Resolve(om["Value"])
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", id, err)
		}
		out[id] = v
	}
	return out, nil
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
		if name, arg, ok := intrinsic(x); ok {
			return s.function(name, arg)
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

// intrinsic returns the function m calls, if m is a function call: a map of
// one key, Ref, Condition or Fn::*.
func intrinsic(m map[string]any) (name string, arg any, ok bool) {
	if len(m) != 1 {
		return "", nil, false
	}
	for k, v := range m {
		name, arg = k, v
	}
	return name, arg, name == "Ref" || name == "Condition" || strings.HasPrefix(name, "Fn::")
}
