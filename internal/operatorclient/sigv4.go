// Package operatorclient is how webhookctl reaches a deployed stack's
// operator API: it finds the stack's two function URLs (Stack, from the
// stack's outputs) and signs each request with the operator's own AWS
// credentials (Transport, SigV4 for service lambda), which Lambda verifies
// before the operator function sees the request (the function URLs'
// AuthType is AWS_IAM).
package operatorclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// signingService is the service a function URL's signature names.
const signingService = "lambda"

// MaxBodyBytes bounds a request body the transport signs: the operator
// API's requests are small JSON documents, and the body is held in memory
// to be hashed.
const MaxBodyBytes = 1 << 20

// ErrBodyTooLarge is returned for a request body over MaxBodyBytes.
var ErrBodyTooLarge = errors.New("operatorclient: request body over 1 MiB")

// functionURLHost is a Lambda function URL's host: <url-id>.lambda-url.<region>.on.aws.
var functionURLHost = regexp.MustCompile(`^[a-z0-9]+\.lambda-url\.([a-z0-9-]+)\.on\.aws$`)

// FunctionURLRegion returns the region of a Lambda function URL's host
// (a port, if any, ignored), and false for any other host.
func FunctionURLRegion(host string) (string, bool) {
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h
	}
	m := functionURLHost.FindStringSubmatch(strings.ToLower(host))
	if m == nil {
		return "", false
	}
	return m[1], true
}

// Transport is an http.RoundTripper that signs every request with
// Signature Version 4 for service lambda, as a function URL with AuthType
// AWS_IAM requires: the body hashed (and the hash sent as
// X-Amz-Content-Sha256), the credentials retrieved per request (the SDK's
// providers cache and refresh them), the region the function URL's host
// names, else the transport's.
type Transport struct {
	creds  aws.CredentialsProvider
	region string
	base   http.RoundTripper
	signer *v4.Signer
}

// NewTransport returns a transport signing with creds; region is for
// hosts that are not function URLs (a local stand-in); base sends the
// signed request (nil is http.DefaultTransport).
func NewTransport(creds aws.CredentialsProvider, region string, base http.RoundTripper) (*Transport, error) {
	if creds == nil {
		return nil, errors.New("operatorclient: no AWS credentials provider")
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{creds: creds, region: region, base: base, signer: v4.NewSigner()}, nil
}

// RoundTrip signs a copy of req and sends it. As the RoundTripper contract
// asks, req is not changed and its body is closed.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	region, ok := FunctionURLRegion(req.URL.Host)
	if !ok {
		region = t.region
	}
	if region == "" {
		return nil, fmt.Errorf("operatorclient: no region to sign %s for: %s is not a function URL and no region is set (AWS_REGION)", signingService, req.URL.Host)
	}
	ctx := req.Context()
	creds, err := t.creds.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("operatorclient: AWS credentials: %w", err)
	}

	signed := req.Clone(ctx)
	signed.Header.Del("Authorization")
	signed.Header.Del("X-Amz-Security-Token")
	signed.ContentLength = int64(len(body))
	if len(body) == 0 {
		signed.Body, signed.GetBody = nil, nil
		if req.Body != nil {
			signed.Body = http.NoBody
		}
	} else {
		signed.Body = io.NopCloser(bytes.NewReader(body))
		signed.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	signed.Header.Set("X-Amz-Content-Sha256", hash)
	if err := t.signer.SignHTTP(ctx, creds, signed, hash, signingService, region, time.Now()); err != nil {
		return nil, fmt.Errorf("operatorclient: sign %s %s: %w", req.Method, req.URL.Redacted(), err)
	}
	return t.base.RoundTrip(signed)
}

// readBody reads and closes req's body, refusing one over MaxBodyBytes.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	body, err := io.ReadAll(io.LimitReader(req.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("operatorclient: read the request body: %w", err)
	}
	if len(body) > MaxBodyBytes {
		return nil, ErrBodyTooLarge
	}
	return body, nil
}

// LoadConfig loads the AWS configuration as the AWS CLI would: the SDK's
// default chain (environment, shared config and credentials files,
// profiles, SSO, web identity, container and instance roles), except that
// what getenv yields wins over the process environment the SDK reads by
// itself: AWS_ACCESS_KEY_ID with AWS_SECRET_ACCESS_KEY (and
// AWS_SESSION_TOKEN), AWS_PROFILE, AWS_REGION (else AWS_DEFAULT_REGION),
// AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE and AWS_ENDPOINT_URL. So a
// command run with its own environment (the tests run several at once in
// one process) signs with its own credentials. getenv nil is os.Getenv.
func LoadConfig(ctx context.Context, getenv func(string) string) (aws.Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var opts []func(*config.LoadOptions) error
	id, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	switch {
	case id != "" && secret != "":
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret, getenv("AWS_SESSION_TOKEN"))))
	case id != "":
		return aws.Config{}, errors.New("operatorclient: AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY")
	case secret != "":
		return aws.Config{}, errors.New("operatorclient: AWS_SECRET_ACCESS_KEY is set without AWS_ACCESS_KEY_ID")
	}
	if p := getenv("AWS_PROFILE"); p != "" {
		opts = append(opts, config.WithSharedConfigProfile(p))
	}
	if f := getenv("AWS_CONFIG_FILE"); f != "" {
		opts = append(opts, config.WithSharedConfigFiles([]string{f}))
	}
	if f := getenv("AWS_SHARED_CREDENTIALS_FILE"); f != "" {
		opts = append(opts, config.WithSharedCredentialsFiles([]string{f}))
	}
	region := getenv("AWS_REGION")
	if region == "" {
		region = getenv("AWS_DEFAULT_REGION")
	}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	if e := getenv("AWS_ENDPOINT_URL"); e != "" {
		opts = append(opts, config.WithBaseEndpoint(e))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("operatorclient: load the AWS configuration: %w", err)
	}
	if cfg.Credentials == nil {
		return aws.Config{}, errors.New("operatorclient: no AWS credentials: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	return cfg, nil
}

// Credentials returns the credentials provider and the region LoadConfig
// finds (the region may be empty: a function URL names its own).
func Credentials(ctx context.Context, getenv func(string) string) (aws.CredentialsProvider, string, error) {
	cfg, err := LoadConfig(ctx, getenv)
	if err != nil {
		return nil, "", err
	}
	return cfg.Credentials, cfg.Region, nil
}
