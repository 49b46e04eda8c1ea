package samtemplate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
)

// A function's environment holds values only a deployed stack knows: a
// Ref or an attribute of another resource. standIns gives each the value
// AWS would, in the shape AWS gives it (a function's name for its Ref, its
// ARN for its Arn, a bucket's name, a secret's ARN, an endpoint's host
// name...), so that a function's own configuration code can read the
// environment it gets once deployed, and refuse what it would refuse in
// AWS (a name where it requires an ARN, say).
type standIns struct {
	res map[string]samtemplate.Resource
}

const standInAccount = "123456789012"

func (s standIns) functionName(id string) string { return "webhook-inbox-" + id + "-Xy12Ab34Cd56" }
func (s standIns) functionArn(id string) string {
	return "arn:aws:lambda:us-east-1:" + standInAccount + ":function:" + s.functionName(id)
}
func (s standIns) bucketName(id string) string {
	return "webhook-inbox-" + strings.ToLower(id) + "-1a2b3c4d5e6f"
}
func (s standIns) secretArn(id string) string {
	return "arn:aws:secretsmanager:us-east-1:" + standInAccount + ":secret:" + id + "-AbCdEf"
}

// masterSecretArn is the ARN of the master secret RDS manages for id
// (its name starts with rds!).
func (s standIns) masterSecretArn(id string) string {
	return "arn:aws:secretsmanager:us-east-1:" + standInAccount + ":secret:rds!" + strings.ToLower(id) + "-0123-AbCdEf"
}
func (s standIns) host(id string) string {
	return strings.ToLower(id) + ".c0abcdefghij.us-east-1.rds.amazonaws.com"
}

// ref is what Ref id gives once deployed.
func (s standIns) ref(id string) (string, error) {
	if fn, ok := strings.CutSuffix(id, ".Version"); ok { // SAM's Ref to AutoPublishAlias' version
		return s.functionArn(fn) + ":1", nil
	}
	r, ok := s.res[id]
	if !ok {
		return "", fmt.Errorf("Ref %s: no such resource", id)
	}
	switch r.Type {
	case "AWS::Serverless::Function", "AWS::Lambda::Function":
		return s.functionName(id), nil
	case "AWS::Lambda::Version":
		return s.functionArn(target(r.Properties["FunctionName"])) + ":1", nil
	case "AWS::S3::Bucket":
		return s.bucketName(id), nil
	case "AWS::SecretsManager::Secret":
		return s.secretArn(id), nil
	case "AWS::Scheduler::ScheduleGroup":
		// Ref gives its Name:
		// https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-scheduler-schedulegroup.html
		return s.resolve(r.Properties["Name"])
	case "AWS::EC2::VPCEndpoint":
		return "vpce-0a1b2c3d4e5f60718", nil
	case "AWS::RDS::DBProxyTargetGroup":
		return "arn:aws:rds:us-east-1:" + standInAccount + ":target-group:prx-tg-0123456789abcdef0", nil
	}
	return "", fmt.Errorf("Ref %s: no stand-in for a %s", id, r.Type)
}

// getAtt is what Fn::GetAtt id.attr gives once deployed.
func (s standIns) getAtt(id, attr string) (string, error) {
	r, ok := s.res[id]
	if !ok {
		return "", fmt.Errorf("Fn::GetAtt %s.%s: no such resource", id, attr)
	}
	switch {
	case attr == "Arn" && (r.Type == "AWS::Serverless::Function" || r.Type == "AWS::Lambda::Function"):
		return s.functionArn(id), nil
	case attr == "Arn" && r.Type == "AWS::IAM::Role":
		return "arn:aws:iam::" + standInAccount + ":role/webhook-inbox-" + id + "-XY12AB34CD56", nil
	case attr == "Arn" && r.Type == "AWS::S3::Bucket":
		return "arn:aws:s3:::" + s.bucketName(id), nil
	case attr == "Endpoint.Address":
		return s.host(id), nil
	case attr == "Endpoint.Port":
		return "5432", nil
	case attr == "Endpoint" && r.Type == "AWS::RDS::DBProxy":
		return strings.ToLower(id) + ".proxy-c0abcdefghij.us-east-1.rds.amazonaws.com", nil
	case attr == "MasterUserSecret.SecretArn":
		return s.masterSecretArn(id), nil
	}
	return "", fmt.Errorf("Fn::GetAtt %s.%s: no stand-in for a %s", id, attr, r.Type)
}

var subVariable = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

// resolve gives a value of the evaluated template as it is once deployed.
func (s standIns) resolve(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool, float64:
		return fmt.Sprint(x), nil
	case map[string]any:
		if id, ok := x["Ref"].(string); ok {
			return s.ref(id)
		}
		if g, ok := x["Fn::GetAtt"].([]any); ok && len(g) == 2 {
			return s.getAtt(fmt.Sprint(g[0]), fmt.Sprint(g[1]))
		}
		if sub, ok := x["Fn::Sub"].([]any); ok && len(sub) == 2 {
			str, _ := sub[0].(string)
			vars, _ := sub[1].(map[string]any)
			var errs []error
			out := subVariable.ReplaceAllStringFunc(str, func(m string) string {
				name := m[2 : len(m)-1]
				var v string
				var err error
				if own, ok := vars[name]; ok {
					v, err = s.resolve(own)
				} else if id, attr, dotted := strings.Cut(name, "."); dotted {
					v, err = s.getAtt(id, attr)
				} else {
					v, err = s.ref(name)
				}
				errs = append(errs, err)
				return v
			})
			return out, errors.Join(errs...)
		}
	}
	return "", fmt.Errorf("no stand-in for %s", canon(v))
}

// deployedEnv returns function id's environment as it is once deployed
// (the template's values, stand-ins for what only the deployed stack
// knows), with AWS_REGION and AWS_LAMBDA_LOG_LEVEL, which Lambda sets, and
// over, the local stand-ins of what the function reaches in AWS.
func deployedEnv(t *testing.T, tpl *samtemplate.Template, id string, over map[string]string) func(string) string {
	t.Helper()
	res, err := tpl.Stack.Resources()
	if err != nil {
		t.Fatal(err)
	}
	s := standIns{res: res}
	env := map[string]string{"AWS_REGION": "us-east-1", "AWS_LAMBDA_LOG_LEVEL": "INFO"}
	for k, v := range envOf(res[id]) {
		if env[k], err = s.resolve(v); err != nil {
			t.Errorf("%s's %s: %v", id, k, err)
		}
	}
	for k, v := range over {
		env[k] = v
	}
	return func(k string) string { return env[k] }
}

// secretsOf stands in for Secrets Manager with the stack's secrets as they
// are once deployed: each role's secret holds its username (the template's
// SecretStringTemplate) and a password, and an admin secret (RDS's master
// secret, or DatabaseAdminSecretArn's) the admin's.
type secretsOf struct {
	values map[string]string
}

func newSecretsOf(t *testing.T, tpl *samtemplate.Template) secretsOf {
	t.Helper()
	res, err := tpl.Stack.Resources()
	if err != nil {
		t.Fatal(err)
	}
	s := standIns{res: res}
	admin := `{"username": "webhook_admin", "password": "stand-in-admin-password"}`
	out := secretsOf{values: map[string]string{adminSecret: admin}}
	for id, r := range res {
		switch r.Type {
		case "AWS::SecretsManager::Secret":
			gen, _ := r.Properties["GenerateSecretString"].(map[string]any)
			var doc map[string]string
			if err := json.Unmarshal([]byte(fmt.Sprint(gen["SecretStringTemplate"])), &doc); err != nil {
				t.Fatalf("%s's SecretStringTemplate: %v", id, err)
			}
			out.values[s.secretArn(id)] = fmt.Sprintf(`{"username": %q, "password": "stand-in-password"}`, doc["username"])
		case "AWS::RDS::DBInstance", "AWS::RDS::DBCluster":
			out.values[s.masterSecretArn(id)] = admin
		}
	}
	return out
}

func (s secretsOf) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	v, ok := s.values[aws.ToString(in.SecretId)]
	if !ok {
		return nil, fmt.Errorf("ResourceNotFoundException: no secret %s", aws.ToString(in.SecretId))
	}
	return &secretsmanager.GetSecretValueOutput{ARN: in.SecretId, SecretString: aws.String(v)}, nil
}
