package lambdalocal

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localevents"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
)

// The local stack's names: the account and region of its ARNs (those the
// template's evaluation assumes, samtemplate), and its stack name.
const (
	Account   = "123456789012"
	Region    = "us-east-1"
	StackName = "webhook-inbox-local"
)

// FunctionARN is the local ARN of the function logicalID: its name is its
// logical id (in AWS, <stack>-<logical id>-<suffix>).
func FunctionARN(logicalID string) string {
	return "arn:aws:lambda:" + Region + ":" + Account + ":function:" + logicalID
}

// FunctionName is the local name of the function logicalID: the
// template's FunctionName when it is a plain name, else the logical id.
func FunctionName(logicalID string, r samtemplate.Resource) string {
	if n, ok := r.Properties["FunctionName"].(string); ok && n != "" {
		return n
	}
	return logicalID
}

// AdminSecretARN is the local stand-in of the database's master secret,
// which RDS manages in create mode (the front's DATABASE_SECRET_ARN).
const AdminSecretARN = "arn:aws:secretsmanager:" + Region + ":" + Account + ":secret:rds!db-" + StackName

// deployment is what a deployed stack knows that the template does not:
// each resource's physical id (what Ref gives) and attributes (what
// Fn::GetAtt gives), here the local stand-ins' (the local buckets, the
// functions' local names and ARNs, the local database's host and port,
// the local secrets' ARNs).
type deployment struct {
	stack *samtemplate.Stack
	refs  map[string]string
	attrs map[string]string
	// buckets are the S3 buckets' local names, by logical id; notify those
	// whose EventBridge notifications the template turns on; versioned
	// those it versions.
	buckets          map[string]string
	notify, versions []string
}

// newDeployment names the local stand-in of each resource of res, st's
// resources (a bucket webhook-inbox-local-<logical id>, lowercased); db
// is the local database.
func newDeployment(st *samtemplate.Stack, res map[string]samtemplate.Resource, db *url.URL) *deployment {
	d := &deployment{stack: st, refs: map[string]string{}, attrs: map[string]string{}, buckets: map[string]string{}}
	host, port := db.Hostname(), db.Port()
	if port == "" {
		port = "5432"
	}
	ids := make([]string, 0, len(res))
	for id := range res {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := res[id]
		local := strings.ToLower(StackName + "-" + id)
		switch r.Type {
		case "AWS::Serverless::Function", "AWS::Lambda::Function":
			// Its name: the template's FunctionName when it gives one (the
			// relay and the schedules name the processor and the archiver
			// by theirs), else its logical id.
			name := FunctionName(id, r)
			d.refs[id] = name
			d.attrs[id+".Arn"] = FunctionARN(name)
			// AutoPublishAlias's version and alias (SAM's Ref forms).
			d.refs[id+".Version"] = FunctionARN(name) + ":1"
			d.refs[id+".Alias"] = FunctionARN(name) + ":live"
		case "AWS::S3::Bucket":
			name := local
			d.buckets[id] = name
			d.refs[id] = name
			d.attrs[id+".Arn"] = "arn:aws:s3:::" + name
			if nc, _ := r.Properties["NotificationConfiguration"].(map[string]any); nc != nil {
				if eb, _ := nc["EventBridgeConfiguration"].(map[string]any); eb != nil && fmt.Sprint(eb["EventBridgeEnabled"]) == "true" {
					d.notify = append(d.notify, name)
				}
			}
			if vc, _ := r.Properties["VersioningConfiguration"].(map[string]any); vc != nil && vc["Status"] == "Enabled" {
				d.versions = append(d.versions, name)
			}
		case "AWS::Scheduler::ScheduleGroup":
			name, _ := r.Properties["Name"].(string)
			if name == "" {
				name = local
			}
			d.refs[id] = name
			d.attrs[id+".Arn"] = "arn:aws:scheduler:" + Region + ":" + Account + ":schedule-group/" + name
		case "AWS::IAM::Role":
			d.refs[id] = local
			d.attrs[id+".Arn"] = "arn:aws:iam::" + Account + ":role/" + local
		case "AWS::SecretsManager::Secret":
			d.refs[id] = "arn:aws:secretsmanager:" + Region + ":" + Account + ":secret:" + local
		case "AWS::RDS::DBInstance", "AWS::RDS::DBCluster", "AWS::RDS::DBProxy":
			// The one local database stands for the instance, the cluster
			// and the proxy alike: RDS Proxy is not reproduced.
			d.refs[id] = local
			for _, a := range []string{"Endpoint.Address", "ReadEndpoint.Address", "Endpoint"} {
				d.attrs[id+"."+a] = host
			}
			d.attrs[id+".Endpoint.Port"] = port
			d.attrs[id+".MasterUserSecret.SecretArn"] = AdminSecretARN
			d.attrs[id+".DbiResourceId"] = "db-LOCAL"
			d.attrs[id+".DBClusterResourceId"] = "cluster-LOCAL"
			d.attrs[id+".DBProxyArn"] = "arn:aws:rds:" + Region + ":" + Account + ":db-proxy:prx-local"
		default:
			// Not read by any function (an endpoint's id, a target
			// group's): a name of its own.
			d.refs[id] = local
		}
	}
	return d
}

// unresolved names the values known only once deployed that the local
// stack has no stand-in for, as the template refers to them
// (samtemplate.MissingError).
type unresolved []string

// value is the local stand-in of resource id's Ref (attribute "") or
// attribute: samtemplate.Lookup.
func (d *deployment) value(id, attribute string) (string, bool) {
	if attribute == "" {
		v, ok := d.refs[id]
		return v, ok
	}
	v, ok := d.attrs[id+"."+attribute]
	return v, ok
}

// valueOrPlaceholder is value, or "local-<name>" for what the local stack
// does not stand in for: for properties nothing reads.
func (d *deployment) valueOrPlaceholder(id, attribute string) (string, bool) {
	if v, ok := d.value(id, attribute); ok {
		return v, true
	}
	return "local-" + strings.TrimSuffix(id+"."+attribute, "."), true
}

// resolve replaces what only a deployed stack knows with the local
// stand-ins' values; missing names what the local stack does not stand
// in for, left in its long form.
func (d *deployment) resolve(v any) (r any, missing unresolved, err error) {
	r, err = d.stack.ResolveDeployed(v, d.value)
	var m *samtemplate.MissingError
	if errors.As(err, &m) {
		return r, m.Missing, nil
	}
	return r, nil, err
}

// environment is function res's template environment with the local
// stand-ins' values; missing names each variable whose value the local
// stack has no stand-in for.
func (d *deployment) environment(r samtemplate.Resource) (map[string]string, map[string]unresolved, error) {
	env, _ := r.Properties["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	out := map[string]string{}
	missing := map[string]unresolved{}
	var errs []error
	for k, v := range vars {
		r, m, err := d.resolve(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k, err))
		}
		out[k] = fmt.Sprint(r)
		if len(m) > 0 {
			missing[k] = m
		}
	}
	return out, missing, errors.Join(errs...)
}

// rules returns the template's event rules, each a localevents.Rule: every
// function's EventBridgeRule events (SAM), and every AWS::Events::Rule
// resource whose targets are the template's functions. It refuses what the
// local stack cannot run as AWS would: a function's Schedule or ScheduleV2
// event (nothing runs on a clock here: the stack is idle when nothing
// arrives), a rule on a schedule, on another event bus, or that rewrites
// the event for its target, and event types it does not know.
func (d *deployment) rules(res map[string]samtemplate.Resource) ([]localevents.Rule, error) {
	ids := make([]string, 0, len(res))
	for id := range res {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var (
		out  []localevents.Rule
		errs []error
	)
	for _, id := range ids {
		r := res[id]
		switch r.Type {
		case "AWS::Serverless::Function":
			events, _ := r.Properties["Events"].(map[string]any)
			for _, name := range slices.Sorted(maps.Keys(events)) {
				ev, _ := events[name].(map[string]any)
				props, _ := ev["Properties"].(map[string]any)
				switch typ, _ := ev["Type"].(string); typ {
				case "HttpApi":
					// Served by the local API front.
				case "EventBridgeRule":
					if err := servable(props, "EventBusName", "Input", "InputPath", "InputTransformer"); err != nil {
						errs = append(errs, fmt.Errorf("lambdalocal: %s's event %s: %w", id, name, err))
						continue
					}
					p, m, err := d.resolve(props["Pattern"])
					if err != nil {
						errs = append(errs, fmt.Errorf("lambdalocal: %s's event %s: %w", id, name, err))
						continue
					}
					pattern, _ := p.(map[string]any)
					if len(m) > 0 {
						errs = append(errs, fmt.Errorf("lambdalocal: %s's event %s: its pattern names %s, which the local stack does not stand in for", id, name, strings.Join(m, ", ")))
						continue
					}
					if err := localevents.CheckPattern(pattern); err != nil {
						errs = append(errs, fmt.Errorf("lambdalocal: %s's event %s: %w", id, name, err))
						continue
					}
					out = append(out, localevents.Rule{Name: id + "." + name, Pattern: pattern, Targets: []string{FunctionARN(FunctionName(id, r))}})
				case "Schedule", "ScheduleV2":
					errs = append(errs, fmt.Errorf("lambdalocal: %s's event %s is a %s: the local stack runs nothing on a clock (nothing is to poll at idle); arm a one-time wake-up instead (shared/wake)", id, name, typ))
				default:
					errs = append(errs, fmt.Errorf("lambdalocal: %s's event %s of type %s is not served locally", id, name, typ))
				}
			}
		case "AWS::Events::Rule":
			if state, _ := r.Properties["State"].(string); state == "DISABLED" {
				continue
			}
			if _, ok := r.Properties["ScheduleExpression"]; ok {
				errs = append(errs, fmt.Errorf("lambdalocal: rule %s runs on a schedule: the local stack runs nothing on a clock", id))
				continue
			}
			if err := servable(r.Properties, "EventBusName"); err != nil {
				errs = append(errs, fmt.Errorf("lambdalocal: rule %s: %w", id, err))
				continue
			}
			p, m, err := d.resolve(r.Properties["EventPattern"])
			if err != nil {
				errs = append(errs, fmt.Errorf("lambdalocal: rule %s: %w", id, err))
				continue
			}
			pattern, _ := p.(map[string]any)
			targets, _ := r.Properties["Targets"].([]any)
			rule := localevents.Rule{Name: id, Pattern: pattern}
			for _, t := range targets {
				tm, _ := t.(map[string]any)
				if err := servable(tm, "Input", "InputPath", "InputTransformer"); err != nil {
					errs = append(errs, fmt.Errorf("lambdalocal: rule %s's target: %w", id, err))
					continue
				}
				a, more, err := d.resolve(tm["Arn"])
				if err != nil {
					errs = append(errs, fmt.Errorf("lambdalocal: rule %s's target: %w", id, err))
					continue
				}
				m = append(m, more...)
				arn := fmt.Sprint(a)
				if !strings.HasPrefix(arn, FunctionARN("")) {
					errs = append(errs, fmt.Errorf("lambdalocal: rule %s's target %s is not one of the template's functions", id, arn))
					continue
				}
				rule.Targets = append(rule.Targets, arn)
			}
			if len(m) > 0 {
				errs = append(errs, fmt.Errorf("lambdalocal: rule %s names %s, which the local stack does not stand in for", id, strings.Join(m, ", ")))
				continue
			}
			if err := localevents.CheckPattern(pattern); err != nil {
				errs = append(errs, fmt.Errorf("lambdalocal: rule %s: %w", id, err))
				continue
			}
			out = append(out, rule)
		}
	}
	return out, errors.Join(errs...)
}

// servable refuses the properties a rule or event may have that the local
// bus does not serve: another event bus, an input of the rule's own.
func servable(props map[string]any, keys ...string) error {
	for _, k := range keys {
		v, ok := props[k]
		if !ok || v == nil || v == "" || (k == "EventBusName" && v == "default") {
			continue
		}
		return fmt.Errorf("%s is not served locally (the local bus is the default one, and hands targets the event as it is)", k)
	}
	return nil
}

// customResource is one of the template's custom resources, as the local
// stack sends its requests.
type customResource struct {
	id, typ string
	// function is the logical id of its ServiceToken's function.
	function string
	props    map[string]any
	// physical is the id its function answered Create with.
	physical string
}

// customResources returns the template's custom resources, sorted by
// logical id, each served by one of the template's functions. Their
// properties carry the local stand-ins' values (a reference to what the
// local stack has no stand-in for, which their functions do not read,
// such as the network path DatabaseSchema names, becomes "local-<name>"),
// and scalars are sent as strings, as CloudFormation sends them
// (https://github.com/aws-cloudformation/cloudformation-coverage-roadmap/issues/1037).
func (d *deployment) customResources(res map[string]samtemplate.Resource) ([]customResource, error) {
	ids := make([]string, 0, len(res))
	for id := range res {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var (
		out  []customResource
		errs []error
	)
	for _, id := range ids {
		r := res[id]
		if !strings.HasPrefix(r.Type, "Custom::") && r.Type != "AWS::CloudFormation::CustomResource" {
			continue
		}
		t, m, err := d.resolve(r.Properties["ServiceToken"])
		token := fmt.Sprint(t)
		fn, isLocal := strings.CutPrefix(token, FunctionARN(""))
		if _, declared := res[fn]; err != nil || len(m) > 0 || !isLocal || !declared {
			errs = append(errs, fmt.Errorf("lambdalocal: custom resource %s: its ServiceToken is not one of the template's functions", id))
			continue
		}
		p, err := d.stack.ResolveDeployed(r.Properties, d.valueOrPlaceholder)
		if err != nil {
			errs = append(errs, fmt.Errorf("lambdalocal: custom resource %s: %w", id, err))
			continue
		}
		props, _ := stringify(p).(map[string]any)
		props["ServiceToken"] = token
		out = append(out, customResource{id: id, typ: r.Type, function: fn, props: props})
	}
	return out, errors.Join(errs...)
}

// stringify turns numbers and booleans into strings, everywhere in v.
func stringify(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = stringify(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = stringify(e)
		}
		return out
	case string, nil:
		return v
	}
	return fmt.Sprint(v)
}
