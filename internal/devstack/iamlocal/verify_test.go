package iamlocal_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/iamlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/operatorclient"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
)

const region = "eu-west-1"

// identities are a read-only operator, an acting one, and one with
// long-term credentials (no session token).
type identities struct{ reader, actor, longTerm iamlocal.Identity }

func newIdentities(t *testing.T) identities {
	t.Helper()
	reader, err := iamlocal.NewIdentity("rita", "read")
	if err != nil {
		t.Fatal(err)
	}
	actor, err := iamlocal.NewIdentity("alice", "read", "act")
	if err != nil {
		t.Fatal(err)
	}
	longTerm := iamlocal.Identity{AccessKeyID: "AKIALOCALLONGTERM001", SecretAccessKey: "long-term-secret",
		AccountID: iamlocal.Account, UserARN: "arn:aws:iam::000000000000:user/bob", UserID: "AIDALOCALBOB", Targets: []string{"read", "act"}}
	return identities{reader, actor, longTerm}
}

// answer is what the test function URL answers an accepted request: the
// caller Lambda would report and the request as the handler received it.
type answer struct {
	IAM    events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription
	Method string
	Path   string
	Query  string
	Body   string
}

// serve starts a function URL stand-in for target behind v.
func serve(t *testing.T, v *iamlocal.Verifier, target string) string {
	t.Helper()
	url, _ := serveLogged(t, v, target)
	return url
}

// serveLogged is serve, with the log of refusals.
func serveLogged(t *testing.T, v *iamlocal.Verifier, target string) (string, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	srv := httptest.NewServer(iamlocal.Middleware(target, v, slog.New(slog.NewTextHandler(logs, nil)), func(w http.ResponseWriter, r *http.Request, iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) {
		body, _ := io.ReadAll(r.Body)
		_ = json.NewEncoder(w).Encode(answer{IAM: *iam, Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Body: string(body)})
	}))
	t.Cleanup(srv.Close)
	return srv.URL, logs
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// client signs with creds through operatorclient's transport, then lets
// tamper change the signed request before it goes on the wire.
func client(t *testing.T, creds aws.Credentials, tamper func(*http.Request)) *http.Client {
	t.Helper()
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if tamper != nil {
			tamper(r)
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	tr, err := operatorclient.NewTransport(credentials.StaticCredentialsProvider{Value: creds}, region, base)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: tr}
}

func do(t *testing.T, c *http.Client, method, url, body string, header http.Header) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func verifier(t *testing.T, ids identities, now func() time.Time) *iamlocal.Verifier {
	t.Helper()
	v, err := iamlocal.NewVerifier(region, ids.reader, ids.actor, ids.longTerm)
	if err != nil {
		t.Fatal(err)
	}
	v.Now = now
	return v
}

// TestSignedRequestsAreAccepted: requests signed by operatorclient's
// transport, of every shape the operator API sends and a few it does not
// (paths and queries needing percent-encoding, repeated parameters, a
// JSON body, an empty GET, repeated and padded headers), reach the
// handler unchanged, with the signer's identity as Lambda reports it.
func TestSignedRequestsAreAccepted(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t)
	v := verifier(t, ids, nil)
	cases := []struct {
		name, method, path, body string
		header                   http.Header
		id                       iamlocal.Identity
		target                   string
	}{
		{name: "empty GET", method: "GET", path: "/", id: ids.reader, target: "read"},
		{name: "GET without a path", method: "GET", path: "", id: ids.reader, target: "read"},
		{name: "query with several parameters", method: "GET", path: "/v1/events?state=dead&limit=50&source=stripe&source=github&after=", id: ids.actor, target: "read"},
		{name: "percent-encoding", method: "GET", path: "/v1/events/evt%2F1/a%20b/%C3%A9~x?q=a%2Bb+c&k%20y=%2F%3D%26&empty", id: ids.actor, target: "read"},
		{name: "POST with a JSON body", method: "POST", path: "/v1/dead-letters/requeue?dry_run=true", body: `{"ids":[1,2,3],"reason":"retry after the fix"}`,
			header: http.Header{"Content-Type": {"application/json"}}, id: ids.actor, target: "act"},
		{name: "repeated and padded headers", method: "PUT", path: "/v1/x", body: "{}",
			header: http.Header{"X-Custom": {"a  b   c", " second "}, "Content-Type": {"application/json; charset=utf-8"}}, id: ids.actor, target: "act"},
		{name: "long-term credentials", method: "DELETE", path: "/v1/y", id: ids.longTerm, target: "act"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := serve(t, v, tc.target)
			code, body, _ := do(t, client(t, tc.id.Credentials(), nil), tc.method, url+tc.path, tc.body, tc.header)
			if code != http.StatusOK {
				t.Fatalf("%d %s", code, body)
			}
			var got answer
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.IAM, *tc.id.IAM()) || got.IAM.UserARN != tc.id.UserARN || got.IAM.AccessKey != tc.id.AccessKeyID {
				t.Errorf("caller = %+v, want %+v", got.IAM, *tc.id.IAM())
			}
			if got.Method != tc.method || got.Body != tc.body {
				t.Errorf("the handler got %s with body %q, want %s with %q", got.Method, got.Body, tc.method, tc.body)
			}
		})
	}
}

// TestVerifyMatchesTheSDKSigner: the verifier accepts what the SDK's own
// signer produces, with no transport in between, at the edges of the
// clock window; and refuses it just outside.
func TestVerifyMatchesTheSDKSigner(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t)
	signedAt := time.Date(2026, 3, 14, 23, 58, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		now  time.Time
		ok   bool
	}{
		{"at once", signedAt, true},
		{"5 minutes later", signedAt.Add(iamlocal.MaxSkew), true},
		{"5 minutes earlier, the next day", signedAt.Add(-iamlocal.MaxSkew), true},
		{"stale", signedAt.Add(iamlocal.MaxSkew + time.Second), false},
		{"from the future", signedAt.Add(-iamlocal.MaxSkew - time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := verifier(t, ids, func() time.Time { return tc.now })
			r := sdkSigned(t, ids.actor.Credentials(), "lambda", region, signedAt, `{"a":1}`)
			iam, err := v.Verify(r, "act")
			if tc.ok && (err != nil || iam.UserARN != ids.actor.UserARN) {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && !errors.Is(err, iamlocal.ErrForbidden) {
				t.Fatalf("accepted (%v)", err)
			}
		})
	}
}

// sdkSigned is a server-side view of a POST signed by the SDK's signer:
// Host moved out of the header map, as Go's server does.
func sdkSigned(t *testing.T, creds aws.Credentials, service, region string, at time.Time, body string) *http.Request {
	t.Helper()
	r := httptest.NewRequest("POST", "http://abc.lambda-url."+region+".on.aws/v1/act?b=2&a=1", strings.NewReader(body))
	sum := sha256.Sum256([]byte(body))
	hash := hex.EncodeToString(sum[:])
	r.Header.Set("X-Amz-Content-Sha256", hash)
	r.Header.Set("Content-Type", "application/json")
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hash, service, region, at); err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Length", "7")
	return r
}

// TestTamperedRequestsAreRefused: changing anything the signature covers
// after signing (body, path, query, a signed header, the method), an
// expired or future date, an unknown or unentitled identity, another
// service or region, a session token out of place: each is Lambda's 403
// {"Message":"Forbidden"}, with nothing of the request echoed.
func TestTamperedRequestsAreRefused(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t)
	stranger, err := iamlocal.NewIdentity("mallory", "read", "act")
	if err != nil {
		t.Fatal(err)
	}
	resign := func(creds aws.Credentials, service, region string) func(*http.Request) {
		return func(r *http.Request) {
			r.Header.Del("Authorization")
			_ = v4.NewSigner().SignHTTP(r.Context(), creds, r, r.Header.Get("X-Amz-Content-Sha256"), service, region, time.Now())
		}
	}
	setBody := func(r *http.Request, body string) {
		r.Body = io.NopCloser(strings.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	cases := []struct {
		name   string
		id     iamlocal.Identity
		target string
		now    func() time.Time
		tamper func(*http.Request)
		reason string
	}{
		{name: "body changed", tamper: func(r *http.Request) { setBody(r, `{"ids":[9,2,3]}`) }, reason: "not the body's SHA-256"},
		{name: "body changed with its hash", tamper: func(r *http.Request) {
			setBody(r, `{"ids":[9,2,3]}`)
			sum := sha256.Sum256([]byte(`{"ids":[9,2,3]}`))
			r.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
		}, reason: "signature does not match"},
		{name: "payload declared unsigned", tamper: func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD") }, reason: "not the body's SHA-256"},
		{name: "path changed", tamper: func(r *http.Request) { r.URL.Path = "/v1/dead-letters/purge" }, reason: "signature does not match"},
		{name: "path re-encoded", tamper: func(r *http.Request) { r.URL.RawPath = "/v1/dead%2Dletters/requeue" }, reason: "signature does not match"},
		{name: "query value changed", tamper: func(r *http.Request) { r.URL.RawQuery = strings.Replace(r.URL.RawQuery, "true", "false", 1) }, reason: "signature does not match"},
		{name: "query parameter added", tamper: func(r *http.Request) { r.URL.RawQuery += "&all=true" }, reason: "signature does not match"},
		{name: "signed header changed", tamper: func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, reason: "signature does not match"},
		{name: "signed header's values reordered", tamper: func(r *http.Request) { r.Header["X-Custom"] = []string{"two", "one"} }, reason: "signature does not match"},
		{name: "signed header removed", tamper: func(r *http.Request) { r.Header.Del("X-Custom") }, reason: "x-custom is not in the request"},
		{name: "date moved", tamper: func(r *http.Request) {
			d, _ := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
			r.Header.Set("X-Amz-Date", d.Add(time.Second).Format("20060102T150405Z"))
		}, reason: "signature does not match"},
		{name: "method changed", tamper: func(r *http.Request) { r.Method = "PUT" }, reason: "signature does not match"},
		{name: "signature changed", tamper: func(r *http.Request) {
			a := r.Header.Get("Authorization")
			last := a[len(a)-1]
			r.Header.Set("Authorization", a[:len(a)-1]+map[bool]string{true: "1", false: "0"}[last == '0'])
		}, reason: "signature does not match"},
		{name: "no Authorization", tamper: func(r *http.Request) { r.Header.Del("Authorization") }, reason: "want one Authorization header, got 0"},
		{name: "stale", now: func() time.Time { return time.Now().Add(iamlocal.MaxSkew + time.Minute) }, reason: "from now"},
		{name: "from the future", now: func() time.Time { return time.Now().Add(-iamlocal.MaxSkew - time.Minute) }, reason: "from now"},
		{name: "unknown access key", id: stranger, reason: "unknown access key id"},
		{name: "another service", tamper: resign(ids.actor.Credentials(), "execute-api", region), reason: "names service"},
		{name: "another region", tamper: resign(ids.actor.Credentials(), "lambda", "us-east-1"), reason: "names region"},
		{name: "the secret of another identity", tamper: resign(aws.Credentials{AccessKeyID: ids.actor.AccessKeyID, SecretAccessKey: ids.reader.SecretAccessKey, SessionToken: ids.actor.SessionToken}, "lambda", region), reason: "signature does not match"},
		{name: "a read identity on act", id: ids.reader, target: "act", reason: "may not invoke the"},
		{name: "temporary credentials without their token", tamper: func(r *http.Request) {
			creds := ids.actor.Credentials()
			creds.SessionToken = ""
			r.Header.Del("X-Amz-Security-Token")
			resign(creds, "lambda", region)(r)
		}, reason: "want one X-Amz-Security-Token, got 0"},
		{name: "another session token", tamper: resign(aws.Credentials{AccessKeyID: ids.actor.AccessKeyID, SecretAccessKey: ids.actor.SecretAccessKey, SessionToken: ids.reader.SessionToken}, "lambda", region), reason: "the session token is not"},
		{name: "a session token on long-term credentials", id: ids.longTerm, tamper: resign(aws.Credentials{AccessKeyID: ids.longTerm.AccessKeyID, SecretAccessKey: ids.longTerm.SecretAccessKey, SessionToken: "made-up"}, "lambda", region), reason: "a session token sent with"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id, target := tc.id, tc.target
			if id.AccessKeyID == "" {
				id = ids.actor
			}
			if target == "" {
				target = "act"
			}
			url, logs := serveLogged(t, verifier(t, ids, tc.now), target)
			body := `{"ids":[1,2,3]}`
			code, got, header := do(t, client(t, id.Credentials(), tc.tamper), "POST", url+"/v1/dead-letters/requeue?dry_run=true&limit=3", body,
				http.Header{"Content-Type": {"application/json"}, "X-Custom": {"one", "two"}})
			if code != http.StatusForbidden || string(got) != `{"Message":"Forbidden"}` || header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %s %v, want Lambda's 403", code, got, header)
			}
			if !strings.Contains(logs.String(), tc.reason) {
				t.Errorf("the log does not say %q:\n%s", tc.reason, logs)
			}
		})
	}
}

// TestAuthorizationPartsInAnyOrder: AWS reads the Authorization header's
// three parts by name; so does the verifier.
func TestAuthorizationPartsInAnyOrder(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t)
	url := serve(t, verifier(t, ids, nil), "read")
	reorder := func(r *http.Request) {
		alg, rest, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		parts := strings.Split(rest, ", ")
		r.Header.Set("Authorization", alg+" "+parts[2]+","+parts[0]+" ,  "+parts[1])
	}
	if code, body, _ := do(t, client(t, ids.reader.Credentials(), reorder), "GET", url+"/v1/stats", "", nil); code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
}

// TestBodyOverTheLimit: a body Lambda could not carry is refused as too
// large, before its signature is looked at.
func TestBodyOverTheLimit(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t)
	v := verifier(t, ids, nil)
	v.MaxBodyBytes = 16
	url := serve(t, v, "act")
	code, body, _ := do(t, client(t, ids.actor.Credentials(), nil), "POST", url, `{"far":"over sixteen bytes"}`, nil)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), `"Message"`) {
		t.Fatalf("%d %s", code, body)
	}
	code, body, _ = do(t, client(t, ids.actor.Credentials(), nil), "POST", url, `{"ok":1}`, nil)
	if code != http.StatusOK {
		t.Fatalf("a body within the limit: %d %s", code, body)
	}
}

// TestMalformedRequestsAreRefused: whatever a client puts in the headers
// the verifier reads, it is refused with a reason and never panics.
func TestMalformedRequestsAreRefused(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t)
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	v := verifier(t, ids, func() time.Time { return now })
	akid := ids.longTerm.AccessKeyID
	good := "AWS4-HMAC-SHA256 Credential=" + akid + "/20260314/eu-west-1/lambda/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("ab", 32)
	sig := "Signature=" + strings.Repeat("0", 64)
	cases := map[string]struct {
		auth   []string
		date   []string
		query  string
		reason string
	}{
		"no Authorization":               {auth: nil, reason: "want one Authorization"},
		"two Authorization headers":      {auth: []string{good, good}, reason: "want one Authorization"},
		"empty":                          {auth: []string{""}, reason: "not AWS4-HMAC-SHA256"},
		"algorithm alone":                {auth: []string{"AWS4-HMAC-SHA256"}, reason: "not AWS4-HMAC-SHA256"},
		"algorithm and a space":          {auth: []string{"AWS4-HMAC-SHA256 "}, reason: "not key=value"},
		"another scheme":                 {auth: []string{"Bearer abc"}, reason: "not AWS4-HMAC-SHA256"},
		"SigV4a":                         {auth: []string{strings.Replace(good, "AWS4-HMAC-SHA256", "AWS4-ECDSA-P256-SHA256", 1)}, reason: "not AWS4-HMAC-SHA256"},
		"empty credential":               {auth: []string{"AWS4-HMAC-SHA256 Credential=, SignedHeaders=host;x-amz-date, " + sig}, reason: "no Credential"},
		"no signature":                   {auth: []string{"AWS4-HMAC-SHA256 Credential=" + akid + "/20260314/eu-west-1/lambda/aws4_request, SignedHeaders=host;x-amz-date"}, reason: "no Signature"},
		"a part twice":                   {auth: []string{good + ", " + sig}, reason: "twice"},
		"an unknown part":                {auth: []string{good + ", Extra=1"}, reason: "unknown"},
		"a part without =":               {auth: []string{good + ", Extra"}, reason: "not key=value"},
		"credential of four fields":      {auth: []string{"AWS4-HMAC-SHA256 Credential=" + akid + "/20260314/eu-west-1/lambda, SignedHeaders=host;x-amz-date, " + sig}, reason: "not AKID/"},
		"credential of six fields":       {auth: []string{"AWS4-HMAC-SHA256 Credential=" + akid + "/20260314/eu-west-1/lambda/aws4_request/x, SignedHeaders=host;x-amz-date, " + sig}, reason: "not AKID/"},
		"credential without terminator":  {auth: []string{"AWS4-HMAC-SHA256 Credential=" + akid + "/20260314/eu-west-1/lambda/aws4, SignedHeaders=host;x-amz-date, " + sig}, reason: "not AKID/"},
		"scope date not a date":          {auth: []string{"AWS4-HMAC-SHA256 Credential=" + akid + "/2026031x/eu-west-1/lambda/aws4_request, SignedHeaders=host;x-amz-date, " + sig}, reason: "not yyyymmdd"},
		"scope date of another day":      {auth: []string{"AWS4-HMAC-SHA256 Credential=" + akid + "/20260313/eu-west-1/lambda/aws4_request, SignedHeaders=host;x-amz-date, " + sig}, reason: "not X-Amz-Date's day"},
		"unsorted signed headers":        {auth: []string{strings.Replace(good, "host;x-amz-date", "x-amz-date;host", 1)}, reason: "not sorted"},
		"a signed header twice":          {auth: []string{strings.Replace(good, "host;x-amz-date", "host;host;x-amz-date", 1)}, reason: "not sorted"},
		"uppercase signed header":        {auth: []string{strings.Replace(good, "host;x-amz-date", "Host;x-amz-date", 1)}, reason: "lowercase"},
		"empty signed header":            {auth: []string{strings.Replace(good, "host;x-amz-date", "host;;x-amz-date", 1)}, reason: "lowercase"},
		"host not signed":                {auth: []string{strings.Replace(good, "host;x-amz-date", "x-amz-date", 1)}, reason: "host is not among"},
		"date not signed":                {auth: []string{strings.Replace(good, "host;x-amz-date", "host", 1)}, reason: "x-amz-date is not among"},
		"a signed header not sent":       {auth: []string{strings.Replace(good, "host;x-amz-date", "host;x-amz-date;x-missing", 1)}, reason: "x-missing is not in the request"},
		"short signature":                {auth: []string{strings.Replace(good, strings.Repeat("ab", 32), "abc", 1)}, reason: "64 lowercase hex"},
		"uppercase signature":            {auth: []string{strings.Replace(good, strings.Repeat("ab", 32), strings.Repeat("AB", 32), 1)}, reason: "64 lowercase hex"},
		"signature not hex":              {auth: []string{strings.Replace(good, strings.Repeat("ab", 32), strings.Repeat("zz", 32), 1)}, reason: "64 lowercase hex"},
		"no X-Amz-Date":                  {auth: []string{good}, date: []string{}, reason: "want one X-Amz-Date"},
		"two X-Amz-Date":                 {auth: []string{good}, date: []string{"20260314T120000Z", "20260314T120000Z"}, reason: "want one X-Amz-Date"},
		"X-Amz-Date in another format":   {auth: []string{good}, date: []string{"Sat, 14 Mar 2026 12:00:00 GMT"}, reason: "not yyyymmddThhmmssZ"},
		"X-Amz-Date of another day":      {auth: []string{good}, date: []string{"20260315T120000Z"}, reason: "from now"},
		"unknown key":                    {auth: []string{strings.Replace(good, akid, "AKIANOBODY", 1)}, reason: "unknown access key"},
		"another service":                {auth: []string{strings.Replace(good, "/lambda/", "/s3/", 1)}, reason: "service"},
		"another region":                 {auth: []string{strings.Replace(good, "/eu-west-1/", "/us-east-1/", 1)}, reason: "region"},
		"a malformed query":              {auth: []string{good}, query: "a=%zz", reason: "query"},
		"a query with a semicolon":       {auth: []string{good}, query: "a=1;b=2", reason: "query"},
		"a well-formed wrong signature":  {auth: []string{good}, reason: "signature does not match"},
		"binary in the header":           {auth: []string{"AWS4-HMAC-SHA256 \x00\xff=\x01, =, ,"}, reason: "Forbidden"},
		"separators only":                {auth: []string{"AWS4-HMAC-SHA256 ,,,,"}, reason: "not key=value"},
		"a very long header":             {auth: []string{good + strings.Repeat(",", 1<<16)}, reason: "not key=value"},
		"credential full of separators":  {auth: []string{"AWS4-HMAC-SHA256 Credential=////, SignedHeaders=host;x-amz-date, " + sig}, reason: "not AKID/"},
		"signed headers of separators":   {auth: []string{strings.Replace(good, "host;x-amz-date", ";;;", 1)}, reason: "lowercase"},
		"a signed header with a space":   {auth: []string{strings.Replace(good, "host;x-amz-date", "host;x amz;x-amz-date", 1)}, reason: "lowercase"},
		"a key with = in the signature":  {auth: []string{strings.Replace(good, "Signature=", "Signature==", 1)}, reason: "64 lowercase hex"},
		"session token sent unasked for": {auth: []string{good}, reason: "session token"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "http://abc.lambda-url.eu-west-1.on.aws/v1/stats", nil)
			if tc.query != "" {
				r.URL.RawQuery = tc.query
			}
			r.Header["Authorization"] = tc.auth
			r.Header["X-Amz-Date"] = []string{"20260314T120000Z"}
			if tc.date != nil {
				r.Header["X-Amz-Date"] = tc.date
			}
			if name == "session token sent unasked for" {
				r.Header.Set("X-Amz-Security-Token", "x")
			}
			iam, err := v.Verify(r, "read")
			if iam != nil || !errors.Is(err, iamlocal.ErrForbidden) {
				t.Fatalf("Verify = %v, %v; want a refusal", iam, err)
			}
			if !strings.Contains(err.Error(), tc.reason) && tc.reason != "Forbidden" {
				t.Errorf("refusal %q does not say %q", err, tc.reason)
			}
		})
	}
}

// TestVerifyKeepsTheBody: the handler behind the verifier reads the body
// the client sent, accepted or not.
func TestVerifyKeepsTheBody(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t)
	v := verifier(t, ids, nil)
	r := httptest.NewRequest("POST", "http://x/", strings.NewReader(`{"keep":true}`))
	if _, err := v.Verify(r, "read"); err == nil {
		t.Fatal("an unsigned request was accepted")
	}
	if b, _ := io.ReadAll(r.Body); !bytes.Equal(b, []byte(`{"keep":true}`)) {
		t.Fatalf("body after Verify: %q", b)
	}
}

// TestNewVerifierRefusesBadIdentities: an identity missing what Lambda
// reports, or two with one key, is a set-up error, not a silent gap.
func TestNewVerifierRefusesBadIdentities(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t)
	noARN := ids.reader
	noARN.UserARN = ""
	slash := ids.reader
	slash.AccessKeyID = "AKIA/X"
	for name, set := range map[string][]iamlocal.Identity{
		"none": nil, "no user ARN": {noARN}, "a separator in the key": {slash}, "a key twice": {ids.reader, ids.reader},
	} {
		if _, err := iamlocal.NewVerifier(region, set...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestNewIdentity: fresh temporary credentials each time, for a role
// session named as IAM allows, that may invoke what it was given only.
func TestNewIdentity(t *testing.T) {
	t.Parallel()
	a, err := iamlocal.NewIdentity("alice", "read")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := iamlocal.NewIdentity("alice", "read")
	if a.AccessKeyID == b.AccessKeyID || a.SecretAccessKey == b.SecretAccessKey || a.SessionToken == b.SessionToken {
		t.Error("two identities share credentials")
	}
	field.Check(t, "identity",
		field.Is("AccessKeyID", a.AccessKeyID, strings.HasPrefix(a.AccessKeyID, "ASIA") && len(a.AccessKeyID) == 20, "ASIA and 16 more characters"),
		field.Eq("UserARN", a.UserARN, "arn:aws:sts::000000000000:assumed-role/WebhookInboxOperator/alice"),
		field.Is("UserID", a.UserID, strings.HasSuffix(a.UserID, ":alice"), "ending :alice"),
	)
	if !a.May("read") || a.May("act") {
		t.Errorf("targets %v", a.Targets)
	}
	if env := strings.Join(a.Env(), "\n"); !strings.Contains(env, "AWS_SESSION_TOKEN="+a.SessionToken) || !strings.Contains(env, "AWS_ACCESS_KEY_ID="+a.AccessKeyID) {
		t.Errorf("env %s", env)
	}
	for _, bad := range []string{"", "a", "with space", "slash/", strings.Repeat("x", 65)} {
		if _, err := iamlocal.NewIdentity(bad, "read"); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	if _, err := iamlocal.NewIdentity("nobody"); err == nil {
		t.Error("an identity with no target accepted")
	}
}

// FuzzVerify: no Authorization, X-Amz-Date, token or query a client sends
// makes the verifier panic or accept an unsigned request.
func FuzzVerify(f *testing.F) {
	ids, err := iamlocal.NewIdentity("fuzz", "read")
	if err != nil {
		f.Fatal(err)
	}
	v, err := iamlocal.NewVerifier(region, ids)
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	v.Now = func() time.Time { return now }
	f.Add("AWS4-HMAC-SHA256 Credential="+ids.AccessKeyID+"/20260314/eu-west-1/lambda/aws4_request, SignedHeaders=host;x-amz-date, Signature="+strings.Repeat("ab", 32), "20260314T120000Z", ids.SessionToken, "a=1&b=2")
	f.Add("AWS4-HMAC-SHA256 ,=,", "x", "", "%")
	f.Fuzz(func(t *testing.T, auth, date, token, query string) {
		r := httptest.NewRequest("GET", "http://abc.lambda-url.eu-west-1.on.aws/", nil)
		r.URL.RawQuery = query
		r.Header.Set("Authorization", auth)
		r.Header.Set("X-Amz-Date", date)
		r.Header.Set("X-Amz-Security-Token", token)
		if iam, err := v.Verify(r, "read"); err == nil || iam != nil {
			t.Fatalf("accepted %q: %+v", auth, iam)
		}
	})
}
