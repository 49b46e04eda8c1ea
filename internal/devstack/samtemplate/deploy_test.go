package samtemplate_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/shared/rdsca"
	"github.com/webhook-inbox/webhook-inbox/shared/schemaresource"
)

// These checks hold the stack to what it needs at deploy time and at
// teardown: an order CloudFormation can delete in, alarms that reach
// someone, parameter values refused before anything is created rather than
// by a service halfway through, and the operability details (access logs,
// log levels, endpoint policies, the database's log).

// TestSchemaOutlivesItsPathToS3: in every mode, the migration custom
// resource (DatabaseSchema) depends on each resource between the migration
// function and S3 (where it PUTs its answer to CloudFormation's pre-signed
// URL) and Secrets Manager (read at start-up): its subnets and security
// groups, the endpoints, their route tables and those tables' subnet
// associations. CloudFormation deletes a resource before what it depends
// on, so on `sam delete` (or a rollback) the Delete answer still has its
// route; without it the associations went first and the delete hung for
// the resource's service timeout.
func TestSchemaOutlivesItsPathToS3(t *testing.T) {
	t.Parallel()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			d := deploy(t, sc)
			var want []string
			switch {
			case d.create:
				want = []string{"EndpointSecurityGroup", "MigratorSecurityGroup", "PrivateRouteTable", "PrivateSubnetA", "PrivateSubnetARouteTable",
					"PrivateSubnetB", "PrivateSubnetBRouteTable", "S3Endpoint", "SecretsManagerEndpoint"}
			case d.vpc && !d.nat:
				// Your subnets and route tables are not the stack's to delete.
				want = []string{"EndpointSecurityGroup", "MigratorSecurityGroup", "S3Endpoint", "SecretsManagerEndpoint"}
			case d.vpc:
				want = []string{"MigratorSecurityGroup"}
			}
			path := d.schemaPath()
			if !slices.Equal(path, want) {
				t.Errorf("the migration function's way out = %v, want %v", path, want)
			}
			for _, id := range path {
				if !d.dependsOn("DatabaseSchema", id) {
					t.Errorf("DatabaseSchema does not depend on %s (%s): CloudFormation may delete it first, and the Delete answer has no route", id, d.res[id].Type)
				}
			}
			if !d.vpc {
				for id, r := range d.res {
					if strings.HasPrefix(r.Type, "AWS::EC2::") {
						t.Errorf("no VPC, yet %s (%s)", id, r.Type)
					}
				}
			}
			// The property that carries the order is one the migration
			// function accepts (it refuses any other).
			for k := range d.res["DatabaseSchema"].Properties {
				if !slices.Contains(schemaresource.Properties(), k) {
					t.Errorf("DatabaseSchema property %s: the migration function refuses it (known %v)", k, schemaresource.Properties())
				}
			}
		})
	}
}

// schemaPath lists the template's resources on the migration function's
// way to S3 and Secrets Manager, sorted: the subnets and security groups of
// its VpcConfig, every VPC endpoint with its route tables, subnets and
// security groups, and the subnet associations of those route tables.
func (d deployed) schemaPath() []string {
	seen := map[string]bool{}
	add := func(v any) {
		if id := target(v); id != "" {
			if _, ok := d.res[id]; ok {
				seen[id] = true
			}
		}
	}
	list := func(v any) []any { l, _ := v.([]any); return l }
	if vc, ok := d.res["MigrationFunction"].Properties["VpcConfig"].(map[string]any); ok {
		for _, v := range append(list(vc["SubnetIds"]), list(vc["SecurityGroupIds"])...) {
			add(v)
		}
	}
	for id, r := range d.res {
		if r.Type != "AWS::EC2::VPCEndpoint" {
			continue
		}
		seen[id] = true
		for _, k := range []string{"RouteTableIds", "SubnetIds", "SecurityGroupIds"} {
			for _, v := range list(r.Properties[k]) {
				add(v)
			}
		}
	}
	for id, r := range d.res {
		if r.Type == "AWS::EC2::SubnetRouteTableAssociation" && seen[target(r.Properties["RouteTableId"])] {
			seen[id] = true
		}
	}
	return keys(seen)
}

// TestAlarmsNotifyTheTopic: with no AlarmTopicArn the stack makes a topic
// (unencrypted: CloudWatch cannot publish to one under the AWS managed
// key) that only this account's alarms may publish to; with one, it uses
// yours and makes none. Either way every alarm notifies that topic when it
// goes into ALARM and when it is OK again, AlarmEmail subscribes its
// address to it only when set, and the output AlarmTopicArn names it.
func TestAlarmsNotifyTheTopic(t *testing.T) {
	t.Parallel()
	const yours = "arn:aws:sns:us-east-1:123456789012:ops-pager"
	for _, c := range []struct {
		name         string
		params       map[string]string
		topic        any
		email        string
		createsTopic bool
	}{
		{"a topic of its own", with(nil), map[string]any{"Ref": "AlarmTopic"}, "", true},
		{"its own topic, mailed", with(nil, "AlarmEmail", "ops@example.com"), map[string]any{"Ref": "AlarmTopic"}, "ops@example.com", true},
		{"your topic", with(existing, "AlarmTopicArn", yours), yours, "", false},
		{"your topic, mailed", with(nil, "AlarmTopicArn", yours, "AlarmEmail", "ops@example.com"), yours, "ops@example.com", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := deploy(t, scenario{params: c.params})
			want := canon([]any{c.topic})
			alarms := 0
			for id, r := range d.res {
				if r.Type != "AWS::CloudWatch::Alarm" {
					continue
				}
				alarms++
				for _, k := range []string{"AlarmActions", "OKActions"} {
					if got := canon(r.Properties[k]); got != want {
						t.Errorf("%s %s = %s, want %s", id, k, got, want)
					}
				}
			}
			if alarms < 18 {
				t.Errorf("%d alarms, want at least 18", alarms)
			}
			topic, made := d.res["AlarmTopic"]
			if made != c.createsTopic {
				t.Fatalf("AlarmTopic made = %v, want %v", made, c.createsTopic)
			}
			if made {
				if k, ok := topic.Properties["KmsMasterKeyId"]; ok {
					t.Errorf("the alarm topic is encrypted with %v: CloudWatch cannot publish under the AWS managed key", k)
				}
				pol := d.res["AlarmTopicPolicy"].Properties
				if canon(pol["Topics"]) != canon([]any{c.topic}) {
					t.Errorf("the topic policy is on %v", pol["Topics"])
				}
				sts := pol["PolicyDocument"].(map[string]any)["Statement"].([]any)
				st := sts[0].(map[string]any)
				if len(sts) != 1 || st["Effect"] != "Allow" || canon(st["Principal"]) != `{"Service":"cloudwatch.amazonaws.com"}` || st["Action"] != "sns:Publish" ||
					!strings.Contains(canon(st["Condition"]), `"aws:SourceAccount":"123456789012"`) ||
					!strings.Contains(canon(st["Condition"]), `arn:aws:cloudwatch:us-east-1:123456789012:alarm:*`) {
					t.Errorf("topic policy %s: want only this account's alarms publishing", canon(sts))
				}
			} else if _, ok := d.res["AlarmTopicPolicy"]; ok {
				t.Error("a policy on your topic: it is yours to set")
			}
			var subs []samtemplate.Resource
			for _, r := range d.res {
				if r.Type == "AWS::SNS::Subscription" {
					subs = append(subs, r)
				}
			}
			switch {
			case c.email == "" && len(subs) > 0:
				t.Errorf("subscriptions without AlarmEmail: %v", subs)
			case c.email != "":
				if len(subs) != 1 || subs[0].Properties["Protocol"] != "email" || subs[0].Properties["Endpoint"] != c.email || canon(subs[0].Properties["TopicArn"]) != canon(c.topic) {
					t.Errorf("subscriptions %v, want one e-mail to %s on %v", subs, c.email, c.topic)
				}
			}
			outs, err := d.st.Outputs()
			if err != nil {
				t.Fatal(err)
			}
			if canon(outs["AlarmTopicArn"]) != canon(c.topic) {
				t.Errorf("output AlarmTopicArn = %v, want %v", outs["AlarmTopicArn"], c.topic)
			}
		})
	}
}

// TestRulesAcceptWhatWorks: the rules that guard the deploy-time edges let
// through the combinations that deploy: auto-pause on an engine that has
// it, a region the embedded RDS CA bundle covers (or any region with
// DatabaseSslMode=require, or existing mode), zones named in create mode.
func TestRulesAcceptWhatWorks(t *testing.T) {
	t.Parallel()
	doc := translated(t)
	for name, params := range map[string]map[string]string{
		"auto-pause on 16.3":           with(nil, "DatabaseMinCapacity", "0", "DatabaseEngineVersion", "16.3"),
		"auto-pause on 15.7":           with(nil, "DatabaseMinCapacity", "0", "DatabaseEngineVersion", "15.7"),
		"auto-pause on 15.10":          with(nil, "DatabaseMinCapacity", "0", "DatabaseEngineVersion", "15.10"),
		"auto-pause on 17.0":           with(nil, "DatabaseMinCapacity", "0", "DatabaseEngineVersion", "17.0"),
		"15.2 without auto-pause":      with(nil, "DatabaseEngineVersion", "15.2"),
		"a region the bundle names":    with(nil, "AWS::Region", "eu-south-2"),
		"another region, require":      with(nil, "AWS::Region", "il-central-1", "DatabaseSslMode", "require"),
		"another region, existing":     with(existing, "AWS::Region", "il-central-1"),
		"zones named in create mode":   with(nil, "AvailabilityZones", "us-east-1c,us-east-1d"),
		"the largest body API GW gets": with(nil, "MaxBodyBytes", "4194304"),
	} {
		st, err := samtemplate.NewStack(doc, params)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if failed, err := st.FailedRules(); err != nil || len(failed) > 0 {
			t.Errorf("%s: refused: %v %v", name, failed, err)
		}
	}
}

// TestParametersRefuseWhatCannotDeploy: values that would fail at deploy
// time are refused by the parameters' own constraints: a VPC too small for
// its two /20 subnets, zones other than exactly two, a body API Gateway
// cannot hand the receiver, a minor version written so that it slips past
// the auto-pause rule's list.
func TestParametersRefuseWhatCannotDeploy(t *testing.T) {
	t.Parallel()
	doc := translated(t)
	for name, params := range map[string]map[string]string{
		"a /20 VPC":                   with(nil, "NewVpcCidr", "10.0.0.0/20"),
		"a /24 VPC":                   with(nil, "NewVpcCidr", "10.0.0.0/24"),
		"a /15 VPC":                   with(nil, "NewVpcCidr", "10.0.0.0/15"),
		"one zone":                    with(nil, "AvailabilityZones", "us-east-1a"),
		"three zones":                 with(nil, "AvailabilityZones", "us-east-1a,us-east-1b,us-east-1c"),
		"zones with a space":          with(nil, "AvailabilityZones", "us-east-1a, us-east-1b"),
		"a body past Lambda's limit":  with(nil, "MaxBodyBytes", "4194305"),
		"a minor with a leading zero": with(nil, "DatabaseEngineVersion", "15.06"),
		"a log level that drops EMF":  with(nil, "LogLevel", "WARN"),
		"not an e-mail address":       with(nil, "AlarmEmail", "ops"),
	} {
		if _, err := samtemplate.NewStack(doc, params); err == nil {
			t.Errorf("%s: %v accepted", name, params)
		}
	}
	for _, cidr := range []string{"10.0.0.0/16", "10.0.0.0/17", "10.0.0.0/18", "10.0.0.0/19"} {
		if _, err := samtemplate.NewStack(doc, with(nil, "NewVpcCidr", cidr)); err != nil {
			t.Errorf("NewVpcCidr %s refused: %v", cidr, err)
		}
	}
}

// TestSubnetsFitTheVpc: the two private subnets are cut from the VPC's
// range with Fn::Cidr; for every prefix NewVpcCidr allows, the blocks it
// asks for fit in the VPC (Fn::Cidr fails the deploy otherwise), and in
// two zones: AvailabilityZones' when given, else the region's first two.
func TestSubnetsFitTheVpc(t *testing.T) {
	t.Parallel()
	d := deploy(t, scenario{params: with(nil)})
	pattern := regexp.MustCompile(allowedPattern(t, "NewVpcCidr"))
	for bits := 8; bits <= 28; bits++ {
		vpc := netip.MustParsePrefix(fmt.Sprintf("10.0.0.0/%d", bits))
		if !pattern.MatchString(vpc.String()) {
			continue
		}
		for i, id := range []string{"PrivateSubnetA", "PrivateSubnetB"} {
			sel := d.res[id].Properties["CidrBlock"].(map[string]any)["Fn::Select"].([]any)
			cidr := sel[1].(map[string]any)["Fn::Cidr"].([]any)
			idx, _ := strconv.Atoi(fmt.Sprint(sel[0]))
			count, _ := strconv.Atoi(fmt.Sprint(cidr[1]))
			hostBits, _ := strconv.Atoi(fmt.Sprint(cidr[2]))
			if target(cidr[0]) != "Vpc" || idx != i {
				t.Fatalf("%s: CidrBlock %s", id, canon(sel))
			}
			if need := count << hostBits; need > 1<<(32-bits) {
				t.Errorf("NewVpcCidr %s is allowed, but %d subnets of %d host bits need %d addresses, more than its %d", vpc, count, hostBits, need, 1<<(32-bits))
			}
		}
	}
	for _, c := range []struct {
		zones string
		want  []string
	}{
		{"", []string{`{"Fn::Select":[0,{"Fn::GetAZs":""}]}`, `{"Fn::Select":[1,{"Fn::GetAZs":""}]}`}},
		{"us-east-1c,us-east-1f", []string{`"us-east-1c"`, `"us-east-1f"`}},
	} {
		d := deploy(t, scenario{params: with(nil, "AvailabilityZones", c.zones)})
		for i, id := range []string{"PrivateSubnetA", "PrivateSubnetB"} {
			if got := canon(d.res[id].Properties["AvailabilityZone"]); got != c.want[i] {
				t.Errorf("AvailabilityZones %q: %s in %s, want %s", c.zones, id, got, c.want[i])
			}
		}
	}
}

// allowedPattern returns a parameter's AllowedPattern, for a test that
// checks what it admits.
func allowedPattern(t *testing.T, name string) string {
	t.Helper()
	p, _ := translated(t)["Parameters"].(map[string]any)[name].(map[string]any)["AllowedPattern"].(string)
	if p == "" {
		t.Fatalf("parameter %s has no AllowedPattern", name)
	}
	return p
}

// TestRdsCaRuleNamesTheBundlesRegions: rule RdsCaCoversTheRegion lets
// create mode check certificates in exactly the regions whose RDS root CAs
// shared/rdsca/bundle.pem holds (read off the certificates' subjects, the
// Beta and Preview roots counting for their regions): renewing the bundle
// without the rule, or the rule without the bundle, fails here.
func TestRdsCaRuleNamesTheBundlesRegions(t *testing.T) {
	t.Parallel()
	certs, err := rdsca.Certificates()
	if err != nil {
		t.Fatal(err)
	}
	subject := regexp.MustCompile(`^Amazon RDS (?:(?:Beta|Preview) )?([a-z]{2}(?:-[a-z]+)+-[0-9]+) Root CA (?:RSA2048|RSA4096|ECC384) G1$`)
	inBundle := map[string]bool{}
	for _, c := range certs {
		if m := subject.FindStringSubmatch(c.Subject.CommonName); m != nil {
			inBundle[m[1]] = true
		} else if strings.HasPrefix(c.Subject.CommonName, "Amazon RDS") {
			t.Errorf("a certificate whose subject names no region: %q", c.Subject.CommonName)
		}
	}
	doc, err := samtemplate.ReadFile(filepath.Join(repoRoot, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rule := doc["Rules"].(map[string]any)["RdsCaCoversTheRegion"].(map[string]any)
	contains := rule["Assertions"].([]any)[0].(map[string]any)["Assert"].(map[string]any)["Fn::Contains"].([]any)
	if canon(contains[1]) != `{"Ref":"AWS::Region"}` {
		t.Fatalf("the rule does not check the region: %s", canon(contains))
	}
	inRule := samtemplate.Strings(contains[0])
	sort.Strings(inRule)
	if want := keys(inBundle); !slices.Equal(inRule, want) || len(want) < 20 {
		t.Errorf("the rule names %d regions %v,\nthe bundle %d %v", len(inRule), inRule, len(want), want)
	}
	// The rule is what refuses it, with a way out.
	st, err := samtemplate.NewStack(translated(t), with(nil, "AWS::Region", "mx-central-1"))
	if err != nil {
		t.Fatal(err)
	}
	failed, _ := st.FailedRules()
	if s := strings.Join(failed, "\n"); !strings.Contains(s, "RdsCaCoversTheRegion") || !strings.Contains(s, "DatabaseSslMode=require") {
		t.Errorf("create mode in mx-central-1: failed rules %q", failed)
	}
}

// TestSchedulesDropStaleTicks: every schedule that invokes a function
// gives up on a tick it could not deliver within the function's period (5
// minutes at least), and so does the function's asynchronous queue for a
// throttled one, so throttled ticks are never run hours late, all at once
// (EventBridge's default is 24 hours, Lambda's 6).
func TestSchedulesDropStaleTicks(t *testing.T) {
	t.Parallel()
	d := deploy(t, scenario{params: with(nil)})
	scheduled := 0
	for id, r := range d.res {
		var targets []any
		var expr string
		switch r.Type {
		case "AWS::Events::Rule":
			targets, _ = r.Properties["Targets"].([]any)
			expr, _ = r.Properties["ScheduleExpression"].(string)
		case "AWS::Scheduler::Schedule":
			targets = []any{r.Properties["Target"]}
			expr, _ = r.Properties["ScheduleExpression"].(string)
		default:
			continue
		}
		if expr == "" {
			continue
		}
		period := 5 * time.Minute
		if p, err := samtemplate.ParseRate(expr); err == nil && p > period {
			period = p
		}
		for _, tg := range targets {
			tm := tg.(map[string]any)
			fn := target(tm["Arn"])
			if d.res[fn].Type != "AWS::Lambda::Function" {
				continue
			}
			scheduled++
			age := seconds(tm["RetryPolicy"], "MaximumEventAgeInSeconds")
			if age <= 0 || age > period {
				t.Errorf("%s (%s) keeps retrying %s's tick for %v, want at most %v", id, expr, fn, age, period)
			}
			found := false
			for _, c := range d.res {
				if c.Type == "AWS::Lambda::EventInvokeConfig" && target(c.Properties["FunctionName"]) == fn {
					found = true
					if a := seconds(c.Properties, "MaximumEventAgeInSeconds"); a <= 0 || a > period {
						t.Errorf("%s's asynchronous queue keeps a tick %v, want at most %v", fn, a, period)
					}
				}
			}
			if !found {
				t.Errorf("%s has no EventInvokeConfig: a throttled tick waits up to 6 hours", fn)
			}
		}
	}
	if scheduled == 0 {
		t.Error("no schedule invokes a function")
	}
}

func seconds(m any, k string) time.Duration {
	v, _ := m.(map[string]any)[k]
	n, err := strconv.Atoi(fmt.Sprint(v))
	if err != nil {
		return 0
	}
	return time.Duration(n) * time.Second
}

// TestAccessLogsNeverLogThePath: the API logs one JSON line per request to
// a log group with the stack's retention, and the line holds only
// $context variables that cannot carry a secret: never the path (the
// tokened route's path is the source's secret token), a header, the query
// string or the body; the route key is the route's template.
func TestAccessLogsNeverLogThePath(t *testing.T) {
	t.Parallel()
	d := deploy(t, scenario{params: with(nil, "LogRetentionDays", "90")})
	als, ok := d.res["WebhookApiApiGatewayDefaultStage"].Properties["AccessLogSettings"].(map[string]any)
	if !ok {
		t.Fatal("the API's stage has no access logs")
	}
	group := target(als["DestinationArn"])
	if r := d.res[group]; r.Type != "AWS::Logs::LogGroup" || canon(r.Properties["RetentionInDays"]) != `"90"` {
		t.Errorf("access logs go to %s (%v), want a log group kept LogRetentionDays", group, r.Properties)
	}
	format, _ := als["Format"].(string)
	var fields map[string]string
	if err := json.Unmarshal([]byte(format), &fields); err != nil {
		t.Fatalf("the format is not one JSON object of strings: %v\n%s", err, format)
	}
	variable := regexp.MustCompile(`^\$context\.[A-Za-z]+(\.[A-Za-z]+)*$`)
	for k, v := range fields {
		low := strings.ToLower(v)
		if !variable.MatchString(v) || strings.Contains(low, "path") || strings.Contains(low, "header") ||
			strings.Contains(low, "query") || strings.Contains(low, "body") || strings.Contains(v, "$request") {
			t.Errorf("access log field %s = %s may log a secret", k, v)
		}
	}
	if strings.Contains(format, "$request") || strings.Contains(format, "$context.path") || strings.Contains(format, "$input") {
		t.Errorf("format %s", format)
	}
	for _, v := range []string{"$context.routeKey", "$context.status", "$context.requestId", "$context.requestTime", "$context.identity.sourceIp",
		"$context.responseLength", "$context.integrationLatency", "$context.integrationErrorMessage"} {
		if !slices.Contains(slices.Collect(maps.Values(fields)), v) {
			t.Errorf("the access log does not record %s", v)
		}
	}
}

// TestLambdaLogLevels: every function logs JSON to its own log group, at
// LogLevel for its own lines (Lambda filters them by their "level" and sets
// AWS_LAMBDA_LOG_LEVEL, which the functions read) and WARN for Lambda's;
// no function sets LOG_LEVEL, which would say otherwise. LogLevel offers
// DEBUG and INFO only: the metrics ride on INFO lines.
func TestLambdaLogLevels(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"INFO", "DEBUG"} {
		d := deploy(t, scenario{params: with(nil, "LogLevel", level)})
		for id := range dbRoles {
			p := d.res[id].Properties
			lc, _ := p["LoggingConfig"].(map[string]any)
			if lc["LogFormat"] != "JSON" || lc["ApplicationLogLevel"] != level || lc["SystemLogLevel"] != "WARN" || target(lc["LogGroup"]) == "" {
				t.Errorf("%s: LoggingConfig %s, want JSON at %s, system WARN, its own group", id, canon(lc), level)
			}
			if v, ok := p["Environment"].(map[string]any)["Variables"].(map[string]any)["LOG_LEVEL"]; ok {
				t.Errorf("%s sets LOG_LEVEL=%v over AWS_LAMBDA_LOG_LEVEL", id, v)
			}
		}
	}
	allowed := samtemplate.Strings(translated(t)["Parameters"].(map[string]any)["LogLevel"].(map[string]any)["AllowedValues"])
	if !slices.Equal(allowed, []string{"DEBUG", "INFO"}) {
		t.Errorf("LogLevel allows %v: above INFO, Lambda drops the metrics' lines", allowed)
	}
}

// checkEndpointPolicy: the interface endpoints the stack makes each have a
// policy of their own (without one, AWS attaches full access), and the
// Secrets Manager one lets through what the stack's functions read there
// and nothing else: one Allow of secretsmanager:GetSecretValue, by
// principals of this account, on exactly the secrets the functions' roles
// may read.
func (d deployed) checkEndpointPolicy(t *testing.T) {
	t.Helper()
	var read []string
	for id := range dbRoles {
		for _, st := range statements(d.res[target(d.res[id].Properties["Role"])]) {
			if st["Effect"] == "Allow" && slices.Contains(samtemplate.Strings(st["Action"]), "secretsmanager:GetSecretValue") {
				for _, r := range resources(st) {
					if c := canon(r); !slices.Contains(read, c) {
						read = append(read, c)
					}
				}
			}
		}
	}
	sort.Strings(read)
	for id, r := range d.res {
		if r.Type != "AWS::EC2::VPCEndpoint" || r.Properties["VpcEndpointType"] != "Interface" {
			continue
		}
		doc, ok := r.Properties["PolicyDocument"].(map[string]any)
		if !ok {
			t.Errorf("%s has no endpoint policy: anyone in the VPC may use it for anything", id)
			continue
		}
		if name, _ := r.Properties["ServiceName"].(string); !strings.HasSuffix(name, ".secretsmanager") {
			continue
		}
		sts, _ := doc["Statement"].([]any)
		if len(sts) != 1 {
			t.Errorf("%s: %d statements, want one", id, len(sts))
			continue
		}
		st := sts[0].(map[string]any)
		if st["Effect"] != "Allow" || st["Action"] != "secretsmanager:GetSecretValue" || canon(st["Principal"]) != `{"AWS":"123456789012"}` ||
			canon(st["Condition"]) != `{"StringEquals":{"aws:PrincipalAccount":"123456789012"}}` {
			t.Errorf("%s: %s, want GetSecretValue by this account only", id, canon(st))
		}
		var got []string
		for _, r := range resources(st) {
			got = append(got, canon(r))
		}
		sort.Strings(got)
		if !slices.Equal(got, read) {
			t.Errorf("%s lets through %v,\nthe functions read %v", id, got, read)
		}
	}
}

// checkDatabaseLog: in create mode the cluster exports PostgreSQL's log to
// the log group RDS names after it, which the stack makes with the stack's
// retention before the instance that writes it; the cluster keeps the
// identifier CloudFormation gave it (naming it would replace it).
func (d deployed) checkDatabaseLog(t *testing.T) {
	t.Helper()
	if !d.create {
		return
	}
	c := d.res["DatabaseCluster"].Properties
	if canon(c["EnableCloudwatchLogsExports"]) != `["postgresql"]` {
		t.Errorf("cluster log exports %v", c["EnableCloudwatchLogsExports"])
	}
	if v, ok := c["DBClusterIdentifier"]; ok {
		t.Errorf("the cluster is named %v: setting a name replaces a running cluster", v)
	}
	g := d.res["DatabaseLogGroup"].Properties
	if canon(g["LogGroupName"]) != canon(sub("/aws/rds/cluster/${DatabaseCluster}/postgresql")) || canon(g["RetentionInDays"]) != canon(d.st.Param("LogRetentionDays")) {
		t.Errorf("database log group %s", canon(g))
	}
	if !slices.Contains(d.res["DatabaseInstance"].DependsOn, "DatabaseLogGroup") {
		t.Error("the instance may write its log before the log group exists (RDS would make it, without retention)")
	}
}

// checkProxyTarget: in create mode every function that connects through
// RDS Proxy waits for the proxy's target group, so it never starts before
// the cluster is registered as the proxy's target.
func (d deployed) checkProxyTarget(t *testing.T) {
	t.Helper()
	if !d.create {
		return
	}
	for fn := range roleSecrets {
		if !d.dependsOn(fn, "DatabaseProxyTargetGroup") {
			t.Errorf("%s does not wait for DatabaseProxyTargetGroup", fn)
		}
	}
}

// TestMaxBodyFitsLambdasPayload: the largest body MaxBodyBytes allows,
// base64-encoded as API Gateway hands it over, inside the largest event
// around it (10,240 bytes of request line and header values, each byte
// escaped to six in JSON, the header names besides, the path again as
// rawPath and in the request context), fits Lambda's 6 MB (6,291,456
// bytes) synchronous payload.
func TestMaxBodyFitsLambdasPayload(t *testing.T) {
	t.Parallel()
	const lambdaPayload = 6 << 20 // Lambda's synchronous request limit
	const headerBudget = 10240    // API Gateway's request line and header values
	max := int(translated(t)["Parameters"].(map[string]any)["MaxBodyBytes"].(map[string]any)["MaxValue"].(float64))
	path := "/webhooks/stripe/" + strings.Repeat("<", 256)
	left := headerBudget - len("POST "+path+" HTTP/1.1")
	headers := map[string]string{}
	for i := 0; left > 0; i++ {
		n := min(left, 100)
		headers[fmt.Sprintf("x-header-with-a-long-name-%03d", i)] = strings.Repeat("<", n) // "<" escapes to \u003c
		left -= n
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST /webhooks/{source}/{token}", RawPath: path, RawQueryString: "",
		Cookies: []string{}, Headers: headers, PathParameters: map[string]string{"source": "stripe", "token": strings.Repeat("<", 256)},
		Body: base64.StdEncoding.EncodeToString(make([]byte, max)), IsBase64Encoded: true,
	}
	ev.RequestContext.HTTP = events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: path, Protocol: "HTTP/1.1",
		SourceIP: "2001:db8::ffff:ffff:ffff:ffff", UserAgent: headers["x-header-with-a-long-name-000"]}
	ev.RequestContext.RouteKey, ev.RequestContext.DomainName = ev.RouteKey, "abcdefghij.execute-api.ap-southeast-4.amazonaws.com"
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > lambdaPayload {
		t.Errorf("a %d-byte body makes a %d-byte event, over Lambda's %d", max, len(b), lambdaPayload)
	}
	if envelope := len(b) - base64.StdEncoding.EncodedLen(max); envelope < 6*headerBudget {
		t.Errorf("the test's envelope (%d bytes) is smaller than the worst escaping of the headers", envelope)
	}
	t.Logf("largest body %d bytes: event %d bytes, %d under Lambda's limit (%.1f%% margin)", max, len(b), lambdaPayload-len(b),
		100*float64(lambdaPayload-len(b))/lambdaPayload)
	if max < 1<<20 {
		t.Errorf("MaxBodyBytes' maximum %d is below its default", max)
	}
}
