package lambdalocal_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/iamlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/pinnedtools"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/internal/operatorclient"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdahttp"
)

var alice = &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
	AccessKey: "ASIALOCAL", AccountID: "000000000000", CallerID: "AROALOCAL:alice",
	UserARN: "arn:aws:sts::000000000000:assumed-role/WebhookInboxOperator/alice", UserID: "AROALOCAL:alice",
}

// TestFunctionURLEventIsWhatLambdaSends: the event has the documented
// payload 2.0 shape of a function URL (and nothing API Gateway's own
// events add, such as pathParameters), decodes as aws-lambda-go's
// LambdaFunctionURLRequest and APIGatewayV2HTTPRequest alike, and
// lambdahttp turns it back into the request that was sent, the caller
// included.
func TestFunctionURLEventIsWhatLambdaSends(t *testing.T) {
	t.Parallel()
	body := `{"ids":[1,2]}`
	r := httptest.NewRequest("POST", "http://127.0.0.1:4001/v1/dead-letters/evt%2F1/requeue?source=stripe&source=github&q=a+b&empty=", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("User-Agent", "webhookctl/test")
	r.Header["X-Repeated"] = []string{"one", "two"}
	r.Header.Set("Cookie", "a=1; b=2")
	r.RemoteAddr = "192.0.2.7:51000"
	now := time.Date(2026, 3, 14, 12, 0, 0, 123e6, time.UTC)
	domain := lambdalocal.FunctionURLDomain("OperatorFunction", "eu-west-1")
	ev := lambdalocal.NewFunctionURLEvent(r, []byte(body), domain, alice, now)
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}

	if !regexp.MustCompile(`^[a-z0-9]{32}\.lambda-url\.eu-west-1\.on\.aws$`).MatchString(domain) || domain != lambdalocal.FunctionURLDomain("OperatorFunction", "eu-west-1") {
		t.Errorf("domain %s", domain)
	}
	// The documented keys, at each level.
	var doc map[string]any
	_ = json.Unmarshal(raw, &doc)
	ctxDoc, _ := doc["requestContext"].(map[string]any)
	iamDoc, _ := ctxDoc["authorizer"].(map[string]any)["iam"].(map[string]any)
	httpDoc, _ := ctxDoc["http"].(map[string]any)
	for where, want := range map[string]struct {
		got  map[string]any
		keys []string
	}{
		"event":          {doc, []string{"body", "cookies", "headers", "isBase64Encoded", "queryStringParameters", "rawPath", "rawQueryString", "requestContext", "routeKey", "version"}},
		"requestContext": {ctxDoc, []string{"accountId", "apiId", "authorizer", "domainName", "domainPrefix", "http", "requestId", "routeKey", "stage", "time", "timeEpoch"}},
		"iam":            {iamDoc, []string{"accessKey", "accountId", "callerId", "userArn", "userId"}},
		"http":           {httpDoc, []string{"method", "path", "protocol", "sourceIp", "userAgent"}},
	} {
		var keys []string
		for k := range want.got {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, want.keys) {
			t.Errorf("%s keys = %v, want %v", where, keys, want.keys)
		}
	}

	var furl events.LambdaFunctionURLRequest
	if err := json.Unmarshal(raw, &furl); err != nil {
		t.Fatal(err)
	}
	urlID := strings.SplitN(domain, ".", 2)[0]
	c := furl.RequestContext
	field.Check(t, "event",
		field.Eq("version", furl.Version, "2.0"),
		field.Eq("rawPath", furl.RawPath, "/v1/dead-letters/evt%2F1/requeue"),
		field.Eq("rawQueryString", furl.RawQueryString, "source=stripe&source=github&q=a+b&empty="),
		field.Eq("body", furl.Body, body),
		field.Eq("isBase64Encoded", furl.IsBase64Encoded, false),
		field.Eq(`queryStringParameters["source"]`, furl.QueryStringParameters["source"], "stripe,github"),
		field.Eq(`queryStringParameters["q"]`, furl.QueryStringParameters["q"], "a b"),
		field.Eq(`queryStringParameters["empty"]`, furl.QueryStringParameters["empty"], ""),
		field.Is("cookies", furl.Cookies, slices.Equal(furl.Cookies, []string{"a=1", "b=2"}), "[a=1 b=2]"),
		field.Eq(`headers["x-repeated"]`, furl.Headers["x-repeated"], "one,two"),
		field.Eq(`headers["content-type"]`, furl.Headers["content-type"], "application/json"),
		field.Eq(`headers["host"]`, furl.Headers["host"], "127.0.0.1:4001"),
		field.Eq(`headers["content-length"]`, furl.Headers["content-length"], "13"),
		field.Eq(`headers["x-forwarded-for"]`, furl.Headers["x-forwarded-for"], "192.0.2.7"),
		field.Eq(`headers["cookie"]`, furl.Headers["cookie"], ""),
	)
	field.Check(t, "requestContext",
		field.Eq("accountId", c.AccountID, iamlocal.Account),
		field.Eq("apiId", c.APIID, urlID),
		field.Eq("domainPrefix", c.DomainPrefix, urlID),
		field.Eq("domainName", c.DomainName, domain),
		field.Eq("http.method", c.HTTP.Method, "POST"),
		field.Eq("http.path", c.HTTP.Path, "/v1/dead-letters/evt/1/requeue"),
		field.Eq("http.protocol", c.HTTP.Protocol, "HTTP/1.1"),
		field.Eq("http.sourceIp", c.HTTP.SourceIP, "192.0.2.7"),
		field.Eq("http.userAgent", c.HTTP.UserAgent, "webhookctl/test"),
		field.Eq("time", c.Time, "14/Mar/2026:12:00:00 +0000"),
		field.Eq("timeEpoch", c.TimeEpoch, now.UnixMilli()),
		field.Is("requestId", c.RequestID,
			regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(c.RequestID), "a version 4 UUID"),
	)
	if c.Authorizer == nil || c.Authorizer.IAM == nil {
		t.Errorf("authorizer %+v, want its iam", c.Authorizer)
	} else {
		iam := c.Authorizer.IAM
		field.Check(t, "authorizer.iam",
			field.Eq("userArn", iam.UserARN, alice.UserARN),
			field.Eq("accessKey", iam.AccessKey, alice.AccessKey),
			field.Eq("callerId", iam.CallerID, alice.CallerID),
			field.Eq("userId", iam.UserID, alice.UserID),
			field.Eq("accountId", iam.AccountID, alice.AccountID),
		)
	}

	var v2 events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &v2); err != nil {
		t.Fatal(err)
	}
	if v2.RouteKey != "$default" || v2.RequestContext.RouteKey != "$default" || v2.RequestContext.Stage != "$default" {
		t.Errorf("route and stage: %q %q %q", v2.RouteKey, v2.RequestContext.RouteKey, v2.RequestContext.Stage)
	}
	back, err := lambdahttp.NewRequest(context.Background(), v2)
	if err != nil {
		t.Fatal(err)
	}
	caller, ok := lambdahttp.IAMCaller(back)
	got, _ := io.ReadAll(back.Body)
	field.Check(t, "lambdahttp's request",
		field.Eq("IAM caller found", ok, true),
		field.Eq("caller UserARN", caller.UserARN, alice.UserARN),
		field.Eq("Method", back.Method, "POST"),
		field.Eq("URL.EscapedPath()", back.URL.EscapedPath(), "/v1/dead-letters/evt%2F1/requeue"),
		field.Eq("second source", back.URL.Query()["source"][1], "github"),
		field.Eq("Body", string(got), body),
		field.Eq("RequestID", lambdahttp.RequestID(back), c.RequestID),
	)
	if ck, err := back.Cookie("b"); err != nil || ck.Value != "2" {
		t.Errorf("cookie b: %v %v", ck, err)
	}
}

// TestFunctionURLEventBodies: text travels as text, anything else (no
// content type, a form, bytes) base64-encoded; no body, no body field;
// without a caller, no authorizer.
func TestFunctionURLEventBodies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		contentType, body string
		base64            bool
	}{
		{"text/plain; charset=utf-8", "hello", false},
		{"application/problem+json", `{"a":1}`, false},
		{"application/xml", "<a/>", false},
		{"application/x-www-form-urlencoded", "a=1&b=2", true},
		{"application/octet-stream", "\x00\xff\x01", true},
		{"", "no type", true},
		{"not a media type", "x", true},
	} {
		r := httptest.NewRequest("PUT", "http://x/", strings.NewReader(tc.body))
		if tc.contentType != "" {
			r.Header.Set("Content-Type", tc.contentType)
		}
		ev := lambdalocal.NewFunctionURLEvent(r, []byte(tc.body), lambdalocal.FunctionURLDomain("F", "us-east-1"), alice, time.Now())
		got := ev.Body
		if ev.IsBase64Encoded {
			b, _ := base64.StdEncoding.DecodeString(ev.Body)
			got = string(b)
		}
		if ev.IsBase64Encoded != tc.base64 || got != tc.body {
			t.Errorf("%q: base64 %v, body %q", tc.contentType, ev.IsBase64Encoded, ev.Body)
		}
	}
	r := httptest.NewRequest("GET", "http://x", nil)
	raw, _ := json.Marshal(lambdalocal.NewFunctionURLEvent(r, nil, lambdalocal.FunctionURLDomain("F", "us-east-1"), nil, time.Now()))
	var doc map[string]any
	_ = json.Unmarshal(raw, &doc)
	_, hasBody := doc["body"]
	field.Check(t, "empty GET",
		field.Eq("body present", hasBody, false),
		field.Eq("rawPath", doc["rawPath"], "/"),
		field.Eq("isBase64Encoded", doc["isBase64Encoded"], false),
		field.Eq(`headers["content-length"]`, doc["headers"].(map[string]any)["content-length"], nil),
	)
	if _, ok := doc["requestContext"].(map[string]any)["authorizer"]; ok {
		t.Errorf("an authorizer without a caller: %s", raw)
	}
}

// TestStackRefusesFunctionURLsItCannotServe: AuthType NONE, a streamed
// URL, a URL without a verifier or without a target, and a target for a
// function without a URL all stop the stack before anything is built.
func TestStackRefusesFunctionURLsItCannotServe(t *testing.T) {
	t.Parallel()
	v, err := iamlocal.NewVerifier("us-east-1", iamlocal.Identity{AccessKeyID: "AKIA1", SecretAccessKey: "s", AccountID: "000000000000", UserARN: "arn:aws:iam::000000000000:user/u", UserID: "AIDA1"})
	if err != nil {
		t.Fatal(err)
	}
	tpl := func(urlConfig string) *samtemplate.Template {
		doc := "Resources:\n  Op:\n    Type: AWS::Serverless::Function\n    Properties: {Handler: bootstrap, FunctionUrlConfig: " + urlConfig + "}\n" +
			"  Other:\n    Type: AWS::Serverless::Function\n    Properties: {Handler: bootstrap}\n"
		path := filepath.Join(t.TempDir(), "template.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		tp, err := samtemplate.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	iam := "{AuthType: AWS_IAM}"
	for name, tc := range map[string]struct {
		o    lambdalocal.StackOptions
		says string
	}{
		"AuthType NONE":            {lambdalocal.StackOptions{Template: tpl("{AuthType: NONE}"), IAM: v, URLTargets: map[string]string{"Op": "act"}}, "only AWS_IAM"},
		"a streamed URL":           {lambdalocal.StackOptions{Template: tpl("{AuthType: AWS_IAM, InvokeMode: RESPONSE_STREAM}"), IAM: v, URLTargets: map[string]string{"Op": "act"}}, "only BUFFERED"},
		"no verifier":              {lambdalocal.StackOptions{Template: tpl(iam), URLTargets: map[string]string{"Op": "act"}}, "StackOptions.IAM"},
		"no target":                {lambdalocal.StackOptions{Template: tpl(iam), IAM: v}, "StackOptions.URLTargets"},
		"a target without URL":     {lambdalocal.StackOptions{Template: tpl(iam), IAM: v, URLTargets: map[string]string{"Op": "act", "Other": "read"}}, "Other, which has no function URL"},
		"a target for no function": {lambdalocal.StackOptions{Template: tpl(iam), IAM: v, URLTargets: map[string]string{"Op": "act", "Gone": "read"}}, "Gone, which has no function URL"},
	} {
		o := tc.o
		o.RepoRoot, o.Dir = t.TempDir(), t.TempDir()
		s, err := lambdalocal.StartStack(context.Background(), o)
		if err == nil {
			s.Close()
			t.Errorf("%s: started", name)
			continue
		}
		if !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v does not say %q", name, err, tc.says)
		}
	}
}

// echoEnv makes the test binary, started as a Lambda bootstrap, serve
// echoFunction instead of running the tests (see TestMain).
const echoEnv = "LAMBDALOCAL_TEST_FUNCTION"

// echoFunction is the tiny function behind the local function URL in
// TestFunctionURLUnderTheEmulator: it answers the event it received,
// base64-encoded, with a status, a header and a cookie; or, as the
// request's x-echo-mode header asks, fails, or answers JSON that is not a
// function URL response.
func echoFunction(_ context.Context, ev json.RawMessage) (any, error) {
	var req events.LambdaFunctionURLRequest
	if err := json.Unmarshal(ev, &req); err != nil {
		return nil, err
	}
	switch req.Headers["x-echo-mode"] {
	case "error":
		return nil, errors.New("the function failed")
	case "plain":
		return map[string]string{"hello": "world"}, nil
	}
	return events.LambdaFunctionURLResponse{
		StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json", "X-Echo": "1"},
		Cookies: []string{"seen=1; Path=/"}, Body: base64.StdEncoding.EncodeToString(ev), IsBase64Encoded: true,
	}, nil
}

// TestFunctionURLUnderTheEmulator: a function under the Runtime Interface
// Emulator behind its local function URL: a request signed by
// operatorclient's transport reaches it as Lambda's event with the
// caller's principal, and its answer comes back as Lambda writes it;
// refusals never reach it; a failed function is a 502; a function
// answering plain JSON is a 200; an oversized body a 413.
func TestFunctionURLUnderTheEmulator(t *testing.T) {
	tier.Heavy(t, "runs a function under the Lambda Runtime Interface Emulator")
	ctx := context.Background()
	rie, err := pinnedtools.Tool(ctx, "aws-lambda-rie", "AWS_LAMBDA_RIE")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	em, err := lambdalocal.StartEmulator(ctx, lambdalocal.EmulatorOptions{
		Name: "EchoFunction", RIE: rie, Bootstrap: self, Env: []string{echoEnv + "=echo"}, LogPath: filepath.Join(dir, "echo.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer em.Close()

	reader, _ := iamlocal.NewIdentity("rita", "read")
	actor, _ := iamlocal.NewIdentity("alice", "read", "act")
	v, err := iamlocal.NewVerifier("us-east-1", reader, actor)
	if err != nil {
		t.Fatal(err)
	}
	h, err := lambdalocal.NewFunctionURL(em, samtemplate.FunctionURL{AuthType: "AWS_IAM", InvokeMode: "BUFFERED"}, "act", v, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	signed := func(id iamlocal.Identity) *http.Client {
		tr, err := operatorclient.NewTransport(credentials.StaticCredentialsProvider{Value: id.Credentials()}, "us-east-1", nil)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Client{Transport: tr}
	}
	send := func(c *http.Client, mode, body string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/v1/dead-letters/requeue?limit=2", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if mode != "" {
			req.Header.Set("X-Echo-Mode", mode)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}

	resp, body := send(signed(actor), "", `{"ids":[1,2]}`)
	if !field.Check(t, "response "+string(body),
		field.Eq("StatusCode", resp.StatusCode, 201),
		field.Eq("X-Echo", resp.Header.Get("X-Echo"), "1"),
		field.Eq("Set-Cookie", resp.Header.Get("Set-Cookie"), "seen=1; Path=/"),
		field.Is("X-Amzn-Requestid", resp.Header.Get("X-Amzn-Requestid"), resp.Header.Get("X-Amzn-Requestid") != "", "set"),
	) {
		t.FailNow()
	}
	var got events.LambdaFunctionURLRequest
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if got.RequestContext.Authorizer == nil || got.RequestContext.Authorizer.IAM == nil {
		t.Fatalf("the function received no IAM authorizer: %s", body)
	}
	if !field.Check(t, "the function received",
		field.Eq("authorizer.iam.userArn", got.RequestContext.Authorizer.IAM.UserARN, actor.UserARN),
		field.Eq("body", got.Body, `{"ids":[1,2]}`),
		field.Eq("rawPath", got.RawPath, "/v1/dead-letters/requeue"),
		field.Eq(`queryStringParameters["limit"]`, got.QueryStringParameters["limit"], "2"),
		field.Eq("requestContext.domainName", got.RequestContext.DomainName, lambdalocal.FunctionURLDomain("EchoFunction", "us-east-1")),
		field.Is(`headers["x-amz-content-sha256"]`, got.Headers["x-amz-content-sha256"], got.Headers["x-amz-content-sha256"] != "", "set"),
	) {
		t.FailNow()
	}

	if resp, body := send(signed(reader), "", `{}`); resp.StatusCode != 403 || string(body) != `{"Message":"Forbidden"}` {
		t.Fatalf("a reader on act: %d %s", resp.StatusCode, body)
	}
	if resp, body := send(http.DefaultClient, "", `{}`); resp.StatusCode != 403 || string(body) != `{"Message":"Forbidden"}` {
		t.Fatalf("unsigned: %d %s", resp.StatusCode, body)
	}
	if resp, body := send(signed(actor), "error", `{}`); resp.StatusCode != 502 || string(body) != "Internal Server Error" {
		t.Fatalf("a failing function: %d %s", resp.StatusCode, body)
	}
	if resp, body := send(signed(actor), "plain", `{}`); resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || string(body) != `{"hello":"world"}` {
		t.Fatalf("plain JSON: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	big := bytes.Repeat([]byte("x"), iamlocal.MaxBodyBytes+1)
	if resp, body := send(http.DefaultClient, "", string(big)); resp.StatusCode != 413 {
		t.Fatalf("an oversized body: %d %.100s", resp.StatusCode, body)
	}
}
