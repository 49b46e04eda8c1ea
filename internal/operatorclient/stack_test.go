package operatorclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/webhook-inbox/webhook-inbox/internal/operatorclient"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/operatortest"
)

const (
	readURL = "https://abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws/"
	actURL  = "https://0123456789abcdefghijklmnopqrstuv.lambda-url.eu-west-1.on.aws/"
)

func cfnConfig(t *testing.T, cf http.Handler) aws.Config {
	t.Helper()
	srv := httptest.NewServer(cf)
	t.Cleanup(srv.Close)
	return aws.Config{
		Region:           "eu-west-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIATEST", "secret", ""),
		BaseEndpoint:     aws.String(srv.URL),
		RetryMaxAttempts: 1,
	}
}

// TestStackFindsTheOperatorURLs: the two function URLs come from the
// stack's outputs, through a signed DescribeStacks naming the stack.
func TestStackFindsTheOperatorURLs(t *testing.T) {
	t.Parallel()
	cf := &operatortest.CloudFormation{Stacks: map[string][]string{
		"inbox-prod": {"ApiUrl=https://x.execute-api.eu-west-1.amazonaws.com/", "OperatorReadUrl=" + readURL, "OperatorUrl=" + actURL},
	}}
	got, err := operatorclient.Stack(context.Background(), cfnConfig(t, cf), "inbox-prod")
	if err != nil {
		t.Fatal(err)
	}
	want := operatorclient.Target{ReadURL: readURL, ActURL: actURL, Region: "eu-west-1", StackName: "inbox-prod"}
	if got != want {
		t.Fatalf("target = %+v, want %+v", got, want)
	}
	if len(cf.Requests()) != 1 || !strings.Contains(cf.Requests()[0], "StackName=inbox-prod") ||
		!strings.Contains(cf.Requests()[0], "auth=AWS4-HMAC-SHA256 Credential=AKIATEST/") || !strings.Contains(cf.Requests()[0], "/eu-west-1/cloudformation/aws4_request") {
		t.Fatalf("requests: %q", cf.Requests())
	}
}

// TestStackSaysWhatIsWrong: a missing stack, a stack deployed before the
// operator function, an identity without the read policy, outputs that
// are not URLs and a missing region each fail with an error that says
// what to do.
func TestStackSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		cf     *operatortest.CloudFormation
		stack  string
		region string
		is     error
		says   string
	}{
		{name: "no such stack", cf: &operatortest.CloudFormation{}, stack: "inbox-nope", is: operatorclient.ErrStackNotFound, says: "no such stack inbox-nope in eu-west-1"},
		{name: "no outputs", cf: &operatortest.CloudFormation{Stacks: map[string][]string{"old": nil}}, stack: "old", is: operatorclient.ErrNoOperatorAPI,
			says: "has no output OperatorReadUrl nor OperatorUrl: the stack has no operator API: it was deployed before the operator function: update the stack"},
		{name: "one output", cf: &operatortest.CloudFormation{Stacks: map[string][]string{"half": {"OperatorReadUrl=" + readURL}}}, stack: "half", is: operatorclient.ErrNoOperatorAPI, says: "has no output OperatorUrl"},
		{name: "access denied", cf: &operatortest.CloudFormation{Denied: true}, stack: "inbox-prod", is: operatorclient.ErrAccessDenied,
			says: "your identity may not cloudformation:DescribeStacks this stack: attach the stack's OperatorReadPolicy"},
		{name: "an output that is not a URL", cf: &operatortest.CloudFormation{Stacks: map[string][]string{"odd": {"OperatorReadUrl=" + readURL, "OperatorUrl=not a url"}}}, stack: "odd", says: `output OperatorUrl "not a url" is not a URL`},
		{name: "no region", cf: &operatortest.CloudFormation{}, stack: "inbox-prod", region: "-", says: "no AWS region"},
		{name: "no name", cf: &operatortest.CloudFormation{}, stack: "", says: "no stack name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := cfnConfig(t, tc.cf)
			if tc.region == "-" {
				cfg.Region = ""
			}
			got, err := operatorclient.Stack(context.Background(), cfg, tc.stack)
			if err == nil {
				t.Fatalf("no error: %+v", got)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("%v is not %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%v does not say %q", err, tc.says)
			}
		})
	}
}

// TestStackPassesOnOtherFailures: a failure that is none of the known
// ones (here the service's own) keeps the service's code and message.
func TestStackPassesOnOtherFailures(t *testing.T) {
	t.Parallel()
	cfg := cfnConfig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		operatortest.QueryError(w, http.StatusBadRequest, "Throttling", "Rate exceeded")
	}))
	_, err := operatorclient.Stack(context.Background(), cfg, "inbox-prod")
	if err == nil || !strings.Contains(err.Error(), "Throttling") || !strings.Contains(err.Error(), "Rate exceeded") {
		t.Fatalf("err = %v", err)
	}
}
