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
	"github.com/webhook-inbox/webhook-inbox/shared/migrator"
	"github.com/webhook-inbox/webhook-inbox/shared/rdsca"
)

// These checks hold the stack to what it needs at deploy time and at
// teardown: an order CloudFormation can delete in, alarms that reach
// someone, parameter values refused before anything is created rather than
// by a service halfway through, and the operability details (access logs,
// log levels, endpoint policies, the database's log).

// TestSchemaOutlivesItsPathToS3: in every profile and mode, the migration
// custom resource (DatabaseSchema) depends on each resource of the
// migration function's network: its subnets and security group, and its
// way to S3 (the gateway endpoint, its route tables and those tables'
// subnet associations). CloudFormation deletes a resource before what it
// depends on
// (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-attribute-dependson.html),
// so on `sam delete` (or a rollback) the function keeps its whole network
// for as long as the resource can call it. CloudFormation's requests are
// answered from outside the VPC: the ServiceToken is the front, which, like
// the relay, has no VpcConfig, and the migration function inside may call
// no AWS API at all (no Secrets Manager, no interface endpoint on its
// path). The control bucket is emptied before it goes: SourcesCopy, whose
// Delete the relay answers by emptying it, depends on it (and on the
// relay), and the receiver, which reads the copy, depends on SourcesCopy.
func TestSchemaOutlivesItsPathToS3(t *testing.T) {
	t.Parallel()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			d := deploy(t, sc)
			var want []string
			switch {
			case d.create:
				want = []string{"MigratorSecurityGroup", "PrivateRouteTable", "PrivateSubnetA", "PrivateSubnetARouteTable",
					"PrivateSubnetB", "PrivateSubnetBRouteTable", "S3Endpoint"}
			case d.vpc && !d.nat:
				// Your subnets and route tables are not the stack's to delete.
				want = []string{"MigratorSecurityGroup", "S3Endpoint"}
			case d.vpc:
				want = []string{"MigratorSecurityGroup"}
			}
			path := d.schemaPath()
			if !slices.Equal(path, want) {
				t.Errorf("the migration function's network = %v, want %v", path, want)
			}
			for _, id := range path {
				if !d.dependsOn("DatabaseSchema", id) {
					t.Errorf("DatabaseSchema does not depend on %s (%s): CloudFormation may delete it first", id, d.res[id].Type)
				}
			}
			if !d.vpc {
				for id, r := range d.res {
					if strings.HasPrefix(r.Type, "AWS::EC2::") {
						t.Errorf("no VPC, yet %s (%s)", id, r.Type)
					}
				}
			}
			// Inside the VPC the migration function calls no AWS API: it
			// writes its logs through Lambda, and its front hands it the
			// admin's credentials.
			if got := keys(allowed(d.roleOf("MigrationFunction"))); !slices.Equal(got, []string{"logs:CreateLogStream", "logs:PutLogEvents"}) {
				t.Errorf("the migration function may %v, want its logs only", got)
			}
			if canon(d.res["DatabaseSchema"].Properties["ServiceToken"]) != canon(map[string]any{"Fn::GetAtt": []any{"MigrationFrontFunction", "Arn"}}) {
				t.Errorf("DatabaseSchema's ServiceToken is %v, want the front", d.res["DatabaseSchema"].Properties["ServiceToken"])
			}
			for id := range outsideVpc {
				if d.inVpc(id) {
					t.Errorf("%s runs in the VPC: it answers CloudFormation and calls AWS from outside it", id)
				}
			}
			for _, dep := range [][2]string{{"SourcesCopy", "ControlBucket"}, {"SourcesCopy", "RelayFunction"}, {"ReceiverFunction", "SourcesCopy"}} {
				if !d.dependsOn(dep[0], dep[1]) {
					t.Errorf("%s does not depend on %s", dep[0], dep[1])
				}
			}
			if canon(d.res["SourcesCopy"].Properties["ServiceToken"]) != canon(map[string]any{"Fn::GetAtt": []any{"RelayFunction", "Arn"}}) {
				t.Errorf("SourcesCopy's ServiceToken is %v, want the relay", d.res["SourcesCopy"].Properties["ServiceToken"])
			}
			// The property that carries the order is one the migration
			// function accepts (it refuses any other).
			known := []string{"ServiceToken", "ServiceTimeout", migrator.PropAuth, migrator.PropRelease,
				migrator.PropReceiverSecretArn, migrator.PropProcessorSecretArn, migrator.PropArchiverSecretArn,
				migrator.PropOperatorReadSecretArn, migrator.PropOperatorSecretArn, migrator.PropNetworkPath}
			for k := range d.res["DatabaseSchema"].Properties {
				if !slices.Contains(known, k) {
					t.Errorf("DatabaseSchema property %s: the migration function refuses it (known %v)", k, known)
				}
			}
		})
	}
}

// schemaPath lists the template's resources of the migration function's
// network, sorted: the subnets and security groups of its VpcConfig, the
// gateway endpoints of its VPC with their route tables, and the subnet
// associations of those route tables.
func (d deployed) schemaPath() []string {
	vc, ok := d.res["MigrationFunction"].Properties["VpcConfig"].(map[string]any)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	add := func(v any) {
		if id := target(v); id != "" {
			if _, ok := d.res[id]; ok {
				seen[id] = true
			}
		}
	}
	list := func(v any) []any { l, _ := v.([]any); return l }
	subnets := list(vc["SubnetIds"])
	for _, v := range append(slices.Clone(subnets), list(vc["SecurityGroupIds"])...) {
		add(v)
	}
	for id, r := range d.res {
		if r.Type != "AWS::EC2::VPCEndpoint" || r.Properties["VpcEndpointType"] != "Gateway" || len(subnets) == 0 || canon(r.Properties["VpcId"]) != canon(d.vpcOf(subnets[0])) {
			continue
		}
		seen[id] = true
		for _, v := range list(r.Properties["RouteTableIds"]) {
			add(v)
		}
	}
	for id, r := range d.res {
		if r.Type == "AWS::EC2::SubnetRouteTableAssociation" && seen[target(r.Properties["RouteTableId"])] {
			seen[id] = true
		}
	}
	return keys(seen)
}

// checkMigration: the migration function in the VPC applies the schema
// (MIGRATOR_MODE=apply) straight to the database as its owner, never
// through the proxy, without IAM tokens or a secret of its own, within a
// timeout shorter than its front's, which invokes exactly this deploy's
// version of it (MIGRATOR_FUNCTION, the Release DatabaseSchema names).
func (d deployed) checkMigration(t *testing.T) {
	t.Helper()
	env := envOf(d.res["MigrationFunction"])
	host := any("db.example.internal")
	switch {
	case d.instance():
		host = map[string]any{"Fn::GetAtt": []any{"PostgresInstance", "Endpoint.Address"}}
	case d.cluster():
		host = map[string]any{"Fn::GetAtt": []any{"DatabaseCluster", "Endpoint.Address"}}
	}
	if env["MIGRATOR_MODE"] != "apply" || canon(env["DATABASE_HOST"]) != canon(host) || env["DATABASE_PROXY_TARGET"] != "" {
		t.Errorf("the migration function: MIGRATOR_MODE=%v, DATABASE_HOST=%s, DATABASE_PROXY_TARGET=%v; want apply, straight to %s", env["MIGRATOR_MODE"], canon(env["DATABASE_HOST"]), env["DATABASE_PROXY_TARGET"], canon(host))
	}
	front := envOf(d.res["MigrationFrontFunction"])
	if front["MIGRATOR_MODE"] != "front" || canon(front["MIGRATOR_FUNCTION"]) != canon(d.res["DatabaseSchema"].Properties["Release"]) {
		t.Errorf("the front: MIGRATOR_MODE=%v, MIGRATOR_FUNCTION=%s; want front, invoking DatabaseSchema's Release %s", front["MIGRATOR_MODE"], canon(front["MIGRATOR_FUNCTION"]), canon(d.res["DatabaseSchema"].Properties["Release"]))
	}
	apply, frontTimeout := seconds(d.res["MigrationFunction"].Properties, "Timeout"), seconds(d.res["MigrationFrontFunction"].Properties, "Timeout")
	if apply <= 0 || apply >= frontTimeout {
		t.Errorf("the migration function's timeout %v, its front's %v: the front must outwait it, to answer with its result", apply, frontTimeout)
	}
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
// it (economy always pauses; high-volume at a minimum of 0 only; the
// standard profile's RDS instance never does, whatever its version), IAM
// authentication named in create mode, a region the embedded RDS CA
// bundle covers (or any region with DatabaseSslMode=require, or existing
// mode), zones named in create mode.
func TestRulesAcceptWhatWorks(t *testing.T) {
	t.Parallel()
	doc := translated(t)
	cases := map[string]map[string]string{
		"economy on 16.3":                 with(nil, "Profile", economy, "DatabaseEngineVersion", "16.3"),
		"economy on 15.7":                 with(nil, "Profile", economy, "DatabaseEngineVersion", "15.7"),
		"economy on 15.10":                with(nil, "Profile", economy, "DatabaseEngineVersion", "15.10"),
		"economy on 17.0":                 with(nil, "Profile", economy, "DatabaseEngineVersion", "17.0"),
		"high-volume paused on 16.3":      with(nil, "Profile", highVolume, "DatabaseMinCapacity", "0", "DatabaseEngineVersion", "16.3"),
		"high-volume on 15.2, not paused": with(nil, "Profile", highVolume, "DatabaseEngineVersion", "15.2"),
		"standard on 16.2":                with(nil, "Profile", standard, "DatabaseEngineVersion", "16.2", "DatabaseMinCapacity", "0"),
		"standard on 15.2":                with(nil, "Profile", standard, "DatabaseEngineVersion", "15.2"),
		"economy, existing, on 16.2":      with(existing, "Profile", economy, "DatabaseEngineVersion", "16.2"),
		"a region the bundle names":       with(nil, "AWS::Region", "eu-south-2"),
		"another region, require":         with(nil, "AWS::Region", "il-central-1", "DatabaseSslMode", "require"),
		"another region, existing":        with(existing, "AWS::Region", "il-central-1"),
		"zones named in create mode":      with(nil, "AvailabilityZones", "us-east-1c,us-east-1d"),
		"the largest body API GW gets":    with(nil, "MaxBodyBytes", "4194304"),
		"existing with passwords":         with(existing, "DatabaseAuth", "password"),
	}
	for _, p := range profiles {
		cases[p+", create, iam named"] = with(nil, "Profile", p, "DatabaseAuth", "iam")
		cases[p+", create, auto"] = with(nil, "Profile", p, "DatabaseAuth", "auto")
	}
	for name, params := range cases {
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
		"an unknown profile":          with(nil, "Profile", "premium"),
		"an unknown dashboard choice": with(nil, "MonitoringDashboard", "sometimes"),
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

// seconds reads a number of seconds from m[k] (0 when it is not one).
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
// policy of their own (without one, AWS attaches full access:
// https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-access.html),
// each one Allow, by principals of this account only, of what the
// functions in the VPC do through it and nothing else: the Lambda endpoint
// invokes the processor (its ARN, and its versions and aliases), the
// Secrets Manager one reads exactly the secrets the functions' roles may
// read.
func (d deployed) checkEndpointPolicy(t *testing.T) {
	t.Helper()
	// What the functions in the VPC may do, by action.
	through := map[string][]string{}
	for id := range dbRoles {
		if !d.inVpc(id) {
			continue
		}
		for action, res := range allowed(d.roleOf(id)) {
			for _, r := range res {
				if !slices.Contains(through[action], r) {
					through[action] = append(through[action], r)
				}
			}
		}
	}
	for a := range through {
		sort.Strings(through[a])
	}
	for id, r := range d.res {
		if r.Type != "AWS::EC2::VPCEndpoint" || r.Properties["VpcEndpointType"] != "Interface" {
			continue
		}
		doc, ok := r.Properties["PolicyDocument"].(map[string]any)
		if !ok {
			t.Errorf("%s has no endpoint policy: anyone in the VPC may use it for anything", id)
			continue
		}
		sts := policyStatements(doc)
		if len(sts) != 1 {
			t.Errorf("%s: %d statements, want one", id, len(sts))
			continue
		}
		st := sts[0]
		var action string
		var want []string
		switch name, _ := r.Properties["ServiceName"].(string); {
		case strings.HasSuffix(name, ".secretsmanager"):
			action, want = "secretsmanager:GetSecretValue", through["secretsmanager:GetSecretValue"]
		case strings.HasSuffix(name, ".lambda"):
			action = "lambda:InvokeFunction"
			want = []string{canon(map[string]any{"Fn::GetAtt": []any{"ProcessorFunction", "Arn"}}), canon(sub("${ProcessorFunction.Arn}:*"))}
			for _, r := range through[action] {
				if !slices.Contains(want, r) {
					t.Errorf("a function in the VPC may invoke %s, which %s does not let through", r, id)
				}
			}
		default:
			t.Errorf("%s: an interface endpoint for %s, which no function needs", id, name)
			continue
		}
		if st["Effect"] != "Allow" || st["Action"] != action || canon(st["Principal"]) != `{"AWS":"123456789012"}` ||
			canon(st["Condition"]) != `{"StringEquals":{"aws:PrincipalAccount":"123456789012"}}` {
			t.Errorf("%s: %s, want %s by this account only", id, canon(st), action)
		}
		var got []string
		for _, r := range resources(st) {
			got = append(got, canon(r))
		}
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s lets through %v,\nwant %v", id, got, want)
		}
	}
}

// checkDatabaseLog: in create mode the database exports PostgreSQL's log to
// the log group RDS names after it, which the stack makes with the stack's
// retention before the instance that writes it: /aws/rds/instance/<id>/
// for the standard profile's instance (named, so that the group's name is
// known), /aws/rds/cluster/<cluster>/ for Aurora, whose cluster keeps the
// identifier CloudFormation gave it (naming it would replace it).
func (d deployed) checkDatabaseLog(t *testing.T) {
	t.Helper()
	if !d.create {
		return
	}
	db, group, writer, name := "DatabaseCluster", "DatabaseLogGroup", "DatabaseInstance", sub("/aws/rds/cluster/${DatabaseCluster}/postgresql")
	if d.instance() {
		db, group, writer, name = "PostgresInstance", "PostgresLogGroup", "PostgresInstance", "/aws/rds/instance/webhook-inbox-postgres/postgresql"
		if id := d.res[db].Properties["DBInstanceIdentifier"]; id != "webhook-inbox-postgres" {
			t.Errorf("the instance is named %v, not what its log group says", id)
		}
	} else if v, ok := d.res[db].Properties["DBClusterIdentifier"]; ok {
		t.Errorf("the cluster is named %v: setting a name replaces a running cluster", v)
	}
	if canon(d.res[db].Properties["EnableCloudwatchLogsExports"]) != `["postgresql"]` {
		t.Errorf("%s log exports %v", db, d.res[db].Properties["EnableCloudwatchLogsExports"])
	}
	g := d.res[group].Properties
	if canon(g["LogGroupName"]) != canon(name) || canon(g["RetentionInDays"]) != canon(d.st.Param("LogRetentionDays")) {
		t.Errorf("database log group %s", canon(g))
	}
	if !slices.Contains(d.res[writer].DependsOn, group) {
		t.Errorf("%s may write its log before %s exists (RDS would make it, without retention)", writer, group)
	}
	for _, other := range []string{"PostgresLogGroup", "DatabaseLogGroup"} {
		if _, ok := d.res[other]; ok && other != group {
			t.Errorf("%s without its database", other)
		}
	}
}

// checkProxyTarget: with the stack's RDS Proxy (high-volume, create mode)
// every function that connects through it waits for the proxy's target
// group, so it never starts before the cluster is registered as the
// proxy's target; without it, nothing names a target.
func (d deployed) checkProxyTarget(t *testing.T) {
	t.Helper()
	for fn := range dbRoles {
		v := envOf(d.res[fn])["DATABASE_PROXY_TARGET"]
		switch {
		case d.proxy() && roleSecrets[fn] != "":
			if !d.dependsOn(fn, "DatabaseProxyTargetGroup") {
				t.Errorf("%s does not wait for DatabaseProxyTargetGroup", fn)
			}
		case v != "":
			t.Errorf("%s: DATABASE_PROXY_TARGET=%v, but it does not connect through the stack's proxy", fn, canon(v))
		}
	}
}

// alarmed is what each function's AWS/Lambda alarms watch: the functions
// that run unattended, on their errors and throttles; the relay on its
// errors (EventBridge retries its events). A failed migration fails its
// deploy, which shows it; an operator function answers someone at a
// terminal.
var alarmed = map[string][]string{
	"ReceiverFunction":  {"Errors", "Throttles"},
	"ProcessorFunction": {"Errors", "Throttles"},
	"ArchiverFunction":  {"Errors", "Throttles"},
	"RelayFunction":     {"Errors"},
}

// checkAlarms: the 22 alarms, each notifying the alarm topic when it goes
// into ALARM and when it is OK again; among them the wake-ups'
// (WakeFailedAlarm on the receiver's WakeFailed metric), the sources
// document's (SourcesReloadRefusedAlarm on the receiver's
// SourcesReloadRefused, and SourcesReloadFailedAlarm on its
// SourcesReloadFailed over 15 minutes), the quarantine's
// (QuarantineNotKeptAlarm on the receiver's QuarantineNotKept), the
// silent sources' (SourcesSilentAlarm on the
// processor's SourcesSilent gauge, keeping its state while no processor
// runs) and the functions' of alarmed, and nothing else on a function.
func (d deployed) checkAlarms(t *testing.T) {
	t.Helper()
	topic := canon([]any{map[string]any{"Ref": "AlarmTopic"}})
	watched := map[string][]string{}
	n := 0
	for id, r := range d.res {
		if r.Type != "AWS::CloudWatch::Alarm" {
			continue
		}
		n++
		p := r.Properties
		for _, k := range []string{"AlarmActions", "OKActions"} {
			if canon(p[k]) != topic {
				t.Errorf("%s %s = %s, want %s", id, k, canon(p[k]), topic)
			}
		}
		if p["Namespace"] == "AWS/Lambda" {
			dims, _ := p["Dimensions"].([]any)
			for _, dim := range dims {
				if dm := dim.(map[string]any); dm["Name"] == "FunctionName" {
					watched[target(dm["Value"])] = append(watched[target(dm["Value"])], p["MetricName"].(string))
				}
			}
		}
	}
	if n != 22 {
		t.Errorf("%d alarms, want 22", n)
	}
	for fn := range watched {
		sort.Strings(watched[fn])
	}
	if canon(watched) != canon(alarmed) {
		t.Errorf("the functions' alarms watch %s, want %s", canon(watched), canon(alarmed))
	}
	wake := d.res["WakeFailedAlarm"].Properties
	if wake["Namespace"] != "WebhookInbox" || wake["MetricName"] != "WakeFailed" || wake["Statistic"] != "Sum" || wake["ComparisonOperator"] != "GreaterThanThreshold" || canon(wake["Threshold"]) != "0" {
		t.Errorf("WakeFailedAlarm = %s", canon(wake))
	}
	refused := d.res["SourcesReloadRefusedAlarm"].Properties
	if refused["Namespace"] != "WebhookInbox" || refused["MetricName"] != "SourcesReloadRefused" || refused["Statistic"] != "Sum" ||
		refused["ComparisonOperator"] != "GreaterThanThreshold" || canon(refused["Threshold"]) != "0" || refused["TreatMissingData"] != "notBreaching" {
		t.Errorf("SourcesReloadRefusedAlarm = %s", canon(refused))
	}
	for id, want := range map[string]struct {
		metric string
		period int
	}{"SourcesReloadFailedAlarm": {"SourcesReloadFailed", 900}, "QuarantineNotKeptAlarm": {"QuarantineNotKept", 300}} {
		p := d.res[id].Properties
		if p["Namespace"] != "WebhookInbox" || p["MetricName"] != want.metric || p["Statistic"] != "Sum" || canon(p["Period"]) != strconv.Itoa(want.period) ||
			p["ComparisonOperator"] != "GreaterThanThreshold" || canon(p["Threshold"]) != "0" || p["TreatMissingData"] != "notBreaching" {
			t.Errorf("%s = %s", id, canon(p))
		}
	}
	silent := d.res["SourcesSilentAlarm"].Properties
	if silent["Namespace"] != "WebhookInbox" || silent["MetricName"] != "SourcesSilent" || silent["Statistic"] != "Maximum" ||
		silent["ComparisonOperator"] != "GreaterThanThreshold" || canon(silent["Threshold"]) != "0" || silent["TreatMissingData"] != "ignore" {
		t.Errorf("SourcesSilentAlarm = %s", canon(silent))
	}
	relay := d.res["RelayErrorsAlarm"].Properties
	if relay["Namespace"] != "AWS/Lambda" || relay["MetricName"] != "Errors" || canon(relay["Dimensions"]) != canon([]any{map[string]any{"Name": "FunctionName", "Value": map[string]any{"Ref": "RelayFunction"}}}) {
		t.Errorf("RelayErrorsAlarm = %s", canon(relay))
	}
}

// TestDashboardFollowsMonitoringDashboard: the dashboard ($3 a month
// beyond an account's free three) is made when asked (create), never with
// none, and with auto for the high-volume profile only; its output goes
// with it, and what it shows exists.
func TestDashboardFollowsMonitoringDashboard(t *testing.T) {
	t.Parallel()
	for _, p := range profiles {
		for _, choice := range []string{"auto", "create", "none"} {
			d := deploy(t, scenario{params: with(nil, "Profile", p, "MonitoringDashboard", choice)})
			want := choice == "create" || (choice == "auto" && p == highVolume)
			dash, made := d.res["Dashboard"]
			outs, err := d.st.Outputs()
			if err != nil {
				t.Fatal(err)
			}
			_, output := outs["DashboardName"]
			if made != want || output != want {
				t.Errorf("%s, MonitoringDashboard=%s: dashboard %v, output %v; want %v", p, choice, made, output, want)
			}
			if !made {
				continue
			}
			body := canon(dash.Properties)
			for _, w := range []string{"Throttles", `\"5xx\"`, "Errors", "BacklogOldestAgeSeconds", "DeadLettersOpen", "ReceiptToProcessedP99Ms", "SuspectedReplay"} {
				if !strings.Contains(body, w) {
					t.Errorf("the dashboard does not show %s", w)
				}
			}
			for _, id := range references(dash.Properties) {
				if _, ok := d.res[id]; !ok && !strings.HasPrefix(id, "AWS::") {
					t.Errorf("the dashboard shows %s, which does not exist", id)
				}
			}
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
