package operatorclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/iamlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/operatorclient"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// functionURL serves a local function URL for target behind the
// AWS_IAM stand-in, answering the caller Lambda reports and the body.
func functionURL(t *testing.T, v *iamlocal.Verifier, target string) string {
	t.Helper()
	srv := httptest.NewServer(iamlocal.Middleware(target, v, nil, func(w http.ResponseWriter, r *http.Request, iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) {
		body, _ := io.ReadAll(r.Body)
		_ = json.NewEncoder(w).Encode(map[string]string{"userArn": iam.UserARN, "body": string(body)})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func provider(id iamlocal.Identity) aws.CredentialsProvider {
	return credentials.StaticCredentialsProvider{Value: id.Credentials()}
}

// TestTransportSignsAsLambdaVerifies: requests signed by the transport,
// sent over HTTP, pass the AWS_IAM stand-in with the signer's identity,
// body intact; the caller's request is left as it was.
func TestTransportSignsAsLambdaVerifies(t *testing.T) {
	t.Parallel()
	alice, err := iamlocal.NewIdentity("alice", "read", "act")
	if err != nil {
		t.Fatal(err)
	}
	v, err := iamlocal.NewVerifier("eu-west-1", alice)
	if err != nil {
		t.Fatal(err)
	}
	url := functionURL(t, v, "act")
	tr, err := operatorclient.NewTransport(provider(alice), "eu-west-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: tr}
	for _, body := range []string{"", `{"ids":[1,2],"note":"ünïcode"}`} {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/dead-letters/requeue?limit=2&source=stripe", rd)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer left-over") // replaced, not sent alongside
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || got["userArn"] != alice.UserARN || got["body"] != body {
			t.Fatalf("body %q: %d %v", body, resp.StatusCode, got)
		}
		if req.Header.Get("Authorization") != "Bearer left-over" || req.Header.Get("X-Amz-Date") != "" {
			t.Fatalf("the caller's request was changed: %v", req.Header)
		}
	}
}

// TestTransportTakesTheRegionFromAFunctionURL: a function URL's host
// names the region to sign for, whatever the transport's own.
func TestTransportTakesTheRegionFromAFunctionURL(t *testing.T) {
	t.Parallel()
	alice, _ := iamlocal.NewIdentity("alice", "read")
	v, err := iamlocal.NewVerifier("ap-southeast-2", alice)
	if err != nil {
		t.Fatal(err)
	}
	var verr error
	capture := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r.Host = r.URL.Host // as the server sees it
		_, verr = v.Verify(r, "read")
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})
	tr, _ := operatorclient.NewTransport(provider(alice), "eu-west-1", capture)
	req, _ := http.NewRequest(http.MethodGet, "https://abcdefghijklmnopqrstuvwxyz012345.lambda-url.ap-southeast-2.on.aws/v1/stats", nil)
	if _, err := tr.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if verr != nil {
		t.Fatalf("signed for the wrong region: %v", verr)
	}
	for host, want := range map[string]string{
		"abc.lambda-url.us-east-1.on.aws":         "us-east-1",
		"ABC.lambda-url.eu-west-1.on.aws:443":     "eu-west-1",
		"abc.execute-api.us-east-1.amazonaws.com": "",
		"127.0.0.1:3000":                          "",
		"lambda-url.us-east-1.on.aws":             "",
		"abc.lambda-url.us-east-1.on.aws.evil":    "",
	} {
		if got, ok := operatorclient.FunctionURLRegion(host); got != want || ok != (want != "") {
			t.Errorf("FunctionURLRegion(%q) = %q, %v; want %q", host, got, ok, want)
		}
	}
}

// closeRecorder records that the transport closed the body it was given.
type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// TestTransportRefusesBeforeSending: a body over the limit, a host with no
// region known, credentials that cannot be had: nothing is sent, the
// error says why, and the body is closed.
func TestTransportRefusesBeforeSending(t *testing.T) {
	t.Parallel()
	alice, _ := iamlocal.NewIdentity("alice", "read")
	sent := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("a request was sent: %s", r.URL)
		return nil, errors.New("sent")
	})
	noCreds := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, errors.New("the SSO session has expired")
	})
	cases := []struct {
		name   string
		creds  aws.CredentialsProvider
		region string
		url    string
		body   string
		says   string
	}{
		{name: "body over 1 MiB", creds: provider(alice), region: "eu-west-1", url: "http://127.0.0.1:1/", body: strings.Repeat("x", operatorclient.MaxBodyBytes+1), says: "over 1 MiB"},
		{name: "no region", creds: provider(alice), url: "http://127.0.0.1:1/", body: "{}", says: "no region"},
		{name: "no credentials", creds: noCreds, region: "eu-west-1", url: "http://127.0.0.1:1/", body: "{}", says: "the SSO session has expired"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr, err := operatorclient.NewTransport(tc.creds, tc.region, sent)
			if err != nil {
				t.Fatal(err)
			}
			body := &closeRecorder{Reader: strings.NewReader(tc.body)}
			req, _ := http.NewRequest(http.MethodPost, tc.url, body)
			_, err = tr.RoundTrip(req)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want it to say %q", err, tc.says)
			}
			if !body.closed {
				t.Error("the request body was not closed")
			}
		})
	}
	if _, err := operatorclient.NewTransport(nil, "eu-west-1", nil); err == nil {
		t.Error("a transport without credentials was made")
	}
}

// TestCredentialsFromGetenv: what getenv yields is used (keys, token,
// region; a profile from the config file it names), not the process's
// environment alone, and a half-set pair of keys is an error.
func TestCredentialsFromGetenv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	config := filepath.Join(dir, "config")
	if err := os.WriteFile(config, []byte("[profile ops]\nregion = eu-central-1\naws_access_key_id = AKIAPROFILE\naws_secret_access_key = profile-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"AWS_CONFIG_FILE": config, "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials")}
	env := func(kv map[string]string) func(string) string {
		return func(k string) string {
			if v, ok := kv[k]; ok {
				return v
			}
			return files[k]
		}
	}
	cases := []struct {
		name               string
		env                map[string]string
		key, token, region string
		says               string
	}{
		{name: "keys", env: map[string]string{"AWS_ACCESS_KEY_ID": "ASIAENV", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SESSION_TOKEN": "tok", "AWS_REGION": "us-west-2"},
			key: "ASIAENV", token: "tok", region: "us-west-2"},
		{name: "default region", env: map[string]string{"AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "s", "AWS_DEFAULT_REGION": "sa-east-1"},
			key: "AKIAENV", region: "sa-east-1"},
		{name: "profile", env: map[string]string{"AWS_PROFILE": "ops"}, key: "AKIAPROFILE", region: "eu-central-1"},
		{name: "keys win over the profile", env: map[string]string{"AWS_PROFILE": "ops", "AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "s"},
			key: "AKIAENV", region: "eu-central-1"},
		{name: "unknown profile", env: map[string]string{"AWS_PROFILE": "nobody"}, says: "nobody"},
		{name: "key id alone", env: map[string]string{"AWS_ACCESS_KEY_ID": "AKIAENV"}, says: "without AWS_SECRET_ACCESS_KEY"},
		{name: "secret alone", env: map[string]string{"AWS_SECRET_ACCESS_KEY": "s"}, says: "without AWS_ACCESS_KEY_ID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			creds, region, err := operatorclient.Credentials(context.Background(), env(tc.env))
			if tc.says != "" {
				if err == nil || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("err = %v, want it to say %q", err, tc.says)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := creds.Retrieve(context.Background())
			if err != nil || got.AccessKeyID != tc.key || got.SessionToken != tc.token || region != tc.region {
				t.Fatalf("credentials %s/%s, region %q, %v; want %s/%s, %q", got.AccessKeyID, got.SessionToken, region, err, tc.key, tc.token, tc.region)
			}
		})
	}
}
