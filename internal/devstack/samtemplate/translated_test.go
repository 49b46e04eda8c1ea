package samtemplate_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
)

// These checks read the template SAM hands CloudFormation (SAM's own
// translator, as cfn-lint runs it: scripts/sam-translate.py), evaluated for
// each way to deploy (every profile, in create mode and in existing mode
// with and without subnets, endpoints and IAM authentication), so they see
// every role, policy and resource that is really created, including what
// SAM generates.

var (
	translateOnce sync.Once
	translatedDoc map[string]any
	translateErr  error
)

// translated returns the translated template. Without python3 or the SAM
// translator the checks skip, saying so, except in CI (CI=true), where
// `make test` installs the translator and a skip would hide a regression.
func translated(t *testing.T) map[string]any {
	t.Helper()
	translateOnce.Do(func() {
		translatedDoc, translateErr = samtemplate.Translate(context.Background(), repoRoot, filepath.Join(repoRoot, "template.yaml"))
	})
	if errors.Is(translateErr, samtemplate.ErrNoTranslator) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v; CI must run the translated-template checks", translateErr)
		}
		t.Skipf("%v: the translated-template checks need it", translateErr)
	}
	if translateErr != nil {
		t.Fatal(translateErr)
	}
	return translatedDoc
}

const (
	adminSecret   = "arn:aws:secretsmanager:us-east-1:123456789012:secret:rds!cluster-0abc-AbCdEf"
	vpcPolicy     = "FunctionVpcAccessPolicy" // the stack's own: see checkVpcAccess
	userSubnets   = "subnet-0a1b2c3d,subnet-0e5f6a7b"
	userGroups    = "sg-0db0000001"
	userVpc       = "vpc-0123abcd"
	userRtbs      = "rtb-0a0a0a0a,rtb-0b0b0b0b"
	userProxyID   = "prx-0123456789abcdef"
	userClusterID = "cluster-ABCDEFGHIJKLMNOPQRSTUVWXY"
	userDbID      = "db-ABCDEFGHIJKL"
)

// The deployment profiles (Profile), the default first among equals.
const (
	economy    = "economy"
	standard   = "standard"
	highVolume = "high-volume"
)

var profiles = []string{economy, standard, highVolume}

// scenario is one way to deploy, with what it should give.
type scenario struct {
	name    string
	params  map[string]string
	profile string // Profile ("" reads it from params, default standard)
	create  bool   // DatabaseMode=create
	iam     bool   // the functions sign RDS IAM tokens (always in create mode)
	vpc     bool   // the functions (but the relay and the front) run in a VPC
	nat     bool   // the subnets reach AWS by themselves (VpcEndpoints=none)
	// roleSecrets: the stack generates a secret per role (for the
	// functions, or for a proxy that logs in with them).
	roleSecrets bool
	connectID   string // existing mode's rds-db:connect resource id (DatabaseResourceId)
}

func (s scenario) economy() bool    { return s.profile == economy }
func (s scenario) highVolume() bool { return s.profile == highVolume }

// instance, cluster, proxy: what create mode makes for the profile: an RDS
// for PostgreSQL instance (standard), an Aurora Serverless v2 cluster
// (economy, high-volume), RDS Proxy in front of it (high-volume).
func (s scenario) instance() bool { return s.create && s.profile == standard }
func (s scenario) cluster() bool  { return s.create && s.profile != standard }
func (s scenario) proxy() bool    { return s.create && s.highVolume() }

// endpoints: the stack makes the VPC endpoints its functions need.
func (s scenario) endpoints() bool { return s.create || (s.vpc && !s.nat) }

// lambdaEndpoint: the receiver wakes the processor with lambda:Invoke from
// the VPC (every profile but economy).
func (s scenario) lambdaEndpoint() bool { return s.endpoints() && !s.economy() }

// secretsEndpoint: the functions read their passwords from the VPC
// (existing mode with password authentication only).
func (s scenario) secretsEndpoint() bool { return s.endpoints() && !s.iam }

// wakeMode is WAKE_MODE: an asynchronous invoke, or a marker object in the
// economy profile, which pays for no interface endpoint.
func (s scenario) wakeMode() string {
	if s.economy() {
		return "object"
	}
	return "invoke"
}

var existing = map[string]string{"DatabaseMode": "existing", "DatabaseHost": "db.example.internal", "DatabaseAdminSecretArn": adminSecret}

func with(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{"SourcesSecretArn": sourcesSecret}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// scenarios: each profile in create mode (as chosen, and with DatabaseAuth
// named), and in existing mode without subnets, with subnets and the
// stack's endpoints, and with subnets that have NAT (VpcEndpoints=none),
// authenticating with passwords, with IAM directly, and with IAM through
// your RDS Proxy; and high-volume with a minimum of 0 ACU.
var scenarios = func() []scenario {
	subnets := []string{"SubnetIds", userSubnets, "SecurityGroupIds", userGroups, "VpcId", userVpc}
	withEndpoints := append(slices.Clone(subnets), "RouteTableIds", userRtbs)
	withNat := append(slices.Clone(subnets), "VpcEndpoints", "none")
	var out []scenario
	for _, p := range profiles {
		create := func(kv ...string) map[string]string { return with(nil, append([]string{"Profile", p}, kv...)...) }
		exist := func(kv ...string) map[string]string { return with(existing, append([]string{"Profile", p}, kv...)...) }
		iam := func(id string, kv []string) []string {
			return append([]string{"DatabaseAuth", "iam", "DatabaseResourceId", id}, kv...)
		}
		hv := p == highVolume
		out = append(out,
			scenario{name: p + ", create", params: create(), create: true, iam: true, vpc: true, roleSecrets: hv},
			scenario{name: p + ", create, iam named", params: create("DatabaseAuth", "iam"), create: true, iam: true, vpc: true, roleSecrets: hv},
			scenario{name: p + ", existing, password, no VPC", params: exist(), roleSecrets: true},
			scenario{name: p + ", existing, password, VPC with endpoints", params: exist(withEndpoints...), vpc: true, roleSecrets: true},
			scenario{name: p + ", existing, password, VPC with NAT", params: exist(withNat...), vpc: true, nat: true, roleSecrets: true},
			scenario{name: p + ", existing, iam direct, VPC with endpoints", params: exist(iam(userClusterID, withEndpoints)...), iam: true, vpc: true, connectID: userClusterID},
			scenario{name: p + ", existing, iam through your proxy, VPC with endpoints", params: exist(iam(userProxyID, withEndpoints)...), iam: true, vpc: true, roleSecrets: true, connectID: userProxyID},
			scenario{name: p + ", existing, iam through your proxy, VPC with NAT", params: exist(iam(userProxyID, withNat)...), iam: true, vpc: true, nat: true, roleSecrets: true, connectID: userProxyID},
			scenario{name: p + ", existing, iam direct, no VPC", params: exist(iam(userDbID, nil)...), iam: true, connectID: userDbID},
		)
	}
	out = append(out, scenario{name: "high-volume, create, paused when idle", params: with(nil, "Profile", highVolume, "DatabaseMinCapacity", "0", "DatabaseMaxCapacity", "2"),
		create: true, iam: true, vpc: true, roleSecrets: true})
	for i := range out {
		out[i].profile = out[i].params["Profile"]
	}
	return out
}()

// deployed is a scenario's evaluated, translated stack.
type deployed struct {
	scenario
	st  *samtemplate.Stack
	res map[string]samtemplate.Resource
}

func deploy(t *testing.T, sc scenario) deployed {
	t.Helper()
	sc.profile = cmp.Or(sc.profile, sc.params["Profile"], standard)
	st, err := samtemplate.NewStack(translated(t), sc.params)
	if err != nil {
		t.Fatal(err)
	}
	if failed, err := st.FailedRules(); err != nil || len(failed) > 0 {
		t.Fatalf("CloudFormation would refuse these parameters: %v %v", failed, err)
	}
	res, err := st.Resources()
	if err != nil {
		t.Fatal(err)
	}
	return deployed{scenario: sc, st: st, res: res}
}

// dbRoles are the eight functions, with their own database role: none for
// the migration function (it connects as the admin, with the credentials
// its front hands it), the front and the relay (no database at all).
var dbRoles = map[string]string{
	"ReceiverFunction":       "webhook_receiver",
	"ProcessorFunction":      "webhook_processor",
	"ArchiverFunction":       "webhook_archiver",
	"OperatorReadFunction":   "webhook_operator_read",
	"OperatorFunction":       "webhook_operator",
	"MigrationFunction":      "",
	"MigrationFrontFunction": "",
	"RelayFunction":          "",
}

var roleSecrets = map[string]string{
	"ReceiverFunction":     "ReceiverDatabaseSecret",
	"ProcessorFunction":    "ProcessorDatabaseSecret",
	"ArchiverFunction":     "ArchiverDatabaseSecret",
	"OperatorReadFunction": "OperatorReadDatabaseSecret",
	"OperatorFunction":     "OperatorDatabaseSecret",
}

// outsideVpc are the functions that never run in a VPC: they call the AWS
// APIs (Secrets Manager, EventBridge Scheduler, CloudFormation's
// pre-signed URL) that the functions inside cannot reach without an
// interface endpoint billed by the hour (docs/relay.md).
var outsideVpc = map[string]bool{"RelayFunction": true, "MigrationFrontFunction": true}

// operatorFunctions are the operator function's two deployments, with
// their OPERATOR_ACCESS.
var operatorFunctions = map[string]string{"OperatorReadFunction": "read", "OperatorFunction": "act"}

func TestTranslatedTemplate(t *testing.T) {
	t.Parallel()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			d := deploy(t, sc)
			d.checkReferences(t)
			d.checkFunctions(t)
			d.checkRoles(t)
			d.checkVpcAccess(t)
			d.checkNetwork(t)
			d.checkEndpoints(t)
			d.checkEndpointPolicy(t)
			d.checkSchemaFirst(t)
			d.checkOwnDatabaseRole(t)
			d.checkDatabase(t)
			d.checkDatabaseLog(t)
			d.checkProxyTarget(t)
			d.checkMigration(t)
			d.checkWake(t)
			d.checkSources(t)
			d.checkControlBucket(t)
			d.checkRelay(t)
			d.checkScheduler(t)
			d.checkOperatorFunctions(t)
			d.checkOperatorPolicies(t)
			d.checkAlarms(t)
			d.checkOutputs(t)
		})
	}
}

// checkReferences: every Ref, Fn::GetAtt and Fn::Sub variable of a
// resource or an output, and every DependsOn, names a resource this
// scenario has (or a pseudo parameter): CloudFormation refuses a template
// that names one its conditions left out.
func (d deployed) checkReferences(t *testing.T) {
	t.Helper()
	check := func(where string, v any) {
		for _, id := range references(v) {
			if _, ok := d.res[id]; !ok && !strings.HasPrefix(id, "AWS::") {
				t.Errorf("%s names %s, which this scenario does not create", where, id)
			}
		}
	}
	for id, r := range d.res {
		check(id, r.Properties)
		for _, dep := range r.DependsOn {
			if _, ok := d.res[dep]; !ok {
				t.Errorf("%s depends on %s, which this scenario does not create", id, dep)
			}
		}
	}
	outs, err := d.st.Outputs()
	if err != nil {
		t.Fatal(err)
	}
	for id, v := range outs {
		check("output "+id, v)
	}
}

// checkFunctions: the eight functions, each with one role of its own.
func (d deployed) checkFunctions(t *testing.T) {
	t.Helper()
	seen := map[string]string{}
	for id, r := range d.res {
		if r.Type != "AWS::Lambda::Function" {
			continue
		}
		if _, ok := dbRoles[id]; !ok {
			t.Errorf("unexpected function %s", id)
		}
		role := target(r.Properties["Role"])
		if other, dup := seen[role]; dup {
			t.Errorf("%s and %s share the role %s", id, other, role)
		}
		seen[role] = id
	}
	if len(seen) != len(dbRoles) {
		t.Errorf("functions = %v, want %d", seen, len(dbRoles))
	}
	// Every policy is a role's inline one (checkRoles), one of the two
	// managed policies for operators (checkOperatorPolicies) or, with a
	// VPC, the functions' VPC access (checkVpcAccess): another would
	// escape these checks.
	var managed []string
	for id, r := range d.res {
		switch r.Type {
		case "AWS::IAM::Policy", "AWS::IAM::RolePolicy", "AWS::IAM::UserPolicy", "AWS::IAM::GroupPolicy":
			t.Errorf("%s (%s): a policy outside the roles escapes these checks", id, r.Type)
		case "AWS::IAM::ManagedPolicy":
			managed = append(managed, id)
		}
	}
	want := []string{"OperatorActPolicy", "OperatorReadPolicy"}
	if d.vpc {
		want = append(want, vpcPolicy)
	}
	sort.Strings(managed)
	sort.Strings(want)
	if !slices.Equal(managed, want) {
		t.Errorf("managed policies %v, want only %v", managed, want)
	}
}

// The S3 resources the roles name, as the evaluated template writes them.
var (
	archiveObjects = canon(sub("${ArchiveBucket.Arn}/archive/*"))
	archiveBucket  = canon(map[string]any{"Fn::GetAtt": []any{"ArchiveBucket", "Arn"}})
	controlBucket  = canon(map[string]any{"Fn::GetAtt": []any{"ControlBucket", "Arn"}})
)

func controlObjects(path string) string { return canon(sub("${ControlBucket.Arn}/" + path)) }

// s3Grants is every S3 action each function may take, each on the one
// resource it may take it on ("action resource"), sorted:
//
//   - the archive: the archiver and the acting operator function write,
//     delete and list it, and only the latter deletes versions (an
//     expunge's) and lists them; the processor and the read-only operator
//     function read archived bodies back, nothing else;
//   - the control bucket: the receiver reads the sources copy and writes
//     wake-up markers (wake/now/ in economy, wake/arm/ for its sweep), as
//     the acting operator function does after a requeue; the processor arms
//     its own and the archiver's later runs, the archiver its own only (the
//     relay, which keeps the copy and empties the bucket, is held to
//     relayMay by checkRelay);
//   - the migration function and its front: none.
var s3Grants = map[string][]string{
	"ArchiverFunction": {"s3:DeleteObject " + archiveObjects, "s3:GetObject " + archiveObjects, "s3:ListBucket " + archiveBucket, "s3:PutObject " + archiveObjects,
		"s3:PutObject " + controlObjects("wake/arm/archiver/*")},
	"ProcessorFunction":    {"s3:GetObject " + archiveObjects, "s3:PutObject " + controlObjects("wake/arm/*")},
	"OperatorReadFunction": {"s3:GetObject " + archiveObjects},
	"OperatorFunction": {"s3:DeleteObject " + archiveObjects, "s3:DeleteObjectVersion " + archiveObjects, "s3:GetObject " + archiveObjects,
		"s3:GetObject " + controlObjects("config/sources.json"), "s3:ListBucket " + archiveBucket, "s3:ListBucketVersions " + archiveBucket, "s3:PutObject " + archiveObjects, "s3:PutObject " + controlObjects("wake/*")},
	"ReceiverFunction":       {"s3:GetObject " + controlObjects("config/sources.json"), "s3:PutObject " + controlObjects("wake/*")},
	"MigrationFunction":      nil,
	"MigrationFrontFunction": nil,
}

// s3Denied is what a function is explicitly denied, whatever else it is
// allowed: the archive's safety net (versioning, lifecycle, the bucket
// policy) stays on, and the archiver may not delete a version.
var s3Denied = map[string][]string{
	"ArchiverFunction": {"s3:DeleteBucketPolicy", "s3:DeleteObjectVersion", "s3:PutBucketPolicy", "s3:PutBucketVersioning", "s3:PutLifecycleConfiguration"},
	"OperatorFunction": {"s3:DeleteBucketPolicy", "s3:PutBucketPolicy", "s3:PutBucketVersioning", "s3:PutLifecycleConfiguration"},
}

// sub is a Fn::Sub of s without variables, as NewStack gives it.
func sub(s string) any { return map[string]any{"Fn::Sub": []any{s, map[string]any{}}} }

// roleOf returns a function's role resource.
func (d deployed) roleOf(fn string) samtemplate.Resource {
	return d.res[target(d.res[fn].Properties["Role"])]
}

// inVpc: the function runs in a VPC in this scenario.
func (d deployed) inVpc(fn string) bool {
	_, ok := d.res[fn].Properties["VpcConfig"]
	return ok
}

// allowed returns every action a role's inline policies allow, each with
// the canonical JSON of the resources it is allowed on.
func allowed(role samtemplate.Resource) map[string][]string {
	out := map[string][]string{}
	for _, st := range statements(role) {
		if st["Effect"] != "Allow" {
			continue
		}
		for _, a := range samtemplate.Strings(st["Action"]) {
			for _, r := range resources(st) {
				out[a] = append(out[a], canon(r))
			}
		}
	}
	for a := range out {
		sort.Strings(out[a])
	}
	return out
}

// checkRoles: every function's role is the template's own AWS::IAM::Role
// for Lambda (SAM adds no managed policy to it), with the VPC-access managed
// policy exactly when the function runs in a VPC (never the relay or the
// front), its logs in its own log group, the S3 grants of s3Grants and no
// others (the relay's: checkRelay), the denials of s3Denied, and no
// wildcard action or resource.
func (d deployed) checkRoles(t *testing.T) {
	t.Helper()
	for id := range dbRoles {
		fn := d.res[id]
		roleID := target(fn.Properties["Role"])
		role, ok := d.res[roleID]
		if !ok || role.Type != "AWS::IAM::Role" {
			t.Errorf("%s: role %v is not an AWS::IAM::Role of the template", id, fn.Properties["Role"])
			continue
		}
		if !strings.Contains(fmt.Sprint(role.Properties["AssumeRolePolicyDocument"]), "lambda.amazonaws.com") {
			t.Errorf("%s: role %s is not for Lambda", id, roleID)
		}
		inVpc := d.inVpc(id)
		if want := d.vpc && !outsideVpc[id]; inVpc != want {
			t.Errorf("%s: in a VPC = %v, want %v", id, inVpc, want)
		}
		managed, _ := role.Properties["ManagedPolicyArns"].([]any)
		switch {
		case inVpc && (len(managed) != 1 || target(managed[0]) != vpcPolicy):
			t.Errorf("%s in a VPC: managed policies %v, want only the stack's %s", id, canon(managed), vpcPolicy)
		case !inVpc && len(managed) > 0:
			t.Errorf("%s outside any VPC: managed policies %v, want none", id, canon(managed))
		}
		logGroup := target(fn.Properties["LoggingConfig"].(map[string]any)["LogGroup"])
		logsOwn := false
		var s3, s3Denials []string
		for _, st := range statements(role) {
			if st["Effect"] == "Deny" {
				s3Denials = append(s3Denials, samtemplate.Strings(st["Action"])...)
				if want := canon([]any{map[string]any{"Fn::GetAtt": []any{"ArchiveBucket", "Arn"}}, sub("${ArchiveBucket.Arn}/*")}); canon(resources(st)) != want {
					t.Errorf("%s is denied %v on %s, want the bucket and all its objects %s", id, st["Action"], canon(resources(st)), want)
				}
			}
			if st["Effect"] != "Allow" {
				continue
			}
			for _, a := range samtemplate.Strings(st["Action"]) {
				if strings.Contains(a, "*") {
					t.Errorf("%s: wildcard action %q", id, a)
				}
				if strings.HasPrefix(a, "s3:") {
					for _, r := range resources(st) {
						s3 = append(s3, a+" "+canon(r))
					}
				}
			}
			for _, r := range resources(st) {
				if s, ok := r.(string); ok && strings.HasSuffix(s, "*") && !strings.HasSuffix(s, "/*") {
					t.Errorf("%s: wildcard resource %q", id, s)
				}
			}
			if slices.Contains(samtemplate.Strings(st["Action"]), "logs:PutLogEvents") {
				for _, r := range resources(st) {
					if target(r) != logGroup {
						t.Errorf("%s writes logs to %v, not only its own group %s", id, r, logGroup)
					}
				}
				logsOwn = true
			}
		}
		if !logsOwn {
			t.Errorf("%s cannot write its own logs", id)
		}
		sort.Strings(s3)
		if want, held := s3Grants[id]; held && !slices.Equal(s3, want) {
			t.Errorf("%s's S3 grants\n%s\nwant\n%s", id, strings.Join(s3, "\n"), strings.Join(want, "\n"))
		}
		sort.Strings(s3Denials)
		if !slices.Equal(s3Denials, s3Denied[id]) {
			t.Errorf("%s is denied %v, want %v", id, s3Denials, s3Denied[id])
		}
		if got, want := keys(allowed(role)), d.actions(id); id != "RelayFunction" && !slices.Equal(got, want) {
			t.Errorf("%s may %v,\nwant   %v", id, got, want)
		}
	}
}

// vpcAccess is what Lambda needs of a function's role to attach it to its
// VPC, as AWS lists it
// (https://docs.aws.amazon.com/lambda/latest/dg/configuration-vpc.html,
// "Required IAM permissions"), each action with the one resource the
// stack's policy allows it on: the Describe actions work only on "*", and
// so does CreateNetworkInterface here (its subnets may be another
// account's, shared with this one); DeleteNetworkInterface on every
// resource of the account and region, the form AWS documents for it (an
// interface Lambda created is this account's), and the private
// addresses' actions likewise. No logs action: AWSLambdaVPCAccessExecutionRole
// allowed writing to every log group, which made each role's own logs
// statement no boundary.
var vpcAccess = map[string]string{
	"ec2:CreateNetworkInterface":     `"*"`,
	"ec2:DescribeNetworkInterfaces":  `"*"`,
	"ec2:DescribeSubnets":            `"*"`,
	"ec2:DeleteNetworkInterface":     accountResources,
	"ec2:AssignPrivateIpAddresses":   accountResources,
	"ec2:UnassignPrivateIpAddresses": accountResources,
}

// accountResources is every resource of the account in the region, as the
// scenarios evaluate it.
var accountResources = canon("arn:aws:ec2:us-east-1:123456789012:*/*")

// checkVpcAccess: with functions in a VPC, the stack's VPC access policy
// allows exactly vpcAccess, each on its resource and nothing else; no
// resource of the stack names AWS's managed AWSLambdaVPCAccessExecutionRole.
func (d deployed) checkVpcAccess(t *testing.T) {
	t.Helper()
	for id, r := range d.res {
		if strings.Contains(canon(r.Properties), "AWSLambdaVPCAccessExecutionRole") {
			t.Errorf("%s names AWSLambdaVPCAccessExecutionRole", id)
		}
	}
	pol, ok := d.res[vpcPolicy]
	if !d.vpc {
		if ok {
			t.Errorf("%s exists without a VPC", vpcPolicy)
		}
		return
	}
	if !ok || pol.Type != "AWS::IAM::ManagedPolicy" {
		t.Fatalf("%s: %v, want an AWS::IAM::ManagedPolicy", vpcPolicy, pol.Type)
	}
	got := map[string]string{}
	for _, st := range policyStatements(pol.Properties["PolicyDocument"]) {
		if st["Effect"] != "Allow" || st["Condition"] != nil {
			t.Errorf("%s: statement %s", vpcPolicy, canon(st))
			continue
		}
		for _, a := range samtemplate.Strings(st["Action"]) {
			for _, res := range resources(st) {
				if _, dup := got[a]; dup {
					t.Errorf("%s allows %s twice", vpcPolicy, a)
				}
				got[a] = canon(res)
			}
		}
	}
	if !maps.Equal(got, vpcAccess) {
		t.Errorf("%s allows\n%v\nwant exactly\n%v", vpcPolicy, got, vpcAccess)
	}
}

// actions is every action a function's role allows, sorted: its logs, its
// S3 grants, its database login (its own secret, or rds-db:connect), and
// what it calls besides: the wakers invoke the processor (not in economy,
// which writes a marker), the front reads the database secrets and invokes
// the migration function (the relay's: checkRelay, against relayMay and
// relayNeeds).
func (d deployed) actions(fn string) []string {
	set := map[string]bool{"logs:CreateLogStream": true, "logs:PutLogEvents": true}
	for _, g := range s3Grants[fn] {
		action, _, _ := strings.Cut(g, " ")
		set[action] = true
	}
	switch {
	case roleSecrets[fn] != "" && d.iam:
		set["rds-db:connect"] = true
	case roleSecrets[fn] != "":
		set["secretsmanager:GetSecretValue"] = true
	}
	switch fn {
	case "ReceiverFunction", "OperatorFunction":
		set["lambda:InvokeFunction"] = !d.economy()
	case "MigrationFrontFunction":
		set["secretsmanager:GetSecretValue"], set["lambda:InvokeFunction"] = true, true
	}
	var out []string
	for a, on := range set {
		if on {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

// reachedFromVpc maps each AWS service a function inside a VPC may call to
// the kind of VPC endpoint that takes it there: S3 through the free
// gateway endpoint, Lambda (the receiver's wake-up invoke) and Secrets
// Manager (passwords, existing mode only) through interface endpoints.
// Two prefixes a role may hold need no route: logs (Lambda itself ships
// the function's logs, with the function's role) and rds-db (an IAM token
// is signed locally and checked by the database). Any other service a
// function in the VPC is allowed to call would need a route it has not.
var reachedFromVpc = map[string]string{"s3": "Gateway", "lambda": "Interface", "secretsmanager": "Interface", "logs": "", "rds-db": ""}

// checkNetwork: every function in a VPC reaches each AWS service its role
// lets it call: an endpoint in its VPC (the gateway endpoint's route tables
// serving its subnets; an interface endpoint with private DNS whose
// security group admits its groups on 443), or NAT the parameters declare.
func (d deployed) checkNetwork(t *testing.T) {
	t.Helper()
	for id := range dbRoles {
		vc, ok := d.res[id].Properties["VpcConfig"].(map[string]any)
		if !ok {
			continue
		}
		subnets, _ := vc["SubnetIds"].([]any)
		groups, _ := vc["SecurityGroupIds"].([]any)
		if len(subnets) == 0 || len(groups) == 0 {
			t.Errorf("%s: VpcConfig %v", id, vc)
			continue
		}
		vpc := d.vpcOf(subnets[0])
		for action := range allowed(d.roleOf(id)) {
			service, _, _ := strings.Cut(action, ":")
			kind, known := reachedFromVpc[service]
			switch {
			case !known:
				t.Errorf("%s in a VPC may call %s, which no endpoint of the stack reaches", id, action)
				continue
			case kind == "" || d.nat: // no route needed, or NAT declared by VpcEndpoints=none
				continue
			}
			if !d.reaches(service, kind, vpc, subnets, groups) {
				t.Errorf("%s (subnets %v, groups %v) may call %s but cannot reach %s", id, canon(subnets), canon(groups), action, service)
			}
		}
	}
}

// reaches: an endpoint of kind for service in vpc serves a function in
// subnets with groups.
func (d deployed) reaches(service, kind string, vpc any, subnets, groups []any) bool {
	for _, ep := range d.res {
		p := ep.Properties
		if ep.Type != "AWS::EC2::VPCEndpoint" || p["ServiceName"] != "com.amazonaws.us-east-1."+service || p["VpcEndpointType"] != kind || canon(p["VpcId"]) != canon(vpc) {
			continue
		}
		if kind == "Gateway" && d.routesTo(subnets, p["RouteTableIds"]) {
			return true
		}
		if kind == "Interface" && p["PrivateDnsEnabled"] == true && d.admits(p["SecurityGroupIds"], groups, 443) {
			return true
		}
	}
	return false
}

// vpcOf is the VPC of a subnet: the template's subnet's VpcId, or the
// VpcId parameter for one of yours.
func (d deployed) vpcOf(subnet any) any {
	if r, ok := d.res[target(subnet)]; ok && r.Type == "AWS::EC2::Subnet" {
		return r.Properties["VpcId"]
	}
	return d.st.Param("VpcId")
}

// routesTo: the gateway endpoint's route tables serve every subnet (the
// template's subnets by their association; yours by the route tables you
// named, which the rules require).
func (d deployed) routesTo(subnets []any, tables any) bool {
	list, _ := tables.([]any)
	if len(list) == 0 {
		return false
	}
	for _, s := range subnets {
		if _, isString := s.(string); isString {
			continue
		}
		found := false
		for _, r := range d.res {
			if r.Type == "AWS::EC2::SubnetRouteTableAssociation" && canon(r.Properties["SubnetId"]) == canon(s) {
				found = containsAll(tables, []any{r.Properties["RouteTableId"]})
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// admits: one of the groups lets one of sources in on port.
func (d deployed) admits(groups any, sources []any, port int) bool {
	list, _ := groups.([]any)
	for _, g := range list {
		sg, ok := d.res[target(g)]
		if !ok {
			continue
		}
		rules, _ := sg.Properties["SecurityGroupIngress"].([]any)
		for _, r := range rules {
			rm := r.(map[string]any)
			if canon(rm["FromPort"]) == fmt.Sprint(port) && canon(rm["ToPort"]) == fmt.Sprint(port) && containsAll(sources, []any{rm["SourceSecurityGroupId"]}) {
				return true
			}
		}
	}
	return false
}

// checkEndpoints: exactly the endpoints the profile pays for. Create mode:
// the free S3 gateway endpoint, and the Lambda interface endpoint in one
// subnet (standard: $7.30 a month) or both (high-volume), none in economy.
// Existing mode with subnets and VpcEndpoints=create: the same in your
// subnets, and a Secrets Manager endpoint only with password
// authentication. Nothing with NAT or without a VPC. The endpoints' group
// exists with an interface endpoint only, and admits the functions' group
// on 443 only.
func (d deployed) checkEndpoints(t *testing.T) {
	t.Helper()
	got := map[string]samtemplate.Resource{}
	for id, r := range d.res {
		if r.Type == "AWS::EC2::VPCEndpoint" {
			got[id] = r
		}
	}
	var want []string
	if d.endpoints() {
		want = append(want, "S3Endpoint")
	}
	if d.lambdaEndpoint() {
		want = append(want, "LambdaEndpoint")
	}
	if d.secretsEndpoint() {
		want = append(want, "SecretsManagerEndpoint")
	}
	sort.Strings(want)
	if !slices.Equal(keys(got), want) {
		t.Errorf("endpoints %v, want %v", keys(got), want)
	}
	if ep, ok := got["LambdaEndpoint"]; ok {
		var subnets any = []any{map[string]any{"Ref": "PrivateSubnetA"}}
		switch {
		case !d.create:
			subnets = []any{"subnet-0a1b2c3d", "subnet-0e5f6a7b"}
		case d.highVolume():
			subnets = []any{map[string]any{"Ref": "PrivateSubnetA"}, map[string]any{"Ref": "PrivateSubnetB"}}
		}
		if canon(ep.Properties["SubnetIds"]) != canon(subnets) {
			t.Errorf("the Lambda endpoint is in %s, want %s", canon(ep.Properties["SubnetIds"]), canon(subnets))
		}
	}
	if ep, ok := got["SecretsManagerEndpoint"]; ok && canon(ep.Properties["SubnetIds"]) != canon([]any{"subnet-0a1b2c3d", "subnet-0e5f6a7b"}) {
		t.Errorf("the Secrets Manager endpoint is in %s, want your subnets", canon(ep.Properties["SubnetIds"]))
	}
	sg, ok := d.res["EndpointSecurityGroup"]
	if interfaces := d.lambdaEndpoint() || d.secretsEndpoint(); ok != interfaces {
		t.Errorf("EndpointSecurityGroup made = %v, with interface endpoints = %v", ok, interfaces)
	}
	if ok {
		want := canon([]any{map[string]any{"Description": "HTTPS from the functions", "IpProtocol": "tcp", "FromPort": float64(443), "ToPort": float64(443),
			"SourceSecurityGroupId": map[string]any{"Ref": "FunctionSecurityGroup"}}})
		if got := canon(sg.Properties["SecurityGroupIngress"]); got != want {
			t.Errorf("the endpoints admit %s, want %s", got, want)
		}
	}
}

// checkSchemaFirst: the migration custom resource has the contract's
// shape; its ServiceToken is the front outside the VPC; the five functions
// that connect (which need the schema) depend on it, so CloudFormation
// creates or updates it first; it runs on each deploy of new code (Release
// is a version of the migration function), and in create mode it waits for
// the database instance.
func (d deployed) checkSchemaFirst(t *testing.T) {
	t.Helper()
	s, ok := d.res["DatabaseSchema"]
	if !ok || s.Type != "Custom::DatabaseSchema" {
		t.Fatalf("no Custom::DatabaseSchema: %+v", s)
	}
	p := s.Properties
	if canon(p["ServiceToken"]) != canon(map[string]any{"Fn::GetAtt": []any{"MigrationFrontFunction", "Arn"}}) {
		t.Errorf("ServiceToken = %v, want the front's ARN", p["ServiceToken"])
	}
	wantAuth := "password"
	if d.iam && !d.roleSecrets {
		wantAuth = "iam"
	}
	if p["Auth"] != wantAuth {
		t.Errorf("Auth = %v, want %s", p["Auth"], wantAuth)
	}
	for fn, secret := range roleSecrets {
		key := strings.TrimSuffix(fn, "Function") + "SecretArn"
		want := any("")
		if d.roleSecrets {
			want = map[string]any{"Ref": secret}
		}
		if canon(p[key]) != canon(want) {
			t.Errorf("%s = %v, want %v", key, p[key], want)
		}
		if _, made := d.res[secret]; made != d.roleSecrets {
			t.Errorf("%s made = %v, want %v", secret, made, d.roleSecrets)
		}
	}
	version, ok := d.res[target(p["Release"])]
	if !ok || version.Type != "AWS::Lambda::Version" || target(version.Properties["FunctionName"]) != "MigrationFunction" {
		t.Errorf("Release %v is not a version of the migration function", p["Release"])
	}
	// CloudFormation waits ServiceTimeout for the answer, which the front
	// gives within its own timeout.
	front := seconds(d.res["MigrationFrontFunction"].Properties, "Timeout")
	if timeout := seconds(p, "ServiceTimeout"); timeout < front || timeout > time.Hour {
		t.Errorf("ServiceTimeout = %v, want at least the front's timeout %v", p["ServiceTimeout"], front)
	}
	for fn := range roleSecrets {
		if !slices.Contains(d.res[fn].DependsOn, "DatabaseSchema") {
			t.Errorf("%s does not depend on DatabaseSchema: new code could serve before its schema", fn)
		}
	}
	switch {
	case d.instance() && !d.dependsOn("DatabaseSchema", "PostgresInstance"):
		t.Error("DatabaseSchema does not wait for the RDS instance")
	case d.cluster() && !d.dependsOn("DatabaseSchema", "DatabaseInstance"):
		t.Error("DatabaseSchema does not wait for the cluster's instance")
	}
	// CloudFormation invokes the front's unqualified function; a failed
	// run is reported, not retried behind CloudFormation's back.
	retries := false
	for _, r := range d.res {
		if r.Type == "AWS::Lambda::EventInvokeConfig" && target(r.Properties["FunctionName"]) == "MigrationFrontFunction" && r.Properties["Qualifier"] == "$LATEST" {
			retries = canon(r.Properties["MaximumRetryAttempts"]) == "0"
		}
	}
	if !retries {
		t.Error("the front's $LATEST keeps Lambda's automatic retries")
	}
}

// dependsOn: from reaches to through references and DependsOn.
func (d deployed) dependsOn(from, to string) bool {
	seen := map[string]bool{}
	var walk func(id string) bool
	walk = func(id string) bool {
		if id == to {
			return true
		}
		if seen[id] {
			return false
		}
		seen[id] = true
		r, ok := d.res[id]
		if !ok {
			return false
		}
		next := append(references(r.Properties), r.DependsOn...)
		for _, n := range next {
			if walk(n) {
				return true
			}
		}
		return false
	}
	return walk(from)
}

// checkOwnDatabaseRole: each function's IAM role can connect as its own
// database role only: with passwords it reads its own role's secret and no
// other, with IAM it may rds-db:connect as its own database user only, on
// the profile's database (the proxy, the instance or the cluster); its
// environment names the same. No function reads the sources secret but the
// relay; the migration function reads no secret (its front hands it the
// admin's), and the front reads the admin secret, and the roles' secrets
// when the stack makes them.
func (d deployed) checkOwnDatabaseRole(t *testing.T) {
	t.Helper()
	for fn, dbRole := range dbRoles {
		env := envOf(d.res[fn])
		var reads []string
		var connects []any
		for _, st := range statements(d.roleOf(fn)) {
			acts := samtemplate.Strings(st["Action"])
			for _, r := range resources(st) {
				if slices.Contains(acts, "secretsmanager:GetSecretValue") {
					reads = append(reads, canon(r))
				}
				if slices.Contains(acts, "rds-db:connect") {
					connects = append(connects, r)
				}
			}
		}
		sort.Strings(reads)
		var want []string
		switch fn {
		case "RelayFunction":
			want = []string{canon(sourcesSecret)}
		case "MigrationFrontFunction":
			want = []string{canon(d.adminSecret())}
			if d.roleSecrets {
				for _, s := range roleSecrets {
					want = append(want, canon(map[string]any{"Ref": s}))
				}
			}
			if canon(env["DATABASE_SECRET_ARN"]) != canon(d.adminSecret()) {
				t.Errorf("the front hands the migration function %v, want the admin secret %v", env["DATABASE_SECRET_ARN"], d.adminSecret())
			}
		case "MigrationFunction":
			if v := env["DATABASE_SECRET_ARN"]; v != nil && v != "" {
				t.Errorf("the migration function reads DATABASE_SECRET_ARN=%v: its front hands it the admin's", v)
			}
			if env["DATABASE_IAM_AUTH"] != "false" {
				t.Errorf("the migration function signs IAM tokens (%v): it logs in as the admin", env["DATABASE_IAM_AUTH"])
			}
		default:
			own := map[string]any{"Ref": roleSecrets[fn]}
			if !d.iam {
				want = append(want, canon(own))
				if canon(env["DATABASE_SECRET_ARN"]) != canon(own) || env["DATABASE_USER"] != "" || env["DATABASE_IAM_AUTH"] != "false" {
					t.Errorf("%s: environment %v, want its own secret %v", fn, env, own)
				}
			} else if env["DATABASE_SECRET_ARN"] != "" || env["DATABASE_USER"] != dbRole || env["DATABASE_IAM_AUTH"] != "true" {
				t.Errorf("%s: environment %v, want IAM as %s", fn, env, dbRole)
			}
		}
		sort.Strings(want)
		if !slices.Equal(reads, want) {
			t.Errorf("%s reads secrets %v, want %v", fn, reads, want)
		}
		switch {
		case dbRole == "" || !d.iam:
			if len(connects) > 0 {
				t.Errorf("%s may rds-db:connect %v", fn, connects)
			}
		case len(connects) != 1 || !d.connectsAs(connects[0], dbRole):
			t.Errorf("%s may rds-db:connect %s, want only as %s on %s", fn, canon(connects), dbRole, canon(d.connectResourceID()))
		}
	}
}

// adminSecret is what the migration front reads to log in as the owner:
// the master secret RDS manages for the instance or the cluster, or yours.
func (d deployed) adminSecret() any {
	switch {
	case d.instance():
		return map[string]any{"Fn::GetAtt": []any{"PostgresInstance", "MasterUserSecret.SecretArn"}}
	case d.cluster():
		return map[string]any{"Fn::GetAtt": []any{"DatabaseCluster", "MasterUserSecret.SecretArn"}}
	}
	return adminSecret
}

// connectResourceID is what rds-db:connect names in create mode: the
// proxy's id (the seventh field of its ARN), the instance's DbiResourceId
// or the cluster's DBClusterResourceId:
// https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/UsingWithRDS.IAMDBAuth.IAMPolicy.html
func (d deployed) connectResourceID() any {
	switch {
	case !d.create:
		return d.connectID
	case d.proxy():
		return map[string]any{"Fn::Select": []any{float64(6), map[string]any{"Fn::Split": []any{":", map[string]any{"Fn::GetAtt": []any{"DatabaseProxy", "DBProxyArn"}}}}}}
	case d.instance():
		return map[string]any{"Fn::GetAtt": []any{"PostgresInstance", "DbiResourceId"}}
	}
	return map[string]any{"Fn::GetAtt": []any{"DatabaseCluster", "DBClusterResourceId"}}
}

// connectsAs: an rds-db:connect resource for user on the scenario's
// database.
func (d deployed) connectsAs(r any, user string) bool {
	if !d.create {
		return r == "arn:aws:rds-db:us-east-1:123456789012:dbuser:"+d.connectID+"/"+user
	}
	sub, _ := r.(map[string]any)["Fn::Sub"].([]any)
	if len(sub) != 2 || sub[0] != "arn:aws:rds-db:us-east-1:123456789012:dbuser:${Id}/"+user {
		return false
	}
	return canon(sub[1].(map[string]any)["Id"]) == canon(d.connectResourceID())
}

// databaseResources are the RDS resources each way to deploy makes.
func (d deployed) databaseResources() []string {
	switch {
	case !d.create:
		return nil
	case d.instance():
		return []string{"DatabaseSubnetGroup", "PostgresInstance"}
	case d.proxy():
		return []string{"DatabaseCluster", "DatabaseInstance", "DatabaseProxy", "DatabaseProxyTargetGroup", "DatabaseSubnetGroup"}
	}
	return []string{"DatabaseCluster", "DatabaseInstance", "DatabaseSubnetGroup"}
}

// checkDatabase: in create mode, the profile's database: standard an RDS
// for PostgreSQL db.t4g.micro in one zone on gp3, economy and high-volume
// Aurora Serverless v2 (economy at 0 ACU, pausing; high-volume at
// DatabaseMinCapacity, pausing only at 0, behind RDS Proxy), each with IAM
// authentication, its master secret managed by RDS and a snapshot when it
// goes. Only the functions (or, with the proxy, only the proxy) and the
// migration function reach the database; only the functions reach the
// proxy, which logs in with the five role secrets and requires IAM. In
// existing mode nothing of it is created.
func (d deployed) checkDatabase(t *testing.T) {
	t.Helper()
	var rds []string
	for id, r := range d.res {
		if strings.HasPrefix(r.Type, "AWS::RDS::") {
			rds = append(rds, id)
		}
		if !d.create && r.Type == "AWS::EC2::VPC" {
			t.Errorf("existing mode creates %s (%s)", id, r.Type)
		}
	}
	sort.Strings(rds)
	if want := d.databaseResources(); !slices.Equal(rds, want) {
		t.Errorf("database resources %v, want %v", rds, want)
		return
	}
	if !d.create {
		return
	}
	doc := translated(t)["Resources"].(map[string]any)
	snapshotted := []string{"DatabaseCluster"}
	if d.instance() {
		snapshotted = []string{"PostgresInstance"}
	}
	for _, id := range snapshotted {
		if r := doc[id].(map[string]any); r["DeletionPolicy"] != "Snapshot" || r["UpdateReplacePolicy"] != "Snapshot" {
			t.Errorf("%s is not snapshotted when deleted or replaced: %v %v", id, r["DeletionPolicy"], r["UpdateReplacePolicy"])
		}
	}
	if d.instance() {
		p := d.res["PostgresInstance"].Properties
		for k, v := range map[string]any{"Engine": "postgres", "DBInstanceClass": "db.t4g.micro", "StorageType": "gp3", "AllocatedStorage": "20",
			"MultiAZ": false, "EnableIAMDatabaseAuthentication": true, "ManageMasterUserPassword": true, "StorageEncrypted": true, "PubliclyAccessible": false} {
			if canon(p[k]) != canon(v) {
				t.Errorf("the instance's %s = %v, want %v", k, p[k], v)
			}
		}
		if canon(p["VPCSecurityGroups"]) != canon([]any{map[string]any{"Ref": "DatabaseSecurityGroup"}}) {
			t.Errorf("the instance's groups %v", p["VPCSecurityGroups"])
		}
	} else {
		p := d.res["DatabaseCluster"].Properties
		if p["Engine"] != "aurora-postgresql" || p["ManageMasterUserPassword"] != true || p["StorageEncrypted"] != true || p["EnableIAMDatabaseAuthentication"] != true {
			t.Errorf("cluster %v", p)
		}
		scaling := p["ServerlessV2ScalingConfiguration"].(map[string]any)
		minimum := fmt.Sprint(d.st.Param("DatabaseMinCapacity"))
		if d.economy() {
			minimum = "0"
		}
		pause, pauses := scaling["SecondsUntilAutoPause"]
		if fmt.Sprint(scaling["MinCapacity"]) != minimum || pauses != (minimum == "0") || (pauses && fmt.Sprint(pause) != d.st.Param("DatabaseAutoPauseSeconds")) {
			t.Errorf("%s: scaling %s, want a minimum of %s ACU, pausing only at 0", d.profile, canon(scaling), minimum)
		}
		if i := d.res["DatabaseInstance"].Properties; i["DBInstanceClass"] != "db.serverless" || i["PubliclyAccessible"] != false {
			t.Errorf("the cluster's instance %v", i)
		}
	}
	ingress := func(sg string) []string {
		var from []string
		for _, r := range d.res[sg].Properties["SecurityGroupIngress"].([]any) {
			rm := r.(map[string]any)
			if _, cidr := rm["CidrIp"]; cidr {
				from = append(from, "cidr")
			}
			if canon(rm["FromPort"]) != "5432" || canon(rm["ToPort"]) != "5432" {
				t.Errorf("%s admits ports %v-%v", sg, rm["FromPort"], rm["ToPort"])
			}
			from = append(from, target(rm["SourceSecurityGroupId"]))
		}
		sort.Strings(from)
		return from
	}
	wantIngress := []string{"FunctionSecurityGroup", "MigratorSecurityGroup"}
	if d.proxy() {
		wantIngress = []string{"MigratorSecurityGroup", "ProxySecurityGroup"}
	}
	if got := ingress("DatabaseSecurityGroup"); !slices.Equal(got, wantIngress) {
		t.Errorf("the database admits %v, want %v", got, wantIngress)
	}
	if !d.proxy() {
		for _, id := range []string{"ProxySecurityGroup", "ProxyRole"} {
			if _, ok := d.res[id]; ok {
				t.Errorf("%s without a proxy", id)
			}
		}
		return
	}
	if got := ingress("ProxySecurityGroup"); !slices.Equal(got, []string{"FunctionSecurityGroup"}) {
		t.Errorf("the proxy admits %v", got)
	}
	proxy := d.res["DatabaseProxy"].Properties
	var registered []string
	for _, a := range proxy["Auth"].([]any) {
		am := a.(map[string]any)
		registered = append(registered, target(am["SecretArn"]))
		if am["IAMAuth"] != "REQUIRED" {
			t.Errorf("proxy auth %v, want IAMAuth REQUIRED (create mode signs IAM tokens)", am)
		}
	}
	sort.Strings(registered)
	if !slices.Equal(registered, []string{"ArchiverDatabaseSecret", "OperatorDatabaseSecret", "OperatorReadDatabaseSecret", "ProcessorDatabaseSecret", "ReceiverDatabaseSecret"}) {
		t.Errorf("the proxy logs in with %v", registered)
	}
	if proxy["RequireTLS"] != true {
		t.Error("the proxy accepts clients without TLS")
	}
	var proxyReads []string
	for _, st := range statements(d.res[target(proxy["RoleArn"])]) {
		for _, r := range resources(st) {
			proxyReads = append(proxyReads, target(r))
		}
	}
	sort.Strings(proxyReads)
	if !slices.Equal(proxyReads, registered) {
		t.Errorf("the proxy's role reads %v", proxyReads)
	}
}

// checkOperatorFunctions: the operator function's two deployments are
// reached only through their function URLs, with AWS_IAM auth and no
// CORS, and no resource policy lets anyone invoke them (SAM adds none for
// AWS_IAM; a public URL would need one); no Allow anywhere names the
// principal "*" (the buckets' Deny statements do, as they should). Each
// says its access and knows the archive, and runs in the VPC exactly as
// the receiver does.
func (d deployed) checkOperatorFunctions(t *testing.T) {
	t.Helper()
	urls := map[string]bool{}
	for id, r := range d.res {
		switch r.Type {
		case "AWS::Lambda::Url":
			fn := target(r.Properties["TargetFunctionArn"])
			if _, ok := operatorFunctions[fn]; !ok || id != fn+"Url" {
				t.Errorf("function URL %s for %v", id, r.Properties["TargetFunctionArn"])
				continue
			}
			urls[fn] = true
			if canon(r.Properties) != canon(map[string]any{"AuthType": "AWS_IAM", "TargetFunctionArn": map[string]any{"Ref": fn}}) {
				t.Errorf("%s: %s, want AWS_IAM on the function itself, no CORS", id, canon(r.Properties))
			}
		case "AWS::Lambda::Permission":
			fn := target(r.Properties["FunctionName"])
			if _, ok := operatorFunctions[fn]; ok || r.Properties["FunctionUrlAuthType"] != nil || r.Properties["Principal"] == "*" {
				t.Errorf("%s lets %v invoke %s", id, r.Properties["Principal"], fn)
			}
		}
		walk(r.Properties, func(m map[string]any) {
			p := canon(m["Principal"])
			if m["Effect"] == "Allow" && (p == `"*"` || p == `{"AWS":"*"}`) {
				t.Errorf("%s allows the principal %s: %s", id, p, canon(m))
			}
		})
	}
	if len(urls) != len(operatorFunctions) {
		t.Errorf("function URLs for %v, want one for each of %v", keys(urls), keys(operatorFunctions))
	}
	receiverVpc := canon(d.res["ReceiverFunction"].Properties["VpcConfig"])
	for fn, access := range operatorFunctions {
		p := d.res[fn].Properties
		env := envOf(d.res[fn])
		if env["OPERATOR_ACCESS"] != access || canon(env["ARCHIVE_BUCKET"]) != canon(map[string]any{"Ref": "ArchiveBucket"}) || env["ARCHIVE_PREFIX"] != "archive" {
			t.Errorf("%s: environment %v, want OPERATOR_ACCESS=%s and the archive", fn, env, access)
		}
		if got := canon(p["VpcConfig"]); got != receiverVpc {
			t.Errorf("%s: VpcConfig %s, want the receiver's %s", fn, got, receiverVpc)
		}
		if _, ok := d.res[fn+"Url"]; !ok {
			t.Errorf("%s has no function URL", fn)
		}
	}
}

// walk calls f on every object in v.
func walk(v any, f func(map[string]any)) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			walk(e, f)
		}
	case map[string]any:
		f(x)
		for _, e := range x {
			walk(e, f)
		}
	}
}

// operatorPolicies are the statements (Sid aside) of the two managed
// policies an admin attaches to operators: the function URL's action only
// with AWS_IAM auth, the invoke it also needs only through the URL (never
// a direct lambda:Invoke with a forged event), on the exact function ARNs,
// and the stack's outputs, where webhookctl --stack finds the URLs.
func operatorPolicies() map[string][]map[string]any {
	fns := func(ids ...string) []any {
		out := make([]any, len(ids))
		for i, id := range ids {
			out[i] = map[string]any{"Fn::GetAtt": []any{id, "Arn"}}
		}
		return out
	}
	policy := func(res []any) []map[string]any {
		var r any = res
		if len(res) == 1 {
			r = res[0]
		}
		return []map[string]any{
			{"Effect": "Allow", "Action": "lambda:InvokeFunctionUrl", "Resource": r,
				"Condition": map[string]any{"StringEquals": map[string]any{"lambda:FunctionUrlAuthType": "AWS_IAM"}}},
			{"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": r,
				"Condition": map[string]any{"Bool": map[string]any{"lambda:InvokedViaFunctionUrl": "true"}}},
			{"Effect": "Allow", "Action": "cloudformation:DescribeStacks", "Resource": map[string]any{"Ref": "AWS::StackId"}},
		}
	}
	return map[string][]map[string]any{
		"OperatorReadPolicy": policy(fns("OperatorReadFunction")),
		"OperatorActPolicy":  policy(fns("OperatorFunction", "OperatorReadFunction")),
	}
}

// checkOperatorPolicies: the two managed policies hold exactly the
// statements of operatorPolicies, and are attached to nobody by the stack
// (an account's admin attaches them).
func (d deployed) checkOperatorPolicies(t *testing.T) {
	t.Helper()
	for id, want := range operatorPolicies() {
		r, ok := d.res[id]
		if !ok || r.Type != "AWS::IAM::ManagedPolicy" {
			t.Errorf("no managed policy %s", id)
			continue
		}
		for _, k := range []string{"Users", "Groups", "Roles", "ManagedPolicyName"} {
			if v, set := r.Properties[k]; set {
				t.Errorf("%s sets %s: %v", id, k, v)
			}
		}
		var got, wantJSON []string
		for _, st := range policyStatements(r.Properties["PolicyDocument"]) {
			got = append(got, withoutSid(st))
		}
		for _, st := range want {
			wantJSON = append(wantJSON, canon(st))
		}
		sort.Strings(got)
		sort.Strings(wantJSON)
		if !slices.Equal(got, wantJSON) {
			t.Errorf("%s's statements\n%s\nwant\n%s", id, strings.Join(got, "\n"), strings.Join(wantJSON, "\n"))
		}
	}
}

// withoutSid is a statement's canonical JSON without its Sid, its resource
// list sorted.
func withoutSid(st map[string]any) string {
	m := maps.Clone(st)
	delete(m, "Sid")
	if res, ok := m["Resource"].([]any); ok {
		sorted := slices.Clone(res)
		slices.SortFunc(sorted, func(a, b any) int { return strings.Compare(canon(a), canon(b)) })
		m["Resource"] = sorted
	}
	return canon(m)
}

// dashboard: the scenario makes the dashboard (MonitoringDashboard=create,
// or auto in the high-volume profile).
func (d deployed) dashboard() bool {
	m := d.st.Param("MonitoringDashboard")
	return m == "create" || (m == "auto" && d.highVolume())
}

// checkOutputs: exactly the outputs this scenario's resources give: the
// operators' URLs and policies (webhookctl --stack reads the URLs; an admin
// attaches the policies), the control bucket, the database's endpoint and
// admin secret and the private subnets in create mode, the proxy's
// endpoint with the proxy, the migration function's group in a VPC, the
// role secrets whenever the stack makes them, the dashboard when there is
// one.
func (d deployed) checkOutputs(t *testing.T) {
	t.Helper()
	outs, err := d.st.Outputs()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"OperatorReadUrl":       map[string]any{"Fn::GetAtt": []any{"OperatorReadFunctionUrl", "FunctionUrl"}},
		"OperatorUrl":           map[string]any{"Fn::GetAtt": []any{"OperatorFunctionUrl", "FunctionUrl"}},
		"OperatorReadPolicyArn": map[string]any{"Ref": "OperatorReadPolicy"},
		"OperatorActPolicyArn":  map[string]any{"Ref": "OperatorActPolicy"},
		"WebhookUrl":            nil,
		"ArchiveBucketName":     map[string]any{"Ref": "ArchiveBucket"},
		"ControlBucketName":     map[string]any{"Ref": "ControlBucket"},
		"MigrationFunctionName": map[string]any{"Ref": "MigrationFunction"},
		"ApiEndpoint":           map[string]any{"Fn::GetAtt": []any{"WebhookApi", "ApiEndpoint"}},
		"AlarmTopicArn":         map[string]any{"Ref": "AlarmTopic"},
	}
	if d.roleSecrets {
		for _, secret := range roleSecrets {
			want[secret+"Arn"] = map[string]any{"Ref": secret}
		}
	}
	if d.vpc {
		want["AdminSecurityGroupId"] = map[string]any{"Ref": "MigratorSecurityGroup"}
	}
	if d.create {
		db := "DatabaseCluster"
		if d.instance() {
			db = "PostgresInstance"
		}
		want["DatabaseEndpoint"] = map[string]any{"Fn::GetAtt": []any{db, "Endpoint.Address"}}
		want["DatabaseAdminSecretArn"] = d.adminSecret()
		want["PrivateSubnetIds"] = map[string]any{"Fn::Join": []any{",", []any{map[string]any{"Ref": "PrivateSubnetA"}, map[string]any{"Ref": "PrivateSubnetB"}}}}
	}
	if d.proxy() {
		want["DatabaseProxyEndpoint"] = map[string]any{"Fn::GetAtt": []any{"DatabaseProxy", "Endpoint"}}
	}
	if d.dashboard() {
		want["DashboardName"] = map[string]any{"Ref": "Dashboard"}
	}
	if !slices.Equal(keys(outs), keys(want)) {
		t.Errorf("outputs %v,\nwant    %v", keys(outs), keys(want))
	}
	for id, v := range want {
		got, ok := outs[id]
		if ok && v != nil && canon(got) != canon(v) {
			t.Errorf("output %s = %v, want %s", id, canon(got), canon(v))
		}
	}
	doc := translated(t)["Outputs"].(map[string]any)
	for id := range outs {
		if desc, _ := doc[id].(map[string]any)["Description"].(string); desc == "" {
			t.Errorf("output %s has no description", id)
		}
	}
}

// TestRulesRefuseInconsistentParameters: CloudFormation's Rules refuse
// every combination that cannot work, naming what is missing.
func TestRulesRefuseInconsistentParameters(t *testing.T) {
	t.Parallel()
	doc := translated(t)
	type refusal struct {
		name   string
		params map[string]string
		want   string // in the failed assertion's description
	}
	cases := []refusal{
		{"existing without a host", with(existing, "DatabaseHost", ""), "needs DatabaseHost"},
		{"existing without an admin secret", with(existing, "DatabaseAdminSecretArn", ""), "needs DatabaseAdminSecretArn"},
		{"iam without a resource id", with(existing, "DatabaseAuth", "iam"), "DatabaseResourceId"},
		{"subnets without security groups", with(existing, "SubnetIds", userSubnets, "VpcId", userVpc, "RouteTableIds", userRtbs), "go together"},
		{"security groups without subnets", with(existing, "SecurityGroupIds", userGroups), "go together"},
		{"subnets without their VPC", with(existing, "SubnetIds", userSubnets, "SecurityGroupIds", userGroups, "RouteTableIds", userRtbs), "VpcId is needed"},
		{"endpoints without route tables", with(existing, "SubnetIds", userSubnets, "SecurityGroupIds", userGroups, "VpcId", userVpc), "needs RouteTableIds"},
		{"a VPC without subnets", with(existing, "VpcId", userVpc), "only apply with SubnetIds"},
		{"create with a host", with(nil, "DatabaseHost", "db.example.internal"), "leave DatabaseHost"},
		{"create with an admin secret", with(nil, "DatabaseAdminSecretArn", adminSecret), "leave DatabaseHost"},
		{"create with subnets", with(nil, "SubnetIds", userSubnets, "SecurityGroupIds", userGroups), "leave SubnetIds"},
		{"create with a resource id", with(nil, "DatabaseAuth", "iam", "DatabaseResourceId", userProxyID), "leave DatabaseHost"},
		{"max below min", with(nil, "Profile", highVolume, "DatabaseMinCapacity", "4", "DatabaseMaxCapacity", "2"), "at least DatabaseMinCapacity"},
		// economy always pauses (0 ACU), whatever DatabaseMinCapacity says.
		{"economy on 16.2", with(nil, "Profile", economy, "DatabaseEngineVersion", "16.2"), "needs Aurora PostgreSQL 15.7, 16.3 or newer"},
		{"economy on 15.6", with(nil, "Profile", economy, "DatabaseEngineVersion", "15.6", "DatabaseMinCapacity", "0.5"), "needs Aurora PostgreSQL 15.7, 16.3 or newer"},
		{"high-volume paused on 16.2", with(nil, "Profile", highVolume, "DatabaseMinCapacity", "0", "DatabaseEngineVersion", "16.2"), "needs Aurora PostgreSQL 15.7, 16.3 or newer"},
		{"high-volume paused on 15.6", with(nil, "Profile", highVolume, "DatabaseMinCapacity", "0", "DatabaseEngineVersion", "15.6", "DatabaseMaxCapacity", "1"), "needs Aurora PostgreSQL 15.7, 16.3 or newer"},
		{"create where the RDS CA bundle stops", with(nil, "AWS::Region", "il-central-1"), "Deploy with DatabaseSslMode=require"},
		{"verify-ca where the RDS CA bundle stops", with(nil, "AWS::Region", "ap-southeast-7", "DatabaseSslMode", "verify-ca"), "renew the bundle"},
		{"zones in existing mode", with(existing, "AvailabilityZones", "us-east-1a,us-east-1b"), "only applies to DatabaseMode=create"},
	}
	// Create mode signs IAM tokens in every profile: its VPC has no
	// Secrets Manager endpoint to read passwords through.
	for _, p := range profiles {
		cases = append(cases, refusal{p + ", create with passwords", with(nil, "Profile", p, "DatabaseAuth", "password"), "leave DatabaseAuth at auto or set iam"})
	}
	for _, c := range cases {
		st, err := samtemplate.NewStack(doc, c.params)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		failed, err := st.FailedRules()
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !strings.Contains(strings.Join(failed, "\n"), c.want) {
			t.Errorf("%s: failed rules %q, want one saying %q", c.name, failed, c.want)
		}
	}
}

// statements returns a role's inline policy statements.
func statements(role samtemplate.Resource) []map[string]any {
	var out []map[string]any
	pols, _ := role.Properties["Policies"].([]any)
	for _, p := range pols {
		out = append(out, policyStatements(p.(map[string]any)["PolicyDocument"])...)
	}
	return out
}

// policyStatements returns a policy document's statements.
func policyStatements(doc any) []map[string]any {
	var out []map[string]any
	m, _ := doc.(map[string]any)
	sts, _ := m["Statement"].([]any)
	for _, s := range sts {
		out = append(out, s.(map[string]any))
	}
	return out
}

func resources(st map[string]any) []any {
	if l, ok := st["Resource"].([]any); ok {
		return l
	}
	return []any{st["Resource"]}
}

// envOf returns a function's environment variables.
func envOf(fn samtemplate.Resource) map[string]any {
	env, _ := fn.Properties["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	return vars
}

// target is the logical id a Ref or Fn::GetAtt points at ("" for anything
// else).
func target(v any) string {
	m, _ := v.(map[string]any)
	if r, ok := m["Ref"].(string); ok {
		return r
	}
	if g, ok := m["Fn::GetAtt"].([]any); ok && len(g) > 0 {
		s, _ := g[0].(string)
		return s
	}
	return ""
}

// references lists the logical ids v refers to (Ref, Fn::GetAtt, Fn::Sub,
// leaving out a Fn::Sub's own variables).
func references(v any) []string {
	var out []string
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			out = append(out, references(e)...)
		}
	case map[string]any:
		if t := target(x); t != "" {
			return []string{t}
		}
		if sub, ok := x["Fn::Sub"].([]any); ok && len(sub) == 2 {
			s, _ := sub[0].(string)
			vars, _ := sub[1].(map[string]any)
			for _, m := range strings.Split(s, "${")[1:] {
				name, _, _ := strings.Cut(m, "}")
				name, _, _ = strings.Cut(name, ".")
				if _, own := vars[name]; !own && !strings.HasPrefix(name, "!") {
					out = append(out, name)
				}
			}
		}
		for _, e := range x {
			out = append(out, references(e)...)
		}
	}
	return out
}

func canon(v any) string { return mustJSON(v) }

func containsAll(list any, items []any) bool {
	l, _ := list.([]any)
	for _, it := range items {
		found := false
		for _, e := range l {
			found = found || canon(e) == canon(it)
		}
		if !found {
			return false
		}
	}
	return true
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestEachRouteHasItsOwnThrottle: the untokened and the tokened webhook
// routes are both in the API the stage deploys, each with the throttle its
// parameters give, so a flood at the guessable path leaves the tokened
// route's limit to its senders. (Number parameters resolve to their
// text, as CloudFormation passes them.)
func TestEachRouteHasItsOwnThrottle(t *testing.T) {
	t.Parallel()
	d := deploy(t, scenario{params: with(nil, "UntokenedRouteRateLimit", "10", "UntokenedRouteBurstLimit", "5", "TokenedRouteRateLimit", "700", "TokenedRouteBurstLimit", "300")})
	api, stage := d.res["WebhookApi"], d.res["WebhookApiApiGatewayDefaultStage"]
	paths := fmt.Sprint(api.Properties["Body"].(map[string]any)["paths"])
	for _, p := range []string{"/webhooks/{source}:", "/webhooks/{source}/{token}:"} {
		if !strings.Contains(paths, p) {
			t.Errorf("the API has no route %s: %s", p, paths)
		}
	}
	got := canon(stage.Properties["RouteSettings"])
	want := canon(map[string]any{
		"POST /webhooks/{source}":         map[string]any{"ThrottlingRateLimit": "10", "ThrottlingBurstLimit": "5"},
		"POST /webhooks/{source}/{token}": map[string]any{"ThrottlingRateLimit": "700", "ThrottlingBurstLimit": "300"},
		"GET /webhooks/{source}":          map[string]any{"ThrottlingRateLimit": "10", "ThrottlingBurstLimit": "5"},
		"GET /webhooks/{source}/{token}":  map[string]any{"ThrottlingRateLimit": "700", "ThrottlingBurstLimit": "300"},
	})
	if got != want {
		t.Errorf("stage route settings = %s, want %s", got, want)
	}
}
