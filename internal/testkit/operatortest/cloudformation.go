package operatortest

import (
	"fmt"
	"html"
	"net/http"
	"strings"
	"sync"
)

// CloudFormation is a stand-in for CloudFormation's DescribeStacks in the
// query protocol (form-encoded POST, XML answers in the shapes the
// service sends: DescribeStacksResponse, or ErrorResponse with the
// status), for `webhookctl --stack` in tests: there is no AWS here. It
// holds stacks by name, each a list of outputs ("OperatorUrl=https://...");
// a name mapped to nil is a stack with no outputs. Denied answers every
// request as IAM refuses an identity without cloudformation:DescribeStacks.
type CloudFormation struct {
	Stacks map[string][]string
	Denied bool

	mu       sync.Mutex
	requests []string
}

// Requests are the requests served: each form, and its Authorization.
func (c *CloudFormation) Requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.requests...)
}

func (c *CloudFormation) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		QueryError(w, http.StatusBadRequest, "MalformedQueryString", "bad request")
		return
	}
	c.mu.Lock()
	c.requests = append(c.requests, r.PostForm.Encode()+" auth="+r.Header.Get("Authorization"))
	c.mu.Unlock()
	if r.PostForm.Get("Action") != "DescribeStacks" || r.PostForm.Get("Version") != "2010-05-15" {
		QueryError(w, http.StatusBadRequest, "InvalidAction", "Could not find operation "+r.PostForm.Get("Action"))
		return
	}
	name := r.PostForm.Get("StackName")
	if c.Denied {
		QueryError(w, http.StatusForbidden, "AccessDenied", "User: arn:aws:sts::123456789012:assumed-role/Dev/alice is not authorized to perform: cloudformation:DescribeStacks on resource: arn:aws:cloudformation:eu-west-1:123456789012:stack/"+name+"/* because no identity-based policy allows the cloudformation:DescribeStacks action")
		return
	}
	outputs, ok := c.Stacks[name]
	if !ok {
		QueryError(w, http.StatusBadRequest, "ValidationError", "Stack with id "+name+" does not exist")
		return
	}
	var b strings.Builder
	for _, kv := range outputs {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "<member><OutputKey>%s</OutputKey><OutputValue>%s</OutputValue><Description>the operator API</Description></member>", html.EscapeString(k), html.EscapeString(v))
	}
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, `<DescribeStacksResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/">
  <DescribeStacksResult>
    <Stacks>
      <member>
        <StackName>%s</StackName>
        <StackId>arn:aws:cloudformation:eu-west-1:123456789012:stack/%s/aaf549a0-a413-11df-adb3-5081b3858e83</StackId>
        <CreationTime>2026-03-14T12:00:00Z</CreationTime>
        <StackStatus>UPDATE_COMPLETE</StackStatus>
        <DisableRollback>false</DisableRollback>
        <Outputs>%s</Outputs>
      </member>
    </Stacks>
  </DescribeStacksResult>
  <ResponseMetadata><RequestId>b9b4b068-3a41-11e5-94eb-example</RequestId></ResponseMetadata>
</DescribeStacksResponse>`, html.EscapeString(name), html.EscapeString(name), b.String())
}

// QueryError answers as the query protocol answers an error.
func QueryError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<ErrorResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/">
  <Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error>
  <RequestId>c4a2c5e0-0000-4000-8000-example</RequestId>
</ErrorResponse>`, code, html.EscapeString(msg))
}
