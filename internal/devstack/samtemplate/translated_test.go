package samtemplate_test

import (
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

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
)

// These checks read the template SAM hands CloudFormation (SAM's own
// translator, as cfn-lint runs it: scripts/sam-translate.py), evaluated for
// each way to deploy, so they see every role, policy and resource that is
// really created, including what SAM generates.

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
	vpcPolicy     = "arn:aws:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"
	userSubnets   = "subnet-0a1b2c3d,subnet-0e5f6a7b"
	userGroups    = "sg-0db0000001"
	userVpc       = "vpc-0123abcd"
	userRtbs      = "rtb-0a0a0a0a,rtb-0b0b0b0b"
	userProxyID   = "prx-0123456789abcdef"
	userClusterID = "cluster-ABCDEFGHIJKLMNOPQRSTUVWXY"
)

// scenario is one way to deploy, with what it should give.
type scenario struct {
	name   string
	params map[string]string
	create bool // DatabaseMode=create
	iam    bool // DatabaseAuth=iam
	vpc    bool // the functions run in a VPC
	nat    bool // the subnets reach AWS by themselves (VpcEndpoints=none)
	// roleSecrets: the stack generates a secret per role (for the
	// functions, or for a proxy that logs in with them).
	roleSecrets bool
	connectID   string // the rds-db:connect resource id ("" in create mode: the stack's proxy)
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

var scenarios = []scenario{
	{name: "create, password", params: with(nil), create: true, vpc: true, roleSecrets: true},
	{name: "create, iam", params: with(nil, "DatabaseAuth", "iam"), create: true, iam: true, vpc: true, roleSecrets: true},
	{name: "create, paused when idle", params: with(nil, "DatabaseMinCapacity", "0", "DatabaseMaxCapacity", "2"), create: true, vpc: true, roleSecrets: true},
	{name: "existing, password, no VPC", params: with(existing), roleSecrets: true},
	{name: "existing, password, VPC with endpoints", params: with(existing, "SubnetIds", userSubnets, "SecurityGroupIds", userGroups, "VpcId", userVpc, "RouteTableIds", userRtbs), vpc: true, roleSecrets: true},
	{name: "existing, password, VPC with NAT", params: with(existing, "SubnetIds", userSubnets, "SecurityGroupIds", userGroups, "VpcId", userVpc, "VpcEndpoints", "none"), vpc: true, nat: true, roleSecrets: true},
	{name: "existing, iam direct, VPC with endpoints", params: with(existing, "DatabaseAuth", "iam", "DatabaseResourceId", userClusterID, "SubnetIds", userSubnets, "SecurityGroupIds", userGroups, "VpcId", userVpc, "RouteTableIds", userRtbs), iam: true, vpc: true, connectID: userClusterID},
	{name: "existing, iam through your proxy, VPC with NAT", params: with(existing, "DatabaseAuth", "iam", "DatabaseResourceId", userProxyID, "SubnetIds", userSubnets, "SecurityGroupIds", userGroups, "VpcId", userVpc, "VpcEndpoints", "none"), iam: true, vpc: true, nat: true, roleSecrets: true, connectID: userProxyID},
	{name: "existing, iam direct, no VPC", params: with(existing, "DatabaseAuth", "iam", "DatabaseResourceId", "db-ABCDEFGHIJKL"), iam: true, connectID: "db-ABCDEFGHIJKL"},
}

// deployed is a scenario's evaluated, translated stack.
type deployed struct {
	scenario
	st  *samtemplate.Stack
	res map[string]samtemplate.Resource
}

func deploy(t *testing.T, sc scenario) deployed {
	t.Helper()
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

// The six functions, with their own database role (none for the
// migration function, which connects as the admin).
var dbRoles = map[string]string{
	"ReceiverFunction":     "webhook_receiver",
	"ProcessorFunction":    "webhook_processor",
	"ArchiverFunction":     "webhook_archiver",
	"OperatorReadFunction": "webhook_operator_read",
	"OperatorFunction":     "webhook_operator",
	"MigrationFunction":    "",
}

var roleSecrets = map[string]string{
	"ReceiverFunction":     "ReceiverDatabaseSecret",
	"ProcessorFunction":    "ProcessorDatabaseSecret",
	"ArchiverFunction":     "ArchiverDatabaseSecret",
	"OperatorReadFunction": "OperatorReadDatabaseSecret",
	"OperatorFunction":     "OperatorDatabaseSecret",
}

// operatorFunctions are the operator function's two deployments, with
// their OPERATOR_ACCESS.
var operatorFunctions = map[string]string{"OperatorReadFunction": "read", "OperatorFunction": "act"}

func TestTranslatedTemplate(t *testing.T) {
	t.Parallel()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			d := deploy(t, sc)
			d.checkFunctions(t)
			d.checkRoles(t)
			d.checkNetwork(t)
			d.checkSchemaFirst(t)
			d.checkOwnDatabaseRole(t)
			d.checkDatabase(t)
			d.checkOperatorFunctions(t)
			d.checkOperatorPolicies(t)
			d.checkOutputs(t)
			d.checkEndpointPolicy(t)
			d.checkDatabaseLog(t)
			d.checkProxyTarget(t)
		})
	}
}

// checkFunctions: the six functions, each with one role of its own.
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
	// Every policy is a role's inline one (checkRoles) or one of the two
	// managed policies for operators (checkOperatorPolicies): another
	// would escape these checks.
	var managed []string
	for id, r := range d.res {
		switch r.Type {
		case "AWS::IAM::Policy", "AWS::IAM::RolePolicy", "AWS::IAM::UserPolicy", "AWS::IAM::GroupPolicy":
			t.Errorf("%s (%s): a policy outside the roles escapes these checks", id, r.Type)
		case "AWS::IAM::ManagedPolicy":
			managed = append(managed, id)
		}
	}
	sort.Strings(managed)
	if !slices.Equal(managed, []string{"OperatorActPolicy", "OperatorReadPolicy"}) {
		t.Errorf("managed policies %v, want only OperatorActPolicy and OperatorReadPolicy", managed)
	}
}

// s3Access is every S3 action each function may take: the archiver and
// the acting operator function write, delete and list the archive, and
// only the latter deletes versions (an expunge's) and lists them; the
// processor and the read-only operator function read archived bodies
// back, nothing else.
var s3Access = map[string][]string{
	"ArchiverFunction":     {"s3:DeleteObject", "s3:GetObject", "s3:ListBucket", "s3:PutObject"},
	"ProcessorFunction":    {"s3:GetObject"},
	"OperatorReadFunction": {"s3:GetObject"},
	"OperatorFunction":     {"s3:DeleteObject", "s3:DeleteObjectVersion", "s3:GetObject", "s3:ListBucket", "s3:ListBucketVersions", "s3:PutObject"},
}

// s3Denied is what a function is explicitly denied, whatever else it is
// allowed: the archive's safety net (versioning, lifecycle, the bucket
// policy) stays on, and the archiver may not delete a version.
var s3Denied = map[string][]string{
	"ArchiverFunction": {"s3:DeleteBucketPolicy", "s3:DeleteObjectVersion", "s3:PutBucketPolicy", "s3:PutBucketVersioning", "s3:PutLifecycleConfiguration"},
	"OperatorFunction": {"s3:DeleteBucketPolicy", "s3:PutBucketPolicy", "s3:PutBucketVersioning", "s3:PutLifecycleConfiguration"},
}

// s3Resource is the one resource each S3 action may be allowed on: an
// object action on the archive's objects, a list on the bucket.
func s3Resource(action string) string {
	if strings.HasPrefix(action, "s3:ListBucket") {
		return canon(map[string]any{"Fn::GetAtt": []any{"ArchiveBucket", "Arn"}})
	}
	return canon(sub("${ArchiveBucket.Arn}/archive/*"))
}

// sub is a Fn::Sub of s without variables, as NewStack gives it.
func sub(s string) any { return map[string]any{"Fn::Sub": []any{s, map[string]any{}}} }

// checkRoles: every function's role is the template's own AWS::IAM::Role
// (SAM adds no managed policy to it), with the VPC-access managed policy
// exactly when the function runs in a VPC, its logs in its own log group,
// the S3 actions of s3Access and no others, each on its s3Resource only,
// the denials of s3Denied, and no wildcard action or resource.
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
		_, inVpc := fn.Properties["VpcConfig"]
		if inVpc != d.vpc {
			t.Errorf("%s: in a VPC = %v, want %v", id, inVpc, d.vpc)
		}
		managed := samtemplate.Strings(role.Properties["ManagedPolicyArns"])
		switch {
		case inVpc && !slices.Equal(managed, []string{vpcPolicy}):
			t.Errorf("%s in a VPC: managed policies %v, want only %s", id, managed, vpcPolicy)
		case !inVpc && len(managed) > 0:
			t.Errorf("%s outside any VPC: managed policies %v, want none", id, managed)
		}
		logGroup := target(fn.Properties["LoggingConfig"].(map[string]any)["LogGroup"])
		logsOwn := false
		var s3Actions, s3Denials []string
		for _, st := range statements(role) {
			if st["Effect"] == "Deny" {
				for _, a := range samtemplate.Strings(st["Action"]) {
					s3Denials = append(s3Denials, a)
				}
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
					s3Actions = append(s3Actions, a)
					if r := resources(st); len(r) != 1 || canon(r[0]) != s3Resource(a) {
						t.Errorf("%s may %s on %s, want %s only", id, a, canon(r), s3Resource(a))
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
		sort.Strings(s3Actions)
		if !slices.Equal(s3Actions, s3Access[id]) {
			t.Errorf("%s's S3 actions = %v, want %v", id, s3Actions, s3Access[id])
		}
		sort.Strings(s3Denials)
		if !slices.Equal(s3Denials, s3Denied[id]) {
			t.Errorf("%s is denied %v, want %v", id, s3Denials, s3Denied[id])
		}
	}
}

// checkNetwork: every function in a VPC reaches S3 and Secrets Manager (an
// endpoint in its VPC that its subnets route to and its security groups may
// use, or NAT the parameters declare), and nothing else is created for it
// outside a VPC.
func (d deployed) checkNetwork(t *testing.T) {
	t.Helper()
	endpoints := map[string]samtemplate.Resource{}
	for id, r := range d.res {
		if r.Type == "AWS::EC2::VPCEndpoint" {
			endpoints[id] = r
		}
	}
	if !d.vpc || d.nat {
		if len(endpoints) > 0 {
			t.Errorf("endpoints created although the functions need none: %v", keys(endpoints))
		}
	}
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
		if d.nat {
			continue // declared by VpcEndpoints=none
		}
		vpc := d.vpcOf(subnets[0])
		s3, sm := false, false
		for _, ep := range endpoints {
			p := ep.Properties
			if canon(p["VpcId"]) != canon(vpc) {
				continue
			}
			switch p["ServiceName"] {
			case "com.amazonaws.us-east-1.s3":
				s3 = p["VpcEndpointType"] == "Gateway" && d.routesTo(subnets, p["RouteTableIds"])
			case "com.amazonaws.us-east-1.secretsmanager":
				sm = p["VpcEndpointType"] == "Interface" && p["PrivateDnsEnabled"] == true &&
					containsAll(p["SubnetIds"], subnets) && d.admits(p["SecurityGroupIds"], groups, 443)
			}
		}
		if !s3 {
			t.Errorf("%s (subnets %v) has no route to S3", id, subnets)
		}
		if !sm {
			t.Errorf("%s (subnets %v, groups %v) cannot reach Secrets Manager", id, subnets, groups)
		}
	}
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

// checkSchemaFirst: the migration custom resource has the contract's
// shape, and the five functions (which need the schema) depend on it, so
// CloudFormation creates or updates it first; it runs on each deploy of
// new code (Release is a version of the migration function), and in create
// mode it waits for the database instance.
func (d deployed) checkSchemaFirst(t *testing.T) {
	t.Helper()
	s, ok := d.res["DatabaseSchema"]
	if !ok || s.Type != "Custom::DatabaseSchema" {
		t.Fatalf("no Custom::DatabaseSchema: %+v", s)
	}
	p := s.Properties
	if canon(p["ServiceToken"]) != canon(map[string]any{"Fn::GetAtt": []any{"MigrationFunction", "Arn"}}) {
		t.Errorf("ServiceToken = %v", p["ServiceToken"])
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
	}
	version, ok := d.res[target(p["Release"])]
	if !ok || version.Type != "AWS::Lambda::Version" || target(version.Properties["FunctionName"]) != "MigrationFunction" {
		t.Errorf("Release %v is not a version of the migration function", p["Release"])
	}
	if timeout := canon(p["ServiceTimeout"]); timeout == "" || timeout > "3600" && len(timeout) >= 4 {
		t.Errorf("ServiceTimeout = %v", p["ServiceTimeout"])
	}
	for fn := range roleSecrets {
		if !slices.Contains(d.res[fn].DependsOn, "DatabaseSchema") {
			t.Errorf("%s does not depend on DatabaseSchema: new code could serve before its schema", fn)
		}
	}
	if d.create && !d.dependsOn("DatabaseSchema", "DatabaseInstance") {
		t.Error("DatabaseSchema does not wait for the database instance")
	}
	// The migration function answers CloudFormation through S3 (and reads
	// its secrets through Secrets Manager): the endpoints must exist
	// before it runs and outlive its last answer when the stack goes.
	for id, r := range d.res {
		if r.Type == "AWS::EC2::VPCEndpoint" && !d.dependsOn("DatabaseSchema", id) {
			t.Errorf("DatabaseSchema does not wait for %s", id)
		}
	}
	// CloudFormation invokes the unqualified function; a failed run is
	// reported, not retried behind CloudFormation's back.
	retries := false
	for _, r := range d.res {
		if r.Type == "AWS::Lambda::EventInvokeConfig" && target(r.Properties["FunctionName"]) == "MigrationFunction" && r.Properties["Qualifier"] == "$LATEST" {
			retries = canon(r.Properties["MaximumRetryAttempts"]) == "0"
		}
	}
	if !retries {
		t.Error("the migration function's $LATEST keeps Lambda's automatic retries")
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
// database role only: with passwords it reads its own role's secret and
// no other, with IAM it may rds-db:connect as its own database user only;
// its environment names the same.
func (d deployed) checkOwnDatabaseRole(t *testing.T) {
	t.Helper()
	allSecrets := map[string]bool{}
	for _, s := range roleSecrets {
		allSecrets[s] = true
	}
	for fn, dbRole := range dbRoles {
		env := d.res[fn].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		role := d.res[target(d.res[fn].Properties["Role"])]
		var reads []string
		var connects []any
		for _, st := range statements(role) {
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
		if fn == "MigrationFunction" {
			want := []string{canon(adminSecretOf(d))}
			if d.roleSecrets {
				for _, s := range roleSecrets {
					want = append(want, canon(map[string]any{"Ref": s}))
				}
			}
			sort.Strings(want)
			if !slices.Equal(reads, want) {
				t.Errorf("the migration function reads %v, want %v", reads, want)
			}
			if len(connects) > 0 || env["DATABASE_IAM_AUTH"] != "false" || canon(env["DATABASE_SECRET_ARN"]) != canon(adminSecretOf(d)) {
				t.Errorf("the migration function connects as %v / %v / IAM %v", env["DATABASE_SECRET_ARN"], connects, env["DATABASE_IAM_AUTH"])
			}
			continue
		}
		own := map[string]any{"Ref": roleSecrets[fn]}
		var want []string
		if fn == "ReceiverFunction" {
			want = append(want, canon(sourcesSecret))
		}
		if !d.iam {
			want = append(want, canon(own))
			if canon(env["DATABASE_SECRET_ARN"]) != canon(own) || env["DATABASE_USER"] != "" || env["DATABASE_IAM_AUTH"] != "false" {
				t.Errorf("%s: environment %v, want its own secret %v", fn, env, own)
			}
			if len(connects) > 0 {
				t.Errorf("%s may rds-db:connect %v with password auth", fn, connects)
			}
		} else {
			if env["DATABASE_SECRET_ARN"] != "" || env["DATABASE_USER"] != dbRole || env["DATABASE_IAM_AUTH"] != "true" {
				t.Errorf("%s: environment %v, want IAM as %s", fn, env, dbRole)
			}
			if len(connects) != 1 || !d.connectsAs(connects[0], dbRole) {
				t.Errorf("%s may rds-db:connect %v, want only as %s", fn, connects, dbRole)
			}
		}
		sort.Strings(want)
		if !slices.Equal(reads, want) {
			t.Errorf("%s reads secrets %v, want %v", fn, reads, want)
		}
	}
}

func adminSecretOf(d deployed) any {
	if d.create {
		return map[string]any{"Fn::GetAtt": []any{"DatabaseCluster", "MasterUserSecret.SecretArn"}}
	}
	return adminSecret
}

// connectsAs: an rds-db:connect resource for user on the right database:
// your resource id, or in create mode the stack's proxy (its id is the
// seventh field of its ARN).
func (d deployed) connectsAs(r any, user string) bool {
	if d.connectID != "" {
		return r == "arn:aws:rds-db:us-east-1:123456789012:dbuser:"+d.connectID+"/"+user
	}
	sub, _ := r.(map[string]any)["Fn::Sub"].([]any)
	if len(sub) != 2 || sub[0] != "arn:aws:rds-db:us-east-1:123456789012:dbuser:${Id}/"+user {
		return false
	}
	id := sub[1].(map[string]any)["Id"]
	return canon(id) == canon(map[string]any{"Fn::Select": []any{float64(6), map[string]any{"Fn::Split": []any{":", map[string]any{"Fn::GetAtt": []any{"DatabaseProxy", "DBProxyArn"}}}}}})
}

// checkDatabase: in create mode, only the proxy and the migration function
// reach the database, only the functions reach the proxy, which logs in with
// the five role secrets (and requires IAM with DatabaseAuth=iam), and
// deleting the stack keeps a snapshot. In existing mode nothing of it is
// created.
func (d deployed) checkDatabase(t *testing.T) {
	t.Helper()
	cluster, ok := d.res["DatabaseCluster"]
	if !d.create {
		for id, r := range d.res {
			if strings.HasPrefix(r.Type, "AWS::RDS::") || r.Type == "AWS::EC2::VPC" {
				t.Errorf("existing mode creates %s (%s)", id, r.Type)
			}
		}
		return
	}
	if !ok {
		t.Fatal("create mode has no cluster")
	}
	if doc := translated(t)["Resources"].(map[string]any)["DatabaseCluster"].(map[string]any); doc["DeletionPolicy"] != "Snapshot" || doc["UpdateReplacePolicy"] != "Snapshot" {
		t.Errorf("the cluster is not snapshotted when deleted or replaced: %v %v", doc["DeletionPolicy"], doc["UpdateReplacePolicy"])
	}
	p := cluster.Properties
	if p["Engine"] != "aurora-postgresql" || p["ManageMasterUserPassword"] != true || p["StorageEncrypted"] != true {
		t.Errorf("cluster %v", p)
	}
	scaling := p["ServerlessV2ScalingConfiguration"].(map[string]any)
	_, pauses := scaling["SecondsUntilAutoPause"]
	if pauses != (d.st.Param("DatabaseMinCapacity") == "0") {
		t.Errorf("scaling %v with minimum %v", scaling, d.st.Param("DatabaseMinCapacity"))
	}
	ingress := func(sg string) []string {
		var from []string
		for _, r := range d.res[sg].Properties["SecurityGroupIngress"].([]any) {
			rm := r.(map[string]any)
			if _, cidr := rm["CidrIp"]; cidr {
				from = append(from, "cidr")
			}
			from = append(from, target(rm["SourceSecurityGroupId"]))
		}
		sort.Strings(from)
		return from
	}
	if got := ingress("DatabaseSecurityGroup"); !slices.Equal(got, []string{"MigratorSecurityGroup", "ProxySecurityGroup"}) {
		t.Errorf("the database admits %v", got)
	}
	if got := ingress("ProxySecurityGroup"); !slices.Equal(got, []string{"FunctionSecurityGroup"}) {
		t.Errorf("the proxy admits %v", got)
	}
	proxy := d.res["DatabaseProxy"].Properties
	var registered []string
	for _, a := range proxy["Auth"].([]any) {
		am := a.(map[string]any)
		registered = append(registered, target(am["SecretArn"]))
		want := "DISABLED"
		if d.iam {
			want = "REQUIRED"
		}
		if am["IAMAuth"] != want {
			t.Errorf("proxy auth %v, want IAMAuth %s", am, want)
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
// principal "*" (the bucket policy's Deny of plain HTTP does, as it
// should). Each says its access and knows the archive, and runs in the
// VPC exactly as the receiver does.
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
		env := p["Environment"].(map[string]any)["Variables"].(map[string]any)
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
		if len(out) == 1 {
			return []any{out[0]}
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
		doc, _ := r.Properties["PolicyDocument"].(map[string]any)
		sts, _ := doc["Statement"].([]any)
		var got, wantJSON []string
		for _, st := range sts {
			m := maps.Clone(st.(map[string]any))
			delete(m, "Sid")
			if res, ok := m["Resource"].([]any); ok {
				sorted := slices.Clone(res)
				slices.SortFunc(sorted, func(a, b any) int { return strings.Compare(canon(a), canon(b)) })
				m["Resource"] = sorted
			}
			got = append(got, canon(m))
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

// checkOutputs: the operators' URLs and policies are outputs (webhookctl
// --stack reads the URLs; an admin attaches the policies), and so are the
// operator roles' secrets whenever the stack makes them, as the others'.
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
		"ApiEndpoint":           map[string]any{"Fn::GetAtt": []any{"WebhookApi", "ApiEndpoint"}},
		"AlarmTopicArn":         map[string]any{"Ref": "AlarmTopic"},
	}
	for fn, secret := range roleSecrets {
		if d.roleSecrets {
			want[secret+"Arn"] = map[string]any{"Ref": secret}
		} else if _, ok := outs[secret+"Arn"]; ok {
			t.Errorf("output %sArn without the secret (%s)", secret, fn)
		}
	}
	for id, v := range want {
		got, ok := outs[id]
		if !ok || (v != nil && canon(got) != canon(v)) {
			t.Errorf("output %s = %v (present %v), want %s", id, canon(got), ok, canon(v))
		}
	}
	doc := translated(t)["Outputs"].(map[string]any)
	for _, id := range []string{"OperatorReadUrl", "OperatorUrl", "OperatorReadPolicyArn", "OperatorActPolicyArn", "OperatorReadDatabaseSecretArn", "OperatorDatabaseSecretArn"} {
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
	cases := []struct {
		name   string
		params map[string]string
		want   string // in the failed assertion's description
	}{
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
		{"max below min", with(nil, "DatabaseMinCapacity", "4", "DatabaseMaxCapacity", "2"), "at least DatabaseMinCapacity"},
		{"real time on a slower schedule", with(nil, "ProcessorSchedule", "rate(5 minutes)"), "set ProcessorRealTime=disabled"},
		{"auto-pause on 16.2", with(nil, "DatabaseMinCapacity", "0", "DatabaseEngineVersion", "16.2"), "needs Aurora PostgreSQL 15.7, 16.3 or newer"},
		{"auto-pause on 15.6", with(nil, "DatabaseMinCapacity", "0", "DatabaseEngineVersion", "15.6", "DatabaseMaxCapacity", "1"), "needs Aurora PostgreSQL 15.7, 16.3 or newer"},
		{"create where the RDS CA bundle stops", with(nil, "AWS::Region", "il-central-1"), "Deploy with DatabaseSslMode=require"},
		{"verify-ca where the RDS CA bundle stops", with(nil, "AWS::Region", "ap-southeast-7", "DatabaseSslMode", "verify-ca"), "renew the bundle"},
		{"zones in existing mode", with(existing, "AvailabilityZones", "us-east-1a,us-east-1b"), "only applies to DatabaseMode=create"},
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
		doc, _ := p.(map[string]any)["PolicyDocument"].(map[string]any)
		sts, _ := doc["Statement"].([]any)
		for _, s := range sts {
			out = append(out, s.(map[string]any))
		}
	}
	return out
}

func resources(st map[string]any) []any {
	if l, ok := st["Resource"].([]any); ok {
		return l
	}
	return []any{st["Resource"]}
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

// references lists the logical ids v refers to (Ref, Fn::GetAtt, Fn::Sub).
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
			for _, m := range strings.Split(s, "${")[1:] {
				name, _, _ := strings.Cut(m, "}")
				name, _, _ = strings.Cut(name, ".")
				out = append(out, name)
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
	})
	if got != want {
		t.Errorf("stage route settings = %s, want %s", got, want)
	}
}
