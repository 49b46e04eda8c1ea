package cost

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
)

// freeTypes are the resource types that bill nothing by themselves, each
// with why. A type neither here nor priced by a rule fails the estimate.
var freeTypes = map[string]string{
	"AWS::EC2::VPC":                         "no charge for the VPC itself",
	"AWS::EC2::Subnet":                      "no charge",
	"AWS::EC2::RouteTable":                  "no charge",
	"AWS::EC2::SubnetRouteTableAssociation": "no charge",
	"AWS::EC2::SecurityGroup":               "no charge",
	"AWS::EC2::SecurityGroupIngress":        "no charge",
	"AWS::EC2::SecurityGroupEgress":         "no charge",
	"AWS::IAM::Role":                        "no charge",
	"AWS::IAM::Policy":                      "no charge",
	"AWS::IAM::ManagedPolicy":               "no charge",
	"AWS::Lambda::Permission":               "no charge",
	"AWS::Lambda::EventInvokeConfig":        "no charge",
	"AWS::Lambda::Url":                      "requests through it are billed as the function's invocations",
	"AWS::ApiGatewayV2::Route":              "requests are billed per API",
	"AWS::ApiGatewayV2::Integration":        "requests are billed per API",
	"AWS::ApiGatewayV2::Deployment":         "no charge",
	"AWS::RDS::DBSubnetGroup":               "no charge",
	"AWS::RDS::DBProxyTargetGroup":          "billed through its proxy",
	"AWS::RDS::DBClusterParameterGroup":     "no charge",
	"AWS::RDS::DBParameterGroup":            "no charge",
	"AWS::S3::BucketPolicy":                 "no charge",
	"AWS::SNS::TopicPolicy":                 "no charge",
	"AWS::SNS::Topic":                       "billed per publish: alarms publish only when they change state",
	"AWS::SNS::Subscription":                "billed per notification: alarms notify only when they change state",
	"AWS::Logs::LogGroup":                   "billed by ingestion (the logs line)",
	"AWS::S3::Bucket":                       "billed by use (the S3 lines)",
	"AWS::Scheduler::ScheduleGroup":         "schedules are billed per invocation (the Scheduler line)",
	"AWS::CloudFormation::CustomResource":   "its function is priced",
}

// vCPUs of the instance classes RDS Proxy may target, for its price.
var vCPUs = map[string]float64{"db.t4g.micro": 2}

// calc holds one estimate's inputs while the rules run.
type calc struct {
	res map[string]samtemplate.Resource
	ids []string // res's ids, sorted, so lines come in a stable order
	u   Usage
	est *Estimate

	secrets      []string // secrets the stack creates or RDS manages for it
	givenSecrets []string // parameters naming secrets the stack reads
	alarms       []string
	alarmMetrics float64
	dashboards   []string
	httpAPIs     []string
	accessLogs   bool
	s3Events     []string // rules on S3's events
	scheduleGrp  []string
}

func (c *calc) run() error {
	if err := c.findPolls(); err != nil {
		return err
	}
	c.est.Wake = c.wakePath()
	var errs []error
	for _, id := range c.ids {
		if err := c.resource(id, c.res[id]); err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %w", id, c.res[id].Type, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := c.functions(); err != nil {
		return err
	}
	c.monitoring()
	c.perMillion()
	return nil
}

// resource prices one resource, or records it for a line priced over
// several (secrets, alarms, requests).
func (c *calc) resource(id string, r samtemplate.Resource) error {
	p := r.Properties
	switch r.Type {
	case "AWS::RDS::DBInstance":
		return c.dbInstance(id, p)
	case "AWS::RDS::DBCluster":
		return c.dbCluster(id, p)
	case "AWS::RDS::DBProxy":
		return c.dbProxy(id)
	case "AWS::EC2::VPCEndpoint":
		return c.endpoint(id, p)
	case "AWS::SecretsManager::Secret":
		c.secrets = append(c.secrets, id)
	case "AWS::CloudWatch::Alarm":
		if period, ok := number(p["Period"]); ok && period < 60 {
			return errors.New("a high-resolution alarm (Period under 60 s) is not priced")
		}
		n := 1.0
		if ms, ok := p["Metrics"].([]any); ok {
			n = 0
			for _, m := range ms {
				if mm, _ := m.(map[string]any); mm["MetricStat"] != nil {
					n++
				}
			}
		}
		c.alarms = append(c.alarms, id)
		c.alarmMetrics += n
	case "AWS::CloudWatch::Dashboard":
		c.dashboards = append(c.dashboards, id)
	case "AWS::ApiGatewayV2::Api":
		if pt, _ := p["ProtocolType"].(string); pt != "" && pt != "HTTP" {
			return fmt.Errorf("a %s API is not priced", pt)
		}
		c.httpAPIs = append(c.httpAPIs, id)
	case "AWS::ApiGatewayV2::Stage":
		if p["AccessLogSettings"] != nil {
			c.accessLogs = true
		}
	case "AWS::Lambda::Function":
		// Priced by its runs (functions, perMillion); what the template
		// sets that bills by itself is refused here.
		if size, ok := number(dig(p, "EphemeralStorage", "Size")); ok && size > 512 {
			return errors.New("ephemeral storage beyond 512 MB is not priced")
		}
		if _, err := c.memoryGB(id); err != nil {
			return err
		}
	case "AWS::Lambda::Version", "AWS::Lambda::Alias":
		if p["ProvisionedConcurrencyConfig"] != nil {
			return errors.New("provisioned concurrency bills every hour and is not priced")
		}
	case "AWS::Events::Rule":
		// A scheduled rule bills its target's runs (findPolls); a rule on
		// AWS's events is free, except S3's, which are opt-in data events.
		if p["EventPattern"] != nil && strings.Contains(canon(dig(p, "EventPattern", "source")), "aws.s3") {
			c.s3Events = append(c.s3Events, id)
		}
	case "AWS::Scheduler::Schedule":
		// Recurring ones are polls (findPolls); a one-time at() fires once.
	case "AWS::Scheduler::ScheduleGroup":
		c.scheduleGrp = append(c.scheduleGrp, id)
	default:
		if _, free := freeTypes[r.Type]; free || strings.HasPrefix(r.Type, "Custom::") {
			return nil
		}
		return errors.New("no rule prices this resource type: add one to internal/cost (or to its freeTypes, saying why it costs nothing)")
	}
	return nil
}

func (c *calc) dbInstance(id string, p map[string]any) error {
	class, _ := p["DBInstanceClass"].(string)
	engine, _ := p["Engine"].(string)
	if class == "db.serverless" {
		if refID(p["DBClusterIdentifier"]) == "" {
			return errors.New("a db.serverless instance outside a cluster of the template")
		}
		return nil // billed through its cluster's capacity
	}
	if engine != "postgres" {
		return fmt.Errorf("engine %q with class %s is not priced (only RDS for PostgreSQL instances are)", engine, class)
	}
	key := "rds.instance." + class
	if !hasPrice(key) {
		return fmt.Errorf("instance class %s has no price in the table", class)
	}
	n, what := 1.0, "1 instance"
	if truthy(p["MultiAZ"]) {
		n, what = 2, "2 instances (Multi-AZ: primary and standby)"
	}
	h := c.u.HoursPerMonth
	c.est.Idle = append(c.est.Idle, line("RDS instance "+class, []string{id}, key, n*h,
		fmt.Sprintf("%s × %s h × %s", what, num(h), dollars(lookup(key).Value))))
	gb, ok := number(p["AllocatedStorage"])
	if !ok {
		return errors.New("no AllocatedStorage")
	}
	typ, _ := p["StorageType"].(string)
	if typ == "" {
		typ = "gp2" // CloudFormation's default without Iops
	}
	skey := "rds.storage." + typ
	if !hasPrice(skey) {
		return fmt.Errorf("storage type %s has no price in the table", typ)
	}
	c.est.Idle = append(c.est.Idle, line("RDS storage "+typ, []string{id}, skey, n*gb,
		fmt.Sprintf("%s GB allocated × %s × %s", num(gb), strings.SplitN(what, " (", 2)[0], dollars(lookup(skey).Value))))
	c.est.PerMillion = append(c.est.PerMillion, note("RDS storage "+typ, []string{id},
		"the rows and bodies (about "+gbText(c.growthGB())+") fit in the allocated storage"))
	if truthy(p["ManageMasterUserPassword"]) {
		c.secrets = append(c.secrets, id+" (RDS-managed master secret)")
	}
	return nil
}

func (c *calc) dbCluster(id string, p map[string]any) error {
	engine, _ := p["Engine"].(string)
	if engine != "aurora-postgresql" {
		return fmt.Errorf("engine %q is not priced (only aurora-postgresql clusters are)", engine)
	}
	if truthy(p["ManageMasterUserPassword"]) {
		c.secrets = append(c.secrets, id+" (RDS-managed master secret)")
	}
	var instances []string
	for _, iid := range c.ids {
		r := c.res[iid]
		if r.Type == "AWS::RDS::DBInstance" && refID(r.Properties["DBClusterIdentifier"]) == id {
			if class, _ := r.Properties["DBInstanceClass"].(string); class == "db.serverless" {
				instances = append(instances, iid)
			}
		}
	}
	h := c.u.HoursPerMonth
	sc, _ := p["ServerlessV2ScalingConfiguration"].(map[string]any)
	if sc == nil && len(instances) > 0 {
		return errors.New("db.serverless instances in a cluster without ServerlessV2ScalingConfiguration")
	}
	n := float64(len(instances))
	ids := append([]string{id}, instances...)
	if n > 0 {
		minACU, ok := number(sc["MinCapacity"])
		if !ok {
			return errors.New("no ServerlessV2ScalingConfiguration.MinCapacity")
		}
		pauseAfter, ok := number(sc["SecondsUntilAutoPause"])
		if !ok {
			pauseAfter = 300 // RDS's default delay
		}
		awake := c.keptAwake(id, time.Duration(pauseAfter)*time.Second)
		switch {
		case minACU == 0 && len(awake) == 0:
			c.est.Idle = append(c.est.Idle, note("Aurora capacity", ids,
				fmt.Sprintf("minimum 0 ACU: the instance pauses after %s s without connections and bills no capacity", num(pauseAfter))))
			if c.u.SpreadEvenly {
				c.est.PerMillion = append(c.est.PerMillion, line("Aurora capacity", ids, "aurora.acu", c.u.AwakeMinACU*n*h,
					fmt.Sprintf("webhooks spread over the month keep it from pausing: %s ACU × %s × %s h × %s", num(c.u.AwakeMinACU), instancesText(n), num(h), dollars(lookup("aurora.acu").Value))))
			}
		case minACU == 0:
			c.est.Idle = append(c.est.Idle, line("Aurora capacity", ids, "aurora.acu", c.u.AwakeMinACU*n*h,
				fmt.Sprintf("minimum 0 ACU but it cannot pause (%s): %s ACU × %s × %s h × %s", strings.Join(awake, "; "), num(c.u.AwakeMinACU), instancesText(n), num(h), dollars(lookup("aurora.acu").Value))))
		default:
			c.est.Idle = append(c.est.Idle, line("Aurora capacity", ids, "aurora.acu", minACU*n*h,
				fmt.Sprintf("minimum %s ACU × %s × %s h × %s", num(minACU), instancesText(n), num(h), dollars(lookup("aurora.acu").Value))))
			c.est.PerMillion = append(c.est.PerMillion, note("Aurora capacity", ids,
				fmt.Sprintf("assumed to stay at its minimum of %s ACU at this rate (measure ServerlessDatabaseCapacity)", num(minACU))))
		}
	}
	c.est.Idle = append(c.est.Idle, line("Aurora storage", []string{id}, "aurora.storage", c.u.IdleDatabaseGB,
		fmt.Sprintf("%s GB (a near-empty database) × %s", num(c.u.IdleDatabaseGB), dollars(lookup("aurora.storage").Value))))
	c.est.PerMillion = append(c.est.PerMillion,
		line("Aurora I/O", []string{id}, "aurora.io", c.u.Webhooks*c.u.AuroraIOPerWebhook/1e6,
			fmt.Sprintf("%s webhooks × %s I/O requests × %s per million", num(c.u.Webhooks), num(c.u.AuroraIOPerWebhook), dollars(lookup("aurora.io").Value))),
		line("Aurora storage", []string{id}, "aurora.storage", c.growthGB(),
			fmt.Sprintf("a month's rows, and bodies until archived: %s × %s (it grows by the rows every month)", gbText(c.growthGB()), dollars(lookup("aurora.storage").Value))))
	return nil
}

// growthGB is what a month's webhooks add to the database: every row, and
// each body for the days it waits to be archived.
func (c *calc) growthGB() float64 {
	days := 730.0 / 24
	return c.u.Webhooks * (c.u.RowBytes + c.u.BodyBytes*min(c.u.ArchiveDays/days, 1)) / 1e9
}

// keptAwake says what keeps the cluster id from pausing: a proxy that
// targets it, or a poll more frequent than its pause delay.
func (c *calc) keptAwake(id string, pauseAfter time.Duration) []string {
	var why []string
	for _, tid := range c.ids {
		r := c.res[tid]
		if r.Type != "AWS::RDS::DBProxyTargetGroup" {
			continue
		}
		for _, cl := range list(r.Properties["DBClusterIdentifiers"]) {
			if refID(cl) == id {
				why = append(why, "RDS Proxy "+refID(r.Properties["DBProxyName"])+" holds connections to it")
			}
		}
	}
	for _, p := range c.est.Polls {
		if p.Period < pauseAfter {
			why = append(why, fmt.Sprintf("%s runs %s every %s", p.Resource, p.Target, p.Period))
		}
	}
	return why
}

func (c *calc) dbProxy(id string) error {
	h := c.u.HoursPerMonth
	for _, tid := range c.ids {
		r := c.res[tid]
		if r.Type != "AWS::RDS::DBProxyTargetGroup" || refID(r.Properties["DBProxyName"]) != id {
			continue
		}
		for _, cl := range list(r.Properties["DBClusterIdentifiers"]) {
			cluster := c.res[refID(cl)]
			sc, _ := cluster.Properties["ServerlessV2ScalingConfiguration"].(map[string]any)
			if sc == nil {
				return fmt.Errorf("its target %v is not an Aurora Serverless v2 cluster of the template", cl)
			}
			minACU, _ := number(sc["MinCapacity"])
			acu := math.Max(8, minACU)
			c.est.Idle = append(c.est.Idle, line("RDS Proxy", []string{id}, "rds.proxy", acu*h,
				fmt.Sprintf("%s ACU (8 is the minimum billed for a Serverless v2 target) × %s h × %s", num(acu), num(h), dollars(lookup("rds.proxy").Value))))
			return nil
		}
		for _, in := range list(r.Properties["DBInstanceIdentifiers"]) {
			inst := c.res[refID(in)]
			class, _ := inst.Properties["DBInstanceClass"].(string)
			v, ok := vCPUs[class]
			if !ok {
				return fmt.Errorf("its target %v has no vCPU count in the table", in)
			}
			c.est.Idle = append(c.est.Idle, line("RDS Proxy", []string{id}, "rds.proxy", v*h,
				fmt.Sprintf("%s vCPUs of %s × %s h × %s", num(v), class, num(h), dollars(lookup("rds.proxy").Value))))
			return nil
		}
	}
	return errors.New("no target group of the template names this proxy")
}

func (c *calc) endpoint(id string, p map[string]any) error {
	typ, _ := p["VpcEndpointType"].(string)
	service := canon(p["ServiceName"])
	switch typ {
	case "", "Gateway":
		return nil // gateway endpoints (S3, DynamoDB) are free
	case "Interface":
	default:
		return fmt.Errorf("endpoint type %s is not priced", typ)
	}
	zones := float64(len(list(p["SubnetIds"])))
	if zones == 0 {
		return errors.New("an interface endpoint with no subnets")
	}
	name := service
	if i := strings.LastIndex(service, "."); i >= 0 {
		name = service[i+1:]
	}
	h := c.u.HoursPerMonth
	c.est.Idle = append(c.est.Idle, line("Interface endpoint ("+name+")", []string{id}, "vpce.interface.hour", zones*h,
		fmt.Sprintf("%s %s × %s h × %s", num(zones), plural(zones, "zone", "zones"), num(h), dollars(lookup("vpce.interface.hour").Value))))
	if name == "lambda" && c.est.Wake == "invoke" {
		gb := c.u.Webhooks * c.u.WakeInvokeBytes / 1e9
		c.est.PerMillion = append(c.est.PerMillion, line("Interface endpoint data (lambda)", []string{id}, "vpce.interface.gb", gb,
			fmt.Sprintf("%s wake invokes × %s bytes × %s per GB", num(c.u.Webhooks), num(c.u.WakeInvokeBytes), dollars(lookup("vpce.interface.gb").Value))))
	}
	return nil
}

// findPolls lists the scheduled rules and recurring schedules that invoke
// a function.
func (c *calc) findPolls() error {
	var errs []error
	for _, id := range c.ids {
		r := c.res[id]
		var expr string
		var targets []any
		switch r.Type {
		case "AWS::Events::Rule":
			expr, _ = r.Properties["ScheduleExpression"].(string)
			targets = list(r.Properties["Targets"])
		case "AWS::Scheduler::Schedule":
			expr, _ = r.Properties["ScheduleExpression"].(string)
			targets = []any{r.Properties["Target"]}
		default:
			continue
		}
		if state, _ := r.Properties["State"].(string); expr == "" || state == "DISABLED" || strings.HasPrefix(expr, "at(") {
			continue
		}
		period, err := samtemplate.ParseRate(expr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w (cron schedules are not priced)", id, err))
			continue
		}
		for _, t := range targets {
			tm, _ := t.(map[string]any)
			fn := refID(tm["Arn"])
			if c.res[fn].Type != "AWS::Lambda::Function" {
				errs = append(errs, fmt.Errorf("%s: a scheduled target other than a function of the template (%s) is not priced", id, canon(tm["Arn"])))
				continue
			}
			c.est.Polls = append(c.est.Polls, Poll{Resource: id, Expression: expr, Target: fn, Period: period,
				PerMonth: c.u.HoursPerMonth * float64(time.Hour) / float64(period)})
		}
	}
	return errors.Join(errs...)
}

// wakePath says how a stored webhook reaches the processor: S3's event
// for a wake marker ("s3"), an invoke by the receiver ("invoke"), the
// processor's schedule ("poll"), or nothing the template shows ("none").
func (c *calc) wakePath() string {
	proc := c.u.Processor
	if _, ok := c.res[proc]; !ok {
		return "none"
	}
	for _, id := range c.ids {
		r := c.res[id]
		if r.Type != "AWS::Events::Rule" || r.Properties["EventPattern"] == nil {
			continue
		}
		if !strings.Contains(canon(dig(r.Properties, "EventPattern", "source")), "aws.s3") {
			continue
		}
		for _, t := range list(r.Properties["Targets"]) {
			if tm, _ := t.(map[string]any); refID(tm["Arn"]) == proc {
				return "s3"
			}
		}
	}
	if c.mayInvoke(c.u.Receiver, proc) {
		return "invoke"
	}
	for _, p := range c.est.Polls {
		if p.Target == proc {
			return "poll"
		}
	}
	return "none"
}

// mayInvoke reports whether function from's role allows lambda:InvokeFunction
// on function to (its inline policies, and AWS::IAM::Policy resources
// attached to the role).
func (c *calc) mayInvoke(from, to string) bool {
	fn, ok := c.res[from]
	if !ok {
		return false
	}
	role := refID(fn.Properties["Role"])
	var docs []any
	if r, ok := c.res[role]; ok {
		for _, pol := range list(r.Properties["Policies"]) {
			docs = append(docs, dig(pol, "PolicyDocument"))
		}
	}
	for _, id := range c.ids {
		r := c.res[id]
		if r.Type == "AWS::IAM::Policy" && names(canon(r.Properties["Roles"]), role) {
			docs = append(docs, r.Properties["PolicyDocument"])
		}
	}
	for _, d := range docs {
		for _, st := range list(dig(d, "Statement")) {
			if dig(st, "Effect") != "Allow" {
				continue
			}
			actions := samtemplate.Strings(dig(st, "Action"))
			if (slices.Contains(actions, "lambda:InvokeFunction") || slices.Contains(actions, "lambda:*")) &&
				names(canon(dig(st, "Resource")), to) {
				return true
			}
		}
	}
	return false
}

// functions prices the runs idle pays: every poll's.
func (c *calc) functions() error {
	var requests float64
	var fns []string
	for _, p := range c.est.Polls {
		gb, err := c.memoryGB(p.Target)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Target, err)
		}
		secs := c.u.ScheduledRunSeconds
		if runFor, ok := c.runFor(p.Target); ok && runFor > 0 {
			secs = runFor.Seconds()
		}
		c.est.Idle = append(c.est.Idle, line("Lambda duration: "+p.Target, []string{p.Target, p.Resource}, "lambda.gbs.arm64", p.PerMonth*secs*gb,
			fmt.Sprintf("%s runs (%s) × %s s × %s GB", num(p.PerMonth), p.Expression, num(secs), num(gb))))
		requests += p.PerMonth
		fns = append(fns, p.Target)
	}
	if requests > 0 {
		c.est.Idle = append(c.est.Idle, line("Lambda requests", fns, "lambda.requests", requests/1e6,
			fmt.Sprintf("%s scheduled runs", num(requests))))
	}
	return nil
}

// runFor is the function's PROCESSOR_RUN_FOR: how long each run polls.
func (c *calc) runFor(fn string) (time.Duration, bool) {
	v, _ := dig(c.res[fn].Properties, "Environment", "Variables", "PROCESSOR_RUN_FOR").(string)
	d, err := time.ParseDuration(v)
	return d, err == nil
}

// memoryGB is the function's memory in GB, refusing what the table does
// not price (another architecture).
func (c *calc) memoryGB(fn string) (float64, error) {
	p := c.res[fn].Properties
	arch := samtemplate.Strings(p["Architectures"])
	if len(arch) == 0 {
		arch = []string{"x86_64"} // Lambda's default
	}
	if len(arch) != 1 || arch[0] != "arm64" {
		return 0, fmt.Errorf("architectures %v: only arm64 is priced", arch)
	}
	mb, ok := number(p["MemorySize"])
	if !ok {
		mb = 128 // Lambda's default
	}
	return mb / 1024, nil
}

// monitoring prices the alarms, dashboards, logs and metrics of a month at
// idle.
func (c *calc) monitoring() {
	if len(c.alarms) > 0 {
		c.est.Idle = append(c.est.Idle, line("CloudWatch alarms", c.alarms, "cw.alarm", c.alarmMetrics,
			fmt.Sprintf("%s alarm metrics × %s", num(c.alarmMetrics), dollars(lookup("cw.alarm").Value))))
	}
	if len(c.dashboards) > 0 {
		n := float64(len(c.dashboards))
		c.est.Idle = append(c.est.Idle, line("CloudWatch dashboards", c.dashboards, "cw.dashboard", n,
			fmt.Sprintf("%s × %s", num(n), dollars(lookup("cw.dashboard").Value))))
	}
	var runs, metrics float64
	var fns []string
	for _, p := range c.est.Polls {
		runs += p.PerMonth
		fns = append(fns, p.Target)
		// A metric bills for each hour it is published in.
		metrics += float64(c.u.IdleMetrics[p.Target]) * min(1, float64(time.Hour)/float64(p.Period))
	}
	if runs > 0 {
		gb := runs * c.u.LogBytesPerInvocation / 1e9
		c.est.Idle = append(c.est.Idle, line("CloudWatch Logs ingestion", fns, "logs.ingest", gb,
			fmt.Sprintf("%s runs × %s bytes", num(runs), num(c.u.LogBytesPerInvocation))))
	}
	if metrics > 0 {
		c.est.Idle = append(c.est.Idle, line("EMF metrics", fns, "cw.metric", metrics,
			fmt.Sprintf("%s metrics published in every hour they run", num(metrics))))
	}
}

// idleMetricMonths is what each function's metrics bill at idle.
func (c *calc) idleMetricMonths(fn string) float64 {
	var m float64
	for _, p := range c.est.Polls {
		if p.Target == fn {
			m = max(m, float64(c.u.IdleMetrics[fn])*min(1, float64(time.Hour)/float64(p.Period)))
		}
	}
	return m
}

// perMillion prices what a million webhooks a month add to idle.
func (c *calc) perMillion() {
	u := c.u
	pm := &c.est.PerMillion
	if len(c.httpAPIs) > 0 {
		*pm = append(*pm, line("API Gateway requests", c.httpAPIs, "apigw.http", u.Webhooks/1e6,
			fmt.Sprintf("%s requests × %s per million", num(u.Webhooks), dollars(lookup("apigw.http").Value))))
	}
	runs := map[string]Invocations{}
	for fn, inv := range u.PerMillion {
		if _, ok := c.res[fn]; ok {
			runs[fn] = inv
		}
	}
	switch c.est.Wake {
	case "invoke", "s3":
		runs[u.Processor] = u.WokenProcessor
	case "poll":
		*pm = append(*pm, note("Lambda duration: "+u.Processor, []string{u.Processor},
			"it polls: the webhooks are handled inside the runs idle already pays"))
	}
	var requests, invocations float64
	var fns []string
	for _, fn := range sortedKeys(runs) {
		inv := runs[fn]
		gb, err := c.memoryGB(fn)
		if err != nil {
			continue // refused with its resource already
		}
		*pm = append(*pm, line("Lambda duration: "+fn, []string{fn}, "lambda.gbs.arm64", inv.Count*inv.Seconds*gb,
			fmt.Sprintf("%s runs × %s s × %s GB", num(inv.Count), num(inv.Seconds), num(gb))))
		requests += inv.Count
		invocations += inv.Count
		fns = append(fns, fn)
	}
	if requests > 0 {
		*pm = append(*pm, line("Lambda requests", fns, "lambda.requests", requests/1e6, fmt.Sprintf("%s invocations", num(requests))))
	}
	if c.est.Wake == "s3" {
		*pm = append(*pm,
			line("S3 wake markers", c.s3Events, "s3.put", u.Webhooks/1000,
				fmt.Sprintf("one PUT per webhook: %s × %s per 1,000", num(u.Webhooks), dollars(lookup("s3.put").Value))),
			line("EventBridge events from S3", c.s3Events, "events.s3", u.Webhooks/1e6,
				fmt.Sprintf("one per wake marker: %s × %s per million", num(u.Webhooks), dollars(lookup("events.s3").Value))))
	}
	if bucket := c.archiveBucket(); bucket != "" {
		objects := u.Webhooks / u.ArchiveBatch
		gb := u.Webhooks * u.BodyBytes / 1e9
		*pm = append(*pm,
			line("S3 archive PUTs", []string{bucket}, "s3.put", objects/1000, fmt.Sprintf("%s objects", num(objects))),
			line("S3 archive HEADs", []string{bucket}, "s3.get", objects/1000, fmt.Sprintf("%s objects", num(objects))),
			line("S3 archive storage", []string{bucket}, "s3.storage", gb,
				fmt.Sprintf("a month's bodies, %s (it grows by this every month)", gbText(gb))))
	}
	if len(c.scheduleGrp) > 0 {
		*pm = append(*pm, line("EventBridge Scheduler", c.scheduleGrp, "scheduler.invocations", u.ScheduledWakeups/1e6,
			fmt.Sprintf("%s one-time schedules fired", num(u.ScheduledWakeups))))
	}
	logBytes := invocations * u.LogBytesPerInvocation
	usage := fmt.Sprintf("%s invocations × %s bytes", num(invocations), num(u.LogBytesPerInvocation))
	if c.accessLogs && len(c.httpAPIs) > 0 {
		logBytes += u.Webhooks * u.AccessLogBytes
		usage += fmt.Sprintf(" + %s access-log records × %s bytes", num(u.Webhooks), num(u.AccessLogBytes))
	}
	if logBytes > 0 {
		*pm = append(*pm, line("CloudWatch Logs ingestion", fns, "logs.ingest", logBytes/1e9, usage))
	}
	var metrics float64
	var mfns []string
	for _, fn := range sortedKeys(u.LoadMetrics) {
		if _, ok := c.res[fn]; !ok {
			continue
		}
		if add := float64(u.LoadMetrics[fn]) - c.idleMetricMonths(fn); add > 0 {
			metrics += add
			mfns = append(mfns, fn)
		}
	}
	if metrics > 0 {
		*pm = append(*pm, line("EMF metrics", mfns, "cw.metric", metrics,
			fmt.Sprintf("%s more metrics published every hour", num(metrics))))
	}
}

// archiveBucket is the bucket the archiver writes (its ARCHIVE_BUCKET).
func (c *calc) archiveBucket() string {
	fn, ok := c.res[c.u.Archiver]
	if !ok {
		return ""
	}
	return refID(dig(fn.Properties, "Environment", "Variables", "ARCHIVE_BUCKET"))
}

// secretsLine prices every secret: the stack's own, those RDS manages for
// it, and those named by its parameters (created by the deployer, but
// billed all the same while the stack needs them).
func (c *calc) secretsLine() {
	var names []string
	names = append(names, c.secrets...)
	for _, p := range c.givenSecrets {
		names = append(names, p+" (a parameter: you create it)")
	}
	if len(names) == 0 {
		return
	}
	n := float64(len(names))
	c.est.Idle = append(c.est.Idle, line("Secrets Manager secrets", names, "secretsmanager.secret", n,
		fmt.Sprintf("%s × %s", num(n), dollars(lookup("secretsmanager.secret").Value))))
}

// names reports whether text (a value as JSON) names the logical id id:
// a Ref, a Fn::GetAtt or a ${id.Attr} in a Fn::Sub.
func names(text, id string) bool {
	return regexp.MustCompile(`(^|[^A-Za-z0-9])` + regexp.QuoteMeta(id) + `([^A-Za-z0-9]|$)`).MatchString(text)
}

// refID is the logical id a Ref or Fn::GetAtt names ("" for anything else).
func refID(v any) string {
	m, _ := v.(map[string]any)
	if r, ok := m["Ref"].(string); ok {
		return r
	}
	if g, ok := m["Fn::GetAtt"].([]any); ok && len(g) > 0 {
		s, _ := g[0].(string)
		return s
	}
	if g, ok := m["Fn::GetAtt"].(string); ok {
		return strings.SplitN(g, ".", 2)[0]
	}
	return ""
}

// dig walks maps by keys.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// number reads a number as JSON or a parameter gives it.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}

func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return strings.EqualFold(x, "true")
	}
	return false
}

// canon is v as JSON, for matching inside policies and patterns.
func canon(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
