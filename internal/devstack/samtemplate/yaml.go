package samtemplate

import (
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// ReadFile parses a CloudFormation or SAM template (YAML or JSON) into the
// JSON form of its values: maps, lists, strings, numbers and booleans, with
// the short-form intrinsic tags (!Ref, !If, !GetAtt A.B, ...) rewritten to
// their long form ({"Ref": ...}, {"Fn::If": [...]}, {"Fn::GetAtt":
// ["A", "B"]}), as CloudFormation reads them.
func ReadFile(path string) (map[string]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("parse %s: empty document", path)
	}
	v, err := fromNode(root.Content[0])
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("parse %s: the document is not a mapping", path)
	}
	return m, nil
}

// shortForms are the YAML tags CloudFormation accepts, with the long name
// each stands for.
var shortForms = map[string]string{
	"!Ref": "Ref", "!Condition": "Condition",
	"!If": "Fn::If", "!Equals": "Fn::Equals", "!Not": "Fn::Not", "!And": "Fn::And", "!Or": "Fn::Or",
	"!Sub": "Fn::Sub", "!Join": "Fn::Join", "!Select": "Fn::Select", "!Split": "Fn::Split",
	"!GetAtt": "Fn::GetAtt", "!GetAZs": "Fn::GetAZs", "!Cidr": "Fn::Cidr", "!FindInMap": "Fn::FindInMap",
	"!Base64": "Fn::Base64", "!ImportValue": "Fn::ImportValue", "!Transform": "Fn::Transform",
	"!ToJsonString": "Fn::ToJsonString", "!Length": "Fn::Length",
}

func fromNode(n *yaml.Node) (any, error) {
	if n.Kind == yaml.AliasNode {
		return fromNode(n.Alias)
	}
	var v any
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			var key string
			if err := n.Content[i].Decode(&key); err != nil {
				return nil, fmt.Errorf("line %d: a key that is not a string: %w", n.Content[i].Line, err)
			}
			val, err := fromNode(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[key] = val
		}
		v = m
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := fromNode(c)
			if err != nil {
				return nil, err
			}
			l = append(l, val)
		}
		v = l
	case yaml.ScalarNode:
		if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
			v = n.Value // a tagged scalar is the function's string argument
		} else if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
	default:
		return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
	}
	if !strings.HasPrefix(n.Tag, "!") || strings.HasPrefix(n.Tag, "!!") {
		return v, nil
	}
	name, ok := shortForms[n.Tag]
	if !ok {
		return nil, fmt.Errorf("line %d: unknown tag %s", n.Line, n.Tag)
	}
	if s, isString := v.(string); isString && name == "Fn::GetAtt" {
		res, attr, found := strings.Cut(s, ".")
		if !found {
			return nil, fmt.Errorf("line %d: !GetAtt %s names no attribute", n.Line, s)
		}
		v = []any{res, attr}
	}
	return map[string]any{name: v}, nil
}
