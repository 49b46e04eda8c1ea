package lambdalocal

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
)

var localDB, _ = url.Parse("postgres://postgres@127.0.0.1:54321/wi_local?sslmode=disable")

// TestLocalStackStandsInForEveryDeployedValue: in each profile and both
// database modes, every value of every function's environment that only
// a deployed stack knows (a Ref, a Fn::GetAtt, a Fn::Sub over them) has
// a local stand-in, and it is the one the local stack runs: the receiver
// wakes the local processor by invoke (by a wake/now/ marker in economy)
// and reads the relay's copy in the local control bucket; the relay arms
// the local functions in the local schedule group; the front invokes the
// local migration function with the local master secret. The template's
// custom resources go to their functions (DatabaseSchema to the front),
// and its rules are those the profile has.
func TestLocalStackStandsInForEveryDeployedValue(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		params map[string]any
		wake   string
		rules  []string
	}{
		{map[string]any{"Profile": "standard"}, "invoke", []string{"RelayFunction.Arm", "RelayFunction.SourcesChanged"}},
		{map[string]any{"Profile": "economy"}, "object", []string{"ProcessorWakeRule", "RelayFunction.Arm", "RelayFunction.SourcesChanged"}},
		{map[string]any{"Profile": "high-volume"}, "invoke", []string{"RelayFunction.Arm", "RelayFunction.SourcesChanged"}},
		{map[string]any{"Profile": "economy", "DatabaseMode": "existing", "DatabaseHost": "db.example.com",
			"DatabaseAdminSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:admin-AbCdEf"}, "object",
			[]string{"ProcessorWakeRule", "RelayFunction.Arm", "RelayFunction.SourcesChanged"}},
	} {
		c.params["SourcesSecretArn"] = "arn:aws:secretsmanager:us-east-1:123456789012:secret:sources-AbCdEf"
		name := c.params["Profile"].(string)
		if m, ok := c.params["DatabaseMode"]; ok {
			name += "/" + m.(string)
		}
		tpl, err := samtemplate.Open(filepath.Join("..", "..", "..", "template.yaml"), c.params)
		if err != nil {
			t.Fatal(err)
		}
		res, err := tpl.Stack.Resources()
		if err != nil {
			t.Fatal(err)
		}
		d := newDeployment(tpl.Stack, res, localDB)
		env := map[string]map[string]string{}
		for _, id := range tpl.FunctionIDs() {
			e, missing, err := d.environment(res[id])
			if err != nil {
				t.Fatalf("%s: %s: %v", name, id, err)
			}
			for k, m := range missing {
				t.Errorf("%s: %s's %s names %v, which the local stack does not stand in for", name, id, k, m)
			}
			env[id] = e
		}
		control := d.buckets["ControlBucket"]
		want := map[string]map[string]string{
			"ReceiverFunction": {"WAKE_MODE": c.wake, "WAKE_FUNCTION": "webhook-inbox-processor", "WAKE_BUCKET": control,
				"WEBHOOK_SOURCES_OBJECT": "s3://" + control + "/config/sources.json"},
			"ProcessorFunction": {"WAKE_BUCKET": control, "ARCHIVE_BUCKET": "webhook-inbox-local-archivebucket"},
			"OperatorFunction": {"WAKE_MODE": c.wake, "WAKE_FUNCTION": "webhook-inbox-processor", "WAKE_BUCKET": control,
				"WEBHOOK_SOURCES_OBJECT": "s3://" + control + "/config/sources.json"},
			"RelayFunction": {"RELAY_CONTROL_BUCKET": control, "RELAY_PROCESSOR_ARN": FunctionARN("webhook-inbox-processor"),
				"RELAY_ARCHIVER_ARN": FunctionARN("webhook-inbox-archiver"), "RELAY_SOURCES_SECRET_ARN": c.params["SourcesSecretArn"].(string),
				"RELAY_SCHEDULE_GROUP": "webhook-inbox-wake"},
			"MigrationFrontFunction": {"MIGRATOR_MODE": "front", "MIGRATOR_FUNCTION": FunctionARN(MigrationFunctionID) + ":1"},
			"MigrationFunction":      {"MIGRATOR_MODE": "apply"},
		}
		if c.params["DatabaseMode"] == nil {
			want["MigrationFrontFunction"]["DATABASE_SECRET_ARN"] = AdminSecretARN
			want["MigrationFunction"]["DATABASE_HOST"] = "127.0.0.1"
			want["MigrationFunction"]["DATABASE_PORT"] = "54321"
		}
		for id, vars := range want {
			for k, v := range vars {
				if got := env[id][k]; got != v {
					t.Errorf("%s: %s's %s = %q, want %q", name, id, k, got, v)
				}
			}
		}
		if !strings.HasSuffix(env["RelayFunction"]["RELAY_SCHEDULER_ROLE_ARN"], "-schedulerrole") {
			t.Errorf("%s: the relay's scheduler role %q", name, env["RelayFunction"]["RELAY_SCHEDULER_ROLE_ARN"])
		}
		if !slices.Equal(d.notify, []string{control}) {
			t.Errorf("%s: buckets notifying EventBridge %v, want the control bucket", name, d.notify)
		}

		rules, err := d.rules(res)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var names []string
		for _, r := range rules {
			names = append(names, r.Name)
		}
		if !slices.Equal(names, c.rules) {
			t.Errorf("%s: rules %v, want %v", name, names, c.rules)
		}
		customs, err := d.customResources(res)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		served := map[string]string{}
		for _, cr := range customs {
			served[cr.id] = cr.function
			if cr.props["ServiceToken"] != FunctionARN(cr.function) {
				t.Errorf("%s: %s's ServiceToken %v", name, cr.id, cr.props["ServiceToken"])
			}
			for k, v := range cr.props {
				if _, isString := v.(string); !isString && k != "NetworkPath" {
					t.Errorf("%s: %s's %s is sent as %T, not as CloudFormation sends it, a string", name, cr.id, k, v)
				}
			}
		}
		if served[SchemaResourceID] != MigrationFrontID || served["SourcesCopy"] != RelayFunctionID || len(served) != 2 {
			t.Errorf("%s: custom resources %v", name, served)
		}
	}
}

// TestLocalStackRefusesWhatItCannotRun: a function on a schedule (the
// stack would poll at idle), a rule on a schedule, a rule with a
// comparison the local bus does not serve, a value that names a resource
// the local stack has no stand-in for, and a custom resource served by
// something else than the template's functions: each refused, by name.
func TestLocalStackRefusesWhatItCannotRun(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(`
Transform: AWS::Serverless-2016-10-31
Resources:
  Poller:
    Type: AWS::Serverless::Function
    Properties:
      Environment:
        Variables:
          QUEUE: !GetAtt Queue.QueueName
      Events:
        Tick: {Type: Schedule, Properties: {Schedule: rate(1 minute)}}
        Matched: {Type: EventBridgeRule, Properties: {Pattern: {detail: {n: [{numeric: [">", 1]}]}}}}
  Queue:
    Type: AWS::SQS::Queue
  Nightly:
    Type: AWS::Events::Rule
    Properties:
      ScheduleExpression: cron(0 3 * * ? *)
      Targets: [{Id: p, Arn: !GetAtt Poller.Arn}]
  Elsewhere:
    Type: Custom::Elsewhere
    Properties:
      ServiceToken: arn:aws:lambda:us-east-1:123456789012:function:not-in-this-template
`), 0o644); err != nil {
		t.Fatal(err)
	}
	tpl, err := samtemplate.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := tpl.Stack.Resources()
	d := newDeployment(tpl.Stack, res, localDB)
	_, missing, err := d.environment(res["Poller"])
	if err != nil {
		t.Fatal(err)
	}
	if m := missing["QUEUE"]; len(m) != 1 || m[0] != "Fn::GetAtt Queue.QueueName" {
		t.Errorf("missing %v", missing)
	}
	_, err = d.rules(res)
	for _, want := range []string{"Poller's event Tick is a Schedule", "Poller's event Matched", `"numeric" is not served locally`, "rule Nightly runs on a schedule"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("rules: %v, want it to say %q", err, want)
		}
	}
	if _, err := d.customResources(res); err == nil || !strings.Contains(err.Error(), "custom resource Elsewhere") {
		t.Errorf("custom resources: %v", err)
	}
}
