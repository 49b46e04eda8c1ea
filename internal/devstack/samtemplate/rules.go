package samtemplate

import (
	"fmt"
	"sort"
)

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
		descs, err := s.brokenAssertions(name, rm["Assertions"])
		if err != nil {
			return nil, err
		}
		failed = append(failed, descs...)
	}
	sort.Strings(failed)
	return failed, nil
}

// brokenAssertions returns "rule: AssertDescription" for each of a rule's
// assertions that is false.
func (s *Stack) brokenAssertions(rule string, assertions any) ([]string, error) {
	list, _ := assertions.([]any)
	var broken []string
	for i, a := range list {
		am, _ := a.(map[string]any)
		v, err := s.Resolve(am["Assert"])
		if err != nil {
			return nil, fmt.Errorf("rule %s assertion %d: %w", rule, i, err)
		}
		ok, isBool := v.(bool)
		if !isBool {
			return nil, fmt.Errorf("rule %s assertion %d is not true or false: %v", rule, i, v)
		}
		if !ok {
			desc, _ := am["AssertDescription"].(string)
			broken = append(broken, rule+": "+desc)
		}
	}
	return broken, nil
}

// ruleFunction evaluates the functions only a rule may use:
// Fn::Contains [list, value], Fn::EachMemberEquals [list, value] and
// Fn::EachMemberIn [list, allowed], comparing as CloudFormation does
// (canonical).
func (s *Stack) ruleFunction(name string, arg any) (bool, error) {
	a, err := s.args(name, arg, 2)
	if err != nil {
		return false, err
	}
	list, _ := a[0].([]any)
	switch name {
	case "Fn::Contains":
		return containsCanonical(list, a[1]), nil
	case "Fn::EachMemberEquals":
		for _, e := range list {
			if canonical(e) != canonical(a[1]) {
				return false, nil
			}
		}
		return true, nil
	}
	allowed, _ := a[1].([]any)
	for _, e := range list {
		if !containsCanonical(allowed, e) {
			return false, nil
		}
	}
	return true, nil
}

func containsCanonical(list []any, v any) bool {
	for _, e := range list {
		if canonical(e) == canonical(v) {
			return true
		}
	}
	return false
}
