package cost_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/cost"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
)

// estimate computes the estimate of a small template written in YAML,
// with the default usage assumptions.
func estimate(t *testing.T, resources string, params ...string) *cost.Estimate {
	t.Helper()
	est, err := compute(t, resources, params...)
	if err != nil {
		t.Fatal(err)
	}
	return est
}

func compute(t *testing.T, resources string, params ...string) (*cost.Estimate, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "template.yaml")
	body := "Parameters:\n  Secret: {Type: String, Default: \"\"}\nResources:\n" + resources
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	doc, err := samtemplate.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := map[string]string{}
	for i := 0; i+1 < len(params); i += 2 {
		p[params[i]] = params[i+1]
	}
	return cost.Compute(doc, p, cost.DefaultUsage())
}

// find returns the line named item, failing the test without one.
func find(t *testing.T, lines []cost.Line, item string) cost.Line {
	t.Helper()
	for _, l := range lines {
		if l.Item == item {
			return l
		}
	}
	t.Fatalf("no line %q in %+v", item, lines)
	return cost.Line{}
}

func has(lines []cost.Line, item string) bool {
	for _, l := range lines {
		if l.Item == item {
			return true
		}
	}
	return false
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestAnInterfaceEndpointBillsEachZoneItIsIn(t *testing.T) {
	t.Parallel()
	est := estimate(t, `
  TwoZones:
    Type: AWS::EC2::VPCEndpoint
    Properties: {VpcEndpointType: Interface, ServiceName: com.amazonaws.us-east-1.lambda, SubnetIds: [subnet-a, subnet-b]}
  OneZone:
    Type: AWS::EC2::VPCEndpoint
    Properties: {VpcEndpointType: Interface, ServiceName: com.amazonaws.us-east-1.secretsmanager, SubnetIds: [subnet-a]}
  S3:
    Type: AWS::EC2::VPCEndpoint
    Properties: {VpcEndpointType: Gateway, ServiceName: com.amazonaws.us-east-1.s3}
`)
	near(t, "lambda endpoint", find(t, est.Idle, "Interface endpoint (lambda)").USD, 2*730*0.01)
	near(t, "secretsmanager endpoint", find(t, est.Idle, "Interface endpoint (secretsmanager)").USD, 1*730*0.01)
	if len(est.Idle) != 2 {
		t.Errorf("idle lines %+v: the gateway endpoint should bill nothing", est.Idle)
	}
}

func TestAnUnknownResourceTypeFailsTheEstimate(t *testing.T) {
	t.Parallel()
	_, err := compute(t, `
  Nat:
    Type: AWS::EC2::NatGateway
    Properties: {SubnetId: subnet-a}
`)
	if err == nil || !strings.Contains(err.Error(), "Nat (AWS::EC2::NatGateway)") || !strings.Contains(err.Error(), "no rule prices") {
		t.Fatalf("err = %v, want the NAT gateway refused by name", err)
	}
}

func TestWhatIsNotPricedFailsTheEstimate(t *testing.T) {
	t.Parallel()
	for name, resources := range map[string]string{
		"an instance class without a price": `
  Db: {Type: AWS::RDS::DBInstance, Properties: {Engine: postgres, DBInstanceClass: db.m5.large, AllocatedStorage: 20, StorageType: gp3}}
`,
		"a storage type without a price": `
  Db: {Type: AWS::RDS::DBInstance, Properties: {Engine: postgres, DBInstanceClass: db.t4g.micro, AllocatedStorage: 20, StorageType: io1}}
`,
		"an x86 function": `
  Fn: {Type: AWS::Lambda::Function, Properties: {MemorySize: 256}}
`,
		"provisioned concurrency": `
  Fn: {Type: AWS::Lambda::Function, Properties: {Architectures: [arm64]}}
  Live: {Type: AWS::Lambda::Alias, Properties: {FunctionName: !Ref Fn, ProvisionedConcurrencyConfig: {ProvisionedConcurrentExecutions: 1}}}
`,
		"a cron schedule": `
  Fn: {Type: AWS::Lambda::Function, Properties: {Architectures: [arm64]}}
  Nightly: {Type: AWS::Events::Rule, Properties: {ScheduleExpression: "cron(0 3 * * ? *)", Targets: [{Id: fn, Arn: !GetAtt Fn.Arn}]}}
`,
		"a high-resolution alarm": `
  Fast: {Type: AWS::CloudWatch::Alarm, Properties: {Period: 10, MetricName: Errors, Namespace: AWS/Lambda}}
`,
		"a proxy without a target": `
  Proxy: {Type: AWS::RDS::DBProxy, Properties: {EngineFamily: POSTGRESQL}}
`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			est, err := compute(t, resources)
			if err == nil {
				t.Fatalf("no error; idle %+v", est.Idle)
			}
			t.Log(err)
		})
	}
}

func TestKnownFreeTypesBillNothing(t *testing.T) {
	t.Parallel()
	est := estimate(t, `
  Vpc: {Type: AWS::EC2::VPC, Properties: {CidrBlock: 10.0.0.0/16}}
  Subnet: {Type: AWS::EC2::Subnet, Properties: {VpcId: !Ref Vpc}}
  Rt: {Type: AWS::EC2::RouteTable, Properties: {VpcId: !Ref Vpc}}
  Assoc: {Type: AWS::EC2::SubnetRouteTableAssociation, Properties: {SubnetId: !Ref Subnet, RouteTableId: !Ref Rt}}
  Sg: {Type: AWS::EC2::SecurityGroup, Properties: {GroupDescription: x}}
  Role: {Type: AWS::IAM::Role, Properties: {AssumeRolePolicyDocument: {}}}
  Bucket: {Type: AWS::S3::Bucket}
  Topic: {Type: AWS::SNS::Topic}
  Mail: {Type: AWS::SNS::Subscription, Properties: {TopicArn: !Ref Topic, Protocol: email, Endpoint: ops@example.com}}
  Logs: {Type: AWS::Logs::LogGroup}
  Group: {Type: AWS::Scheduler::ScheduleGroup}
  Schema: {Type: Custom::DatabaseSchema, Properties: {ServiceToken: x}}
`)
	if usd, _ := cost.Totals(est.Idle); usd != 0 || len(est.Polls) != 0 {
		t.Errorf("idle %+v (polls %+v), want nothing billed", est.Idle, est.Polls)
	}
}

const serverless = `
  Cluster:
    Type: AWS::RDS::DBCluster
    Properties:
      Engine: aurora-postgresql
      ServerlessV2ScalingConfiguration: {MinCapacity: %s, MaxCapacity: 2, SecondsUntilAutoPause: 300}
  Writer:
    Type: AWS::RDS::DBInstance
    Properties: {Engine: aurora-postgresql, DBClusterIdentifier: !Ref Cluster, DBInstanceClass: db.serverless}
`

func cluster(minACU string) string { return strings.Replace(serverless, "%s", minACU, 1) }

func TestAMinimumOfZeroBillsNoCapacityAtIdle(t *testing.T) {
	t.Parallel()
	est := estimate(t, cluster("0"))
	c := find(t, est.Idle, "Aurora capacity")
	if c.USD != 0 || c.Price != "" || !strings.Contains(c.Usage, "pauses") {
		t.Errorf("idle capacity %+v, want none billed (paused)", c)
	}
	// A million webhooks spread over the month keep it awake.
	near(t, "capacity per million", find(t, est.PerMillion, "Aurora capacity").USD, 0.5*730*0.12)
	near(t, "storage at idle", find(t, est.Idle, "Aurora storage").USD, 1*0.10)
	near(t, "I/O per million", find(t, est.PerMillion, "Aurora I/O").USD, 10*0.20)
}

func TestAMinimumAboveZeroBillsItEveryHour(t *testing.T) {
	t.Parallel()
	est := estimate(t, cluster("0.5"))
	near(t, "capacity", find(t, est.Idle, "Aurora capacity").USD, 0.5*730*0.12)
}

func TestAProxyKeepsTheClusterAwakeAndBillsEightACUs(t *testing.T) {
	t.Parallel()
	est := estimate(t, cluster("0")+`
  Proxy: {Type: AWS::RDS::DBProxy, Properties: {EngineFamily: POSTGRESQL}}
  Targets: {Type: AWS::RDS::DBProxyTargetGroup, Properties: {DBProxyName: !Ref Proxy, TargetGroupName: default, DBClusterIdentifiers: [!Ref Cluster]}}
`)
	near(t, "proxy", find(t, est.Idle, "RDS Proxy").USD, 8*730*0.015)
	c := find(t, est.Idle, "Aurora capacity")
	near(t, "capacity kept awake", c.USD, 0.5*730*0.12)
	if !strings.Contains(c.Usage, "RDS Proxy Proxy") {
		t.Errorf("usage %q does not say the proxy keeps it awake", c.Usage)
	}
}

func TestAPollMoreFrequentThanThePauseDelayKeepsTheClusterAwake(t *testing.T) {
	t.Parallel()
	fn := `
  Fn: {Type: AWS::Lambda::Function, Properties: {Architectures: [arm64], MemorySize: 256}}
  Tick: {Type: AWS::Events::Rule, Properties: {ScheduleExpression: "%s", State: ENABLED, Targets: [{Id: fn, Arn: !GetAtt Fn.Arn}]}}
`
	every := func(rate string) string { return cluster("0") + strings.Replace(fn, "%s", rate, 1) }

	est := estimate(t, every("rate(1 minute)"))
	if len(est.Polls) != 1 || est.Polls[0].Target != "Fn" || est.Polls[0].PerMonth != 43800 {
		t.Fatalf("polls %+v, want Tick running Fn 43,800 times a month", est.Polls)
	}
	near(t, "capacity kept awake", find(t, est.Idle, "Aurora capacity").USD, 0.5*730*0.12)
	near(t, "runs", find(t, est.Idle, "Lambda duration: Fn").Quantity, 43800*0.2*0.25)

	est = estimate(t, every("rate(1 hour)"))
	if c := find(t, est.Idle, "Aurora capacity"); c.USD != 0 {
		t.Errorf("an hourly poll keeps a cluster that pauses after 300 s awake: %+v", c)
	}
}

func TestARealTimeProcessorPollsForItsWholeRun(t *testing.T) {
	t.Parallel()
	est := estimate(t, `
  ProcessorFunction:
    Type: AWS::Lambda::Function
    Properties: {Architectures: [arm64], MemorySize: 256, Environment: {Variables: {PROCESSOR_RUN_FOR: 70s}}}
  Drain: {Type: AWS::Events::Rule, Properties: {ScheduleExpression: rate(1 minute), Targets: [{Id: p, Arn: !GetAtt ProcessorFunction.Arn}]}}
`)
	l := find(t, est.Idle, "Lambda duration: ProcessorFunction")
	near(t, "GB-seconds", l.Quantity, 43800*70*0.25)
	near(t, "without the free tier", l.USD, 43800*70*0.25*0.0000133334)
	near(t, "with the free tier", l.FreeUSD, (43800*70*0.25-400000)*0.0000133334)
	if est.Wake != "poll" {
		t.Errorf("wake = %q, want poll", est.Wake)
	}
	// Its 14 idle metrics bill every hour.
	near(t, "metrics", find(t, est.Idle, "EMF metrics").USD, 14*0.30)
}

func TestADisabledScheduleDoesNotPoll(t *testing.T) {
	t.Parallel()
	est := estimate(t, `
  Fn: {Type: AWS::Lambda::Function, Properties: {Architectures: [arm64]}}
  Tick: {Type: AWS::Events::Rule, Properties: {ScheduleExpression: rate(1 minute), State: DISABLED, Targets: [{Id: fn, Arn: !GetAtt Fn.Arn}]}}
  Once: {Type: AWS::Scheduler::Schedule, Properties: {ScheduleExpression: "at(2026-12-24T10:00:00)", FlexibleTimeWindow: {Mode: "OFF"}, Target: {Arn: !GetAtt Fn.Arn, RoleArn: x}}}
`)
	if len(est.Polls) != 0 {
		t.Errorf("polls %+v, want none", est.Polls)
	}
}

func TestARecurringSchedulerScheduleIsAPoll(t *testing.T) {
	t.Parallel()
	est := estimate(t, `
  Fn: {Type: AWS::Lambda::Function, Properties: {Architectures: [arm64]}}
  Every5: {Type: AWS::Scheduler::Schedule, Properties: {ScheduleExpression: rate(5 minutes), FlexibleTimeWindow: {Mode: "OFF"}, Target: {Arn: !GetAtt Fn.Arn, RoleArn: x}}}
`)
	if len(est.Polls) != 1 || est.Polls[0].Resource != "Every5" || est.Polls[0].PerMonth != 8760 {
		t.Errorf("polls %+v, want Every5, 8,760 a month", est.Polls)
	}
}

func TestAnRDSInstanceBillsItsHoursAndAllocatedStorage(t *testing.T) {
	t.Parallel()
	single := `
  Db:
    Type: AWS::RDS::DBInstance
    Properties: {Engine: postgres, DBInstanceClass: db.t4g.micro, AllocatedStorage: 20, StorageType: gp3, MultiAZ: %s, ManageMasterUserPassword: true}
`
	est := estimate(t, strings.Replace(single, "%s", "false", 1))
	near(t, "instance", find(t, est.Idle, "RDS instance db.t4g.micro").USD, 730*0.016)
	near(t, "storage", find(t, est.Idle, "RDS storage gp3").USD, 20*0.115)
	near(t, "the RDS-managed master secret", find(t, est.Idle, "Secrets Manager secrets").USD, 0.40)

	est = estimate(t, strings.Replace(single, "%s", "true", 1))
	near(t, "Multi-AZ instance", find(t, est.Idle, "RDS instance db.t4g.micro").USD, 2*730*0.016)
	near(t, "Multi-AZ storage", find(t, est.Idle, "RDS storage gp3").USD, 2*20*0.115)
}

func TestAProxyInFrontOfAnInstanceBillsItsVCPUs(t *testing.T) {
	t.Parallel()
	est := estimate(t, `
  Db: {Type: AWS::RDS::DBInstance, Properties: {Engine: postgres, DBInstanceClass: db.t4g.micro, AllocatedStorage: 20, StorageType: gp3}}
  Proxy: {Type: AWS::RDS::DBProxy, Properties: {EngineFamily: POSTGRESQL}}
  Targets: {Type: AWS::RDS::DBProxyTargetGroup, Properties: {DBProxyName: !Ref Proxy, TargetGroupName: default, DBInstanceIdentifiers: [!Ref Db]}}
`)
	near(t, "proxy", find(t, est.Idle, "RDS Proxy").USD, 2*730*0.015)
}

func TestSecretsCountTheStacksRDSManagedAndGivenOnes(t *testing.T) {
	t.Parallel()
	est := estimate(t, `
  Cluster: {Type: AWS::RDS::DBCluster, Properties: {Engine: aurora-postgresql, ManageMasterUserPassword: true}}
  RoleSecret: {Type: AWS::SecretsManager::Secret}
`, "Secret", "arn:aws:secretsmanager:us-east-1:123456789012:secret:sources-AbCdEf")
	l := find(t, est.Idle, "Secrets Manager secrets")
	near(t, "secrets", l.Quantity, 3) // its own, the master secret RDS manages, the one a parameter names
	near(t, "their price", l.USD, 3*0.40)
}

func TestAlarmsAndDashboardsBeyondTheFreeTier(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for _, name := range []string{"A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K", "L"} {
		b.WriteString("  Alarm" + name + ": {Type: AWS::CloudWatch::Alarm, Properties: {Period: 300, MetricName: Errors, Namespace: AWS/Lambda}}\n")
	}
	b.WriteString("  Board: {Type: AWS::CloudWatch::Dashboard, Properties: {DashboardBody: \"{}\"}}\n")
	est := estimate(t, b.String())
	a := find(t, est.Idle, "CloudWatch alarms")
	near(t, "alarms", a.USD, 12*0.10)
	near(t, "alarms after the free 10", a.FreeUSD, 2*0.10)
	d := find(t, est.Idle, "CloudWatch dashboards")
	near(t, "dashboard", d.USD, 3)
	near(t, "dashboard within the free 3", d.FreeUSD, 0)
}

// wakeStack is a receiver, a processor and an HTTP API; extra wires the
// processor's wake-up.
func wakeStack(extra string) string {
	return `
  Api: {Type: AWS::ApiGatewayV2::Api, Properties: {ProtocolType: HTTP}}
  ReceiverRole:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument: {}
      Policies:
        - PolicyName: receive
          PolicyDocument:
            Statement:` + extra + `
              - {Effect: Allow, Action: [logs:PutLogEvents], Resource: "*"}
  ReceiverFunction: {Type: AWS::Lambda::Function, Properties: {Architectures: [arm64], MemorySize: 256, Role: !GetAtt ReceiverRole.Arn}}
  ProcessorFunction: {Type: AWS::Lambda::Function, Properties: {Architectures: [arm64], MemorySize: 256}}
`
}

func TestAProcessorWokenByInvokeBillsARunPerWebhook(t *testing.T) {
	t.Parallel()
	est := estimate(t, wakeStack(`
              - {Effect: Allow, Action: lambda:InvokeFunction, Resource: !GetAtt ProcessorFunction.Arn}`)+`
  LambdaEndpoint:
    Type: AWS::EC2::VPCEndpoint
    Properties: {VpcEndpointType: Interface, ServiceName: com.amazonaws.us-east-1.lambda, SubnetIds: [subnet-a]}
`)
	if est.Wake != "invoke" || len(est.Polls) != 0 {
		t.Fatalf("wake %q, polls %+v; want invoke and no poll", est.Wake, est.Polls)
	}
	near(t, "processor GB-s", find(t, est.PerMillion, "Lambda duration: ProcessorFunction").Quantity, 1e6*1.1*0.25)
	near(t, "receiver GB-s", find(t, est.PerMillion, "Lambda duration: ReceiverFunction").Quantity, 1e6*0.025*0.25)
	near(t, "requests", find(t, est.PerMillion, "Lambda requests").USD, 2*0.20)
	near(t, "API requests", find(t, est.PerMillion, "API Gateway requests").USD, 1.00)
	near(t, "endpoint data", find(t, est.PerMillion, "Interface endpoint data (lambda)").Quantity, 1e6*2048/1e9)
	if usd, _ := cost.Totals(est.Idle); usd != 7.30 {
		t.Errorf("idle = %v, want only the endpoint's $7.30", usd)
	}
}

func TestAProcessorWokenByAnS3MarkerBillsAPutAndAnEventPerWebhook(t *testing.T) {
	t.Parallel()
	est := estimate(t, wakeStack("")+`
  Control: {Type: AWS::S3::Bucket, Properties: {NotificationConfiguration: {EventBridgeConfiguration: {EventBridgeEnabled: true}}}}
  Wake:
    Type: AWS::Events::Rule
    Properties:
      EventPattern: {source: [aws.s3], detail-type: [Object Created], detail: {bucket: {name: [!Ref Control]}}}
      Targets: [{Id: p, Arn: !GetAtt ProcessorFunction.Arn}]
`)
	if est.Wake != "s3" {
		t.Fatalf("wake %q, want s3", est.Wake)
	}
	near(t, "wake markers", find(t, est.PerMillion, "S3 wake markers").USD, 1e6/1000*0.005)
	near(t, "their events", find(t, est.PerMillion, "EventBridge events from S3").USD, 1.00)
	near(t, "processor GB-s", find(t, est.PerMillion, "Lambda duration: ProcessorFunction").Quantity, 1e6*1.1*0.25)
}

func TestAProcessorNeitherWokenNorPollingIsNotBilledPerWebhook(t *testing.T) {
	t.Parallel()
	est := estimate(t, wakeStack(""))
	if est.Wake != "none" || has(est.PerMillion, "Lambda duration: ProcessorFunction") {
		t.Errorf("wake %q, per million %+v", est.Wake, est.PerMillion)
	}
}

func TestParametersTheTemplateDoesNotDeclareAreIgnored(t *testing.T) {
	t.Parallel()
	est := estimate(t, "  Bucket: {Type: AWS::S3::Bucket}\n", "Profile", "economy")
	if len(est.Ignored) != 1 || est.Ignored[0] != "Profile" {
		t.Errorf("ignored %v, want [Profile]", est.Ignored)
	}
}

func TestThePriceTableIsDatedAndSourced(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, p := range cost.Prices {
		if seen[p.Key] {
			t.Errorf("price %s twice", p.Key)
		}
		seen[p.Key] = true
		field.Check(t, p.Key+": value, unit, item and source are all needed",
			field.Is("Value", p.Value, p.Value > 0, "positive"),
			field.Is("Unit", p.Unit, p.Unit != "", "set"),
			field.Is("Item", p.Item, p.Item != "", "set"),
			field.Is("Source", p.Source, p.Source != "", "set"),
		)
		if (p.Free > 0) != (p.FreeText != "") {
			t.Errorf("%s: a free tier needs its words, and only one: %+v", p.Key, p)
		}
		if p.Kind != cost.FromAWS && p.Kind != cost.FromThirdParty && p.Kind != cost.NotConfirmed {
			t.Errorf("%s: kind %q", p.Key, p.Kind)
		}
		if len(p.Read) != len("2026-12-03") || p.Read[4] != '-' || p.Read[7] != '-' {
			t.Errorf("%s: read %q, want YYYY-MM-DD", p.Key, p.Read)
		}
	}
	// Every price the cost model uses.
	for _, key := range []string{"rds.instance.db.t4g.micro", "rds.storage.gp3", "vpce.interface.hour", "scheduler.invocations",
		"s3.put", "s3.get", "s3.storage", "cw.alarm", "sns.email", "aurora.acu", "aurora.storage", "rds.proxy"} {
		if !seen[key] {
			t.Errorf("no price %s", key)
		}
	}
}

func TestTheBlockIsReplacedBetweenItsMarkers(t *testing.T) {
	t.Parallel()
	doc := "# Deploy\n\nbefore\n" + cost.Begin + "\nold\n" + cost.End + "\nafter\n"
	block := cost.Begin + "\nnew\n" + cost.End + "\n"
	got, err := cost.ReplaceBlock(doc, block)
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Deploy\n\nbefore\n" + block + "after\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if b, err := cost.Block(got); err != nil || b != block {
		t.Errorf("Block = %q, %v; want %q", b, err, block)
	}
	if _, err := cost.Block("no markers"); err == nil {
		t.Error("a document without markers has a block")
	}
}

func TestAStaleDocFailsTheCheckUntilRewritten(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	path := filepath.Join(root, cost.DocPath)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	doc := "## What it costs\n\n" + cost.Begin + "\n| idle | $1.00 |\n" + cost.End + "\n\nprose\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	block := cost.Begin + "\n| idle | $2.00 |\n" + cost.End + "\n"
	err := cost.CheckDoc(root, block)
	if !errors.Is(err, cost.ErrStale) || !strings.Contains(err.Error(), `"| idle | $1.00 |"`) {
		t.Fatalf("CheckDoc = %v, want ErrStale naming the line that differs", err)
	}
	if err := cost.WriteDoc(root, block); err != nil {
		t.Fatal(err)
	}
	if err := cost.CheckDoc(root, block); err != nil {
		t.Fatalf("after WriteDoc: %v", err)
	}
	raw, _ := os.ReadFile(path)
	if want := "## What it costs\n\n" + block + "\nprose\n"; string(raw) != want {
		t.Errorf("doc = %q, want %q (only the block changes)", raw, want)
	}
}
