package samtemplate

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// parameterValues returns the value of each parameter decl (a template's
// Parameters) declares, as CloudFormation takes it: the one given, else its
// Default; a list type ([]string) split at its commas. A name decl does not
// declare, a missing value without a default, and a value the declaration
// does not allow are errors, as CloudFormation refuses them.
func parameterValues(decl map[string]any, given map[string]string) (map[string]any, error) {
	for name := range given {
		if _, ok := decl[name]; !ok {
			return nil, fmt.Errorf("parameter %s: the template declares no such parameter", name)
		}
	}
	values := map[string]any{}
	var errs []error
	for name, d := range decl {
		def, _ := d.(map[string]any)
		val, ok := given[name]
		if !ok {
			dv, hasDefault := def["Default"]
			if !hasDefault {
				errs = append(errs, fmt.Errorf("parameter %s: no value and no default", name))
				continue
			}
			val = scalarString(dv)
		}
		items := []string{val}
		if typ, _ := def["Type"].(string); strings.HasPrefix(typ, "List<") || typ == "CommaDelimitedList" {
			items = strings.Split(val, ",")
			for i := range items {
				items[i] = strings.TrimSpace(items[i])
			}
			values[name] = items
		} else {
			values[name] = val
		}
		if err := checkParameter(name, def, items); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return values, nil
}

// checkParameter applies a parameter's declared constraints to its value
// (items: each item of a list, or the one value).
func checkParameter(name string, def map[string]any, items []string) error {
	if err := checkAllowedValues(def["AllowedValues"], items); err != nil {
		return fmt.Errorf("parameter %s: %w", name, err)
	}
	if err := checkAllowedPattern(def["AllowedPattern"], items); err != nil {
		return fmt.Errorf("parameter %s: %w", name, err)
	}
	if err := checkBounds(def["MinValue"], def["MaxValue"], items[0]); err != nil {
		return fmt.Errorf("parameter %s: %w", name, err)
	}
	return nil
}

func checkAllowedValues(decl any, items []string) error {
	list, ok := decl.([]any)
	if !ok {
		return nil
	}
	allowed := make([]string, len(list))
	for i, a := range list {
		allowed[i] = scalarString(a)
	}
	for _, it := range items {
		if !slices.Contains(allowed, it) {
			return fmt.Errorf("%q is not an allowed value", it)
		}
	}
	return nil
}

func checkAllowedPattern(decl any, items []string) error {
	pat, ok := decl.(string)
	if !ok {
		return nil
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return fmt.Errorf("AllowedPattern: %w", err)
	}
	for _, it := range items {
		if !re.MatchString(it) {
			return fmt.Errorf("%q does not match %s", it, pat)
		}
	}
	return nil
}

// checkBounds applies MinValue and MaxValue (nil when not declared) to a
// Number parameter's value.
func checkBounds(minValue, maxValue any, val string) error {
	if minValue == nil && maxValue == nil {
		return nil
	}
	v, err := strconv.ParseFloat(val, 64)
	if err != nil {
		return fmt.Errorf("%q is not a number", val)
	}
	if minValue != nil {
		if limit, _ := strconv.ParseFloat(scalarString(minValue), 64); v < limit {
			return fmt.Errorf("%v is out of MinValue %v", v, limit)
		}
	}
	if maxValue != nil {
		if limit, _ := strconv.ParseFloat(scalarString(maxValue), 64); v > limit {
			return fmt.Errorf("%v is out of MaxValue %v", v, limit)
		}
	}
	return nil
}
