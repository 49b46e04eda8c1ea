package samtemplate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
)

// A template exercising each function the evaluator understands.
const evalTemplate = `
Parameters:
  Mode: {Type: String, Default: a, AllowedValues: [a, b]}
  Name: {Type: String, Default: ""}
  Ids: {Type: CommaDelimitedList, Default: "", AllowedPattern: "^(id-[0-9]+)?$"}
  Port: {Type: Number, Default: 5432, MinValue: 1, MaxValue: 65535}
  Required: {Type: String}
Rules:
  BNeedsAName:
    RuleCondition: !Equals [!Ref Mode, b]
    Assertions:
      - Assert: !Not [!Equals [!Ref Name, ""]]
        AssertDescription: Mode b needs a Name.
      - Assert: !Not [Fn::EachMemberEquals: [!Ref Ids, ""]]
        AssertDescription: Mode b needs Ids.
  IdsAreKnown:
    Assertions:
      - Assert: !Not [{Fn::Contains: [!Ref Ids, id-9]}]
        AssertDescription: id-9 is retired.
      - Assert: {Fn::EachMemberIn: [!Ref Ids, ["", id-1, id-2, id-3]]}
        AssertDescription: Ids are id-1 to id-3.
Conditions:
  IsB: !Equals [!Ref Mode, b]
  IsA: !Not [!Condition IsB]
  HasIds: !Not [!Equals [!Join ["", !Ref Ids], ""]]
  Both: !And [!Condition IsB, !Condition HasIds]
  PortIsDefault: !Equals [!Ref Port, 5432]
Resources:
  OnlyA:
    Type: AWS::SNS::Topic
    Condition: IsA
  Thing:
    Type: AWS::Test::Thing
    DependsOn: OnlyA
    Properties:
      Chosen: !If [IsB, bee, !Ref AWS::NoValue]
      List: [one, !If [IsB, two, !Ref AWS::NoValue], !Ref Name]
      Arn: !Sub "arn:${AWS::Partition}:x:${AWS::Region}:${AWS::AccountId}:${Name}/${OnlyA.TopicName}"
      Vars: !Sub ["${Host}:${Port}", {Host: !GetAtt OnlyA.TopicName}]
      Literal: !Sub "${!Kept}"
      Ids: !Split [",", !Join [",", [!Join [",", !Ref Ids], !Ref OnlyA]]]
      Second: !Select [1, !Split ["-", "prx-abc-def"]]
      Port: !Sub "${Port}"
      Default: !Condition PortIsDefault
Outputs:
  Out:
    Condition: IsB
    Value: !Ref Name
`

func evalStack(t *testing.T, params map[string]string) *samtemplate.Stack {
	t.Helper()
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(evalTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := samtemplate.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{"Required": "x"}
	for k, v := range params {
		all[k] = v
	}
	st, err := samtemplate.NewStack(doc, all)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestStackEvaluates(t *testing.T) {
	t.Parallel()
	st := evalStack(t, map[string]string{"Name": "n1", "Ids": "id-1,id-2"})
	res, err := st.Resources()
	if err != nil {
		t.Fatal(err)
	}
	p := res["Thing"].Properties
	want := map[string]string{
		"List":    `["one","n1"]`,
		"Arn":     `{"Fn::Sub":["arn:aws:x:us-east-1:123456789012:n1/${OnlyA.TopicName}",{}]}`,
		"Vars":    `{"Fn::Sub":["${Host}:5432",{"Host":{"Fn::GetAtt":["OnlyA","TopicName"]}}]}`,
		"Literal": `"${Kept}"`,
		"Ids":     `["id-1","id-2",{"Ref":"OnlyA"}]`,
		"Second":  `"abc"`,
		"Port":    `"5432"`,
		"Default": `true`,
	}
	for k, w := range want {
		if got := mustJSON(p[k]); got != w {
			t.Errorf("%s = %s, want %s", k, got, w)
		}
	}
	if _, ok := p["Chosen"]; ok {
		t.Errorf("Chosen = %v, want removed (AWS::NoValue)", p["Chosen"])
	}
	if _, ok := res["OnlyA"]; !ok || strings.Join(res["Thing"].DependsOn, ",") != "OnlyA" {
		t.Errorf("resources %v", res)
	}
	if outs, _ := st.Outputs(); len(outs) != 0 {
		t.Errorf("outputs under a false condition: %v", outs)
	}
	if failed, err := st.FailedRules(); err != nil || len(failed) != 0 {
		t.Errorf("rules failed for mode a: %v %v", failed, err)
	}

	st = evalStack(t, map[string]string{"Mode": "b", "Port": "6432"})
	res, err = st.Resources()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res["OnlyA"]; ok {
		t.Error("a resource under a false condition was kept")
	}
	if p := res["Thing"].Properties; p["Chosen"] != "bee" || mustJSON(p["List"]) != `["one","two",""]` || p["Default"] != false {
		t.Errorf("mode b: %v", p)
	}
	failed, err := st.FailedRules()
	if err != nil || strings.Join(failed, "|") != "BNeedsAName: Mode b needs Ids.|BNeedsAName: Mode b needs a Name." {
		t.Errorf("failed rules = %q, %v", failed, err)
	}

	st = evalStack(t, map[string]string{"Ids": "id-1,id-9"})
	failed, err = st.FailedRules()
	if err != nil || strings.Join(failed, "|") != "IdsAreKnown: Ids are id-1 to id-3.|IdsAreKnown: id-9 is retired." {
		t.Errorf("failed rules for id-9 = %q, %v", failed, err)
	}

	// A pseudo parameter given replaces the default stack's, in Ref and
	// Fn::Sub alike.
	st = evalStack(t, map[string]string{"Name": "n1", "AWS::Region": "il-central-1"})
	res, err = st.Resources()
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(res["Thing"].Properties["Arn"]); !strings.Contains(got, ":x:il-central-1:123456789012:n1/") {
		t.Errorf("Arn in il-central-1 = %s", got)
	}
	if r, _ := st.Resolve(map[string]any{"Ref": "AWS::Region"}); r != "il-central-1" {
		t.Errorf("Ref AWS::Region = %v", r)
	}
}

// TestStackRefusesWhatCloudFormationRefuses: parameter values and
// templates CloudFormation would not take.
func TestStackRefusesWhatCloudFormationRefuses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(evalTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := samtemplate.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, params := range map[string]map[string]string{
		"missing required":  {},
		"not allowed":       {"Required": "x", "Mode": "c"},
		"pattern, per item": {"Required": "x", "Ids": "id-1,nope"},
		"above max":         {"Required": "x", "Port": "70000"},
		"below min":         {"Required": "x", "Port": "0"},
		"not a number":      {"Required": "x", "Port": "many"},
		"undeclared":        {"Required": "x", "Other": "y"},
	} {
		if _, err := samtemplate.NewStack(doc, params); err == nil {
			t.Errorf("%s: %v accepted", name, params)
		}
	}
	for name, tmpl := range map[string]string{
		"unknown tag":       "Resources: {A: {Type: X, Properties: {P: !Nope x}}}",
		"GetAtt without .":  "Resources: {A: {Type: X, Properties: {P: !GetAtt A}}}",
		"not a mapping":     "- a\n- b\n",
		"invalid YAML":      "Resources: {A: [}",
		"if with two items": "Conditions: {C: !Equals [a, a]}\nResources: {A: {Type: X, Properties: {P: !If [C, x]}}}",
		"unknown condition": "Resources: {A: {Type: X, Condition: Nope}}",
		"self condition":    "Conditions: {C: !Not [!Condition C]}\nResources: {A: {Type: X, Condition: C}}",
	} {
		p := filepath.Join(t.TempDir(), "t.yaml")
		if err := os.WriteFile(p, []byte(tmpl), 0o644); err != nil {
			t.Fatal(err)
		}
		doc, err := samtemplate.ReadFile(p)
		if err != nil {
			continue // refused while reading
		}
		st, err := samtemplate.NewStack(doc, nil)
		if err != nil {
			continue
		}
		if _, err := st.Resources(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
