package operatorclient

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/smithy-go"
)

// The stack's outputs naming the operator function's two URLs.
const (
	OutputReadURL = "OperatorReadUrl"
	OutputActURL  = "OperatorUrl"
)

// Target is where a stack's operator API is: the read-only deployment's
// function URL, the acting one's, and the stack's region.
type Target struct {
	ReadURL   string
	ActURL    string
	Region    string
	StackName string
}

// Why Stack can fail, for callers that answer each differently; each
// error Stack returns wraps one of them or comes from the AWS call.
var (
	ErrStackNotFound = errors.New("no such stack")
	ErrNoOperatorAPI = errors.New("the stack has no operator API")
	ErrAccessDenied  = errors.New("access denied")
)

// Stack reads the operator API's function URLs from the outputs of the
// CloudFormation stack named name (or its id), in cfg's region, with
// cfg's credentials (DescribeStacks).
func Stack(ctx context.Context, cfg aws.Config, name string) (Target, error) {
	if name == "" {
		return Target{}, errors.New("operatorclient: no stack name")
	}
	if cfg.Region == "" {
		return Target{}, fmt.Errorf("operatorclient: stack %s: no AWS region: set AWS_REGION or the profile's region", name)
	}
	out, err := cloudformation.NewFromConfig(cfg).DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) {
			switch code := apiErr.ErrorCode(); {
			// CloudFormation says a missing stack is a validation error.
			case code == "ValidationError" && strings.Contains(apiErr.ErrorMessage(), "does not exist"):
				return Target{}, fmt.Errorf("operatorclient: %w %s in %s (%s)", ErrStackNotFound, name, cfg.Region, apiErr.ErrorMessage())
			case code == "AccessDenied" || code == "AccessDeniedException":
				return Target{}, fmt.Errorf("operatorclient: stack %s: %w: your identity may not cloudformation:DescribeStacks this stack: attach the stack's OperatorReadPolicy (%s)",
					name, ErrAccessDenied, apiErr.ErrorMessage())
			}
		}
		return Target{}, fmt.Errorf("operatorclient: describe stack %s in %s: %w", name, cfg.Region, err)
	}
	if len(out.Stacks) != 1 {
		return Target{}, fmt.Errorf("operatorclient: describe stack %s: %d stacks in the answer, want 1", name, len(out.Stacks))
	}
	st := out.Stacks[0]
	outputs := map[string]string{}
	for _, o := range st.Outputs {
		outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	t := Target{Region: cfg.Region, StackName: aws.ToString(st.StackName), ReadURL: outputs[OutputReadURL], ActURL: outputs[OutputActURL]}
	if t.StackName == "" {
		t.StackName = name
	}
	var missing []string
	for _, k := range []string{OutputReadURL, OutputActURL} {
		if outputs[k] == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return Target{}, fmt.Errorf("operatorclient: stack %s (%s) has no output %s: %w: it was deployed before the operator function: update the stack",
			t.StackName, st.StackStatus, strings.Join(missing, " nor "), ErrNoOperatorAPI)
	}
	for k, v := range map[string]string{OutputReadURL: t.ReadURL, OutputActURL: t.ActURL} {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return Target{}, fmt.Errorf("operatorclient: stack %s: output %s %q is not a URL", t.StackName, k, v)
		}
	}
	return t, nil
}
