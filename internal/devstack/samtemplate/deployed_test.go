package samtemplate_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
)

// What a deployed stack knows of deployedTemplate's resources, as
// ResolveDeployed's lookup gives it.
var deployedValues = map[string]string{
	"Queue":               "queue-1",
	"Queue.Arn":           "arn:aws:sqs:us-east-1:123456789012:queue-1",
	"Db.Endpoint.Address": "db.local",
	"Db.Endpoint.Port":    "5432",
}

func lookupDeployed(id, attribute string) (string, bool) {
	if attribute != "" {
		id += "." + attribute
	}
	v, ok := deployedValues[id]
	return v, ok
}

// Name's default holds "${": a substituted value is not read as a
// variable once deployed.
const deployedTemplate = `
Parameters:
  Name: {Type: String, Default: "a${b}"}
Resources:
  Queue: {Type: AWS::SQS::Queue}
  Db: {Type: AWS::RDS::DBInstance}
  Thing:
    Type: AWS::Test::Thing
    Properties:
      Ref: !Ref Queue
      Att: !GetAtt Queue.Arn
      AttList: !GetAtt [Db, Endpoint.Address]
      Sub: !Sub "${Queue}|${Db.Endpoint.Address}:${Db.Endpoint.Port}|${!Literal}|${Name}|${AWS::Region}"
      SubVars: !Sub ["${Host}/${!Kept}", {Host: !GetAtt Db.Endpoint.Address}]
      Join: !Join [",", [!Ref Queue, !GetAtt Queue.Arn]]
      Select: !Select [2, !Split [":", !GetAtt Queue.Arn]]
  Broken:
    Type: AWS::Test::Thing
    Properties:
      Sub: !Sub "${Gone.Arn}-${!Literal}"
      Ref: !Ref Gone
      Att: !GetAtt Queue.QueueName
      Zones: !GetAZs ""
      Known: !Ref Queue
`

func deployedStack(t *testing.T) (*samtemplate.Stack, map[string]samtemplate.Resource) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(deployedTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := samtemplate.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := samtemplate.NewStack(doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Resources()
	if err != nil {
		t.Fatal(err)
	}
	return st, res
}

func TestResolveDeployedFillsInWhatTheLookupGives(t *testing.T) {
	t.Parallel()
	st, res := deployedStack(t)
	p := res["Thing"].Properties
	// Before deployment, the Fn::Sub keeps its literal and escapes the
	// substituted "${", so that the deployed pass reads neither as a
	// variable.
	if got, want := mustJSON(p["Sub"]), `{"Fn::Sub":["${Queue}|${Db.Endpoint.Address}:${Db.Endpoint.Port}|${!Literal}|a${!b}|us-east-1",{}]}`; got != want {
		t.Errorf("Sub before deployment = %s, want %s", got, want)
	}
	r, err := st.ResolveDeployed(p, lookupDeployed)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := r.(map[string]any)
	for k, want := range map[string]string{
		"Ref":     "queue-1",
		"Att":     "arn:aws:sqs:us-east-1:123456789012:queue-1",
		"AttList": "db.local",
		"Sub":     "queue-1|db.local:5432|${Literal}|a${b}|us-east-1",
		"SubVars": "db.local/${Kept}",
		"Join":    "queue-1,arn:aws:sqs:us-east-1:123456789012:queue-1",
		"Select":  "sqs",
	} {
		if got[k] != want {
			t.Errorf("%s = %s, want %q", k, mustJSON(got[k]), want)
		}
	}
}

func TestResolveDeployedNamesWhatTheLookupLacks(t *testing.T) {
	t.Parallel()
	st, res := deployedStack(t)
	props := res["Broken"].Properties
	for _, c := range []struct {
		key, missing, kept string
	}{
		{"Sub", "Fn::Sub ${Gone.Arn}", `{"Fn::Sub":["${Gone.Arn}-${!Literal}",{}]}`},
		{"Ref", "Ref Gone", `{"Ref":"Gone"}`},
		{"Att", "Fn::GetAtt Queue.QueueName", `{"Fn::GetAtt":["Queue","QueueName"]}`},
		{"Zones", "Fn::GetAZs", `{"Fn::GetAZs":""}`},
	} {
		r, err := st.ResolveDeployed(props[c.key], lookupDeployed)
		var m *samtemplate.MissingError
		if !errors.As(err, &m) || !slices.Equal(m.Missing, []string{c.missing}) {
			t.Errorf("%s: error %v, want it to name %q", c.key, err, c.missing)
		} else if want := "no deployed value for " + c.missing; err.Error() != want {
			t.Errorf("%s: error %q, want %q", c.key, err, want)
		}
		if got := mustJSON(r); got != c.kept {
			t.Errorf("%s: kept %s, want the long form %s", c.key, got, c.kept)
		}
	}
	r, err := st.ResolveDeployed(props, lookupDeployed)
	var m *samtemplate.MissingError
	if !errors.As(err, &m) || len(m.Missing) != 4 {
		t.Errorf("all of Broken: error %v, want the four missing values", err)
	}
	if known := r.(map[string]any)["Known"]; known != "queue-1" {
		t.Errorf("Known = %v beside the missing values, want queue-1", known)
	}
}
