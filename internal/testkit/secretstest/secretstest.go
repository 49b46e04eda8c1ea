// Package secretstest gives tests the Secrets Manager stand-in of
// internal/devstack/localsecrets, which the real aws-sdk-go-v2 client talks
// to over HTTP, so that code under test reads its secrets through its
// production path, SDK, signing and HTTP included. Only the SDK's
// credentials are fake.
//
// The SDK finds the stand-in through the variables it reads from the
// process (AWS_ENDPOINT_URL_SECRETS_MANAGER and fake keys), so one stand-in
// serves the whole test process: Use, from TestMain, starts it and sets
// them. Tests run in parallel, each with secrets of its own (Create makes
// a unique name), and give AWS_REGION in their own environment as a
// Lambda's has it.
//
//	func TestMain(m *testing.M) { secretstest.Use(); pgtest.Main(m) }
//
// Only _test.go files should import it.
package secretstest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localsecrets"
)

// Region and Account are what the stand-in's ARNs say; a test's
// AWS_REGION may be any region, as the SDK only signs with it.
const (
	Region  = localsecrets.Region
	Account = localsecrets.Account
)

// The SDK's own variables Use sets: the service's keys, and files that do
// not exist, so the machine's AWS configuration (a profile, a region, SSO)
// cannot leak into a test.
var sdkEnv = map[string]string{
	"AWS_ACCESS_KEY_ID":           localsecrets.AccessKeyID,
	"AWS_SECRET_ACCESS_KEY":       localsecrets.SecretAccessKey,
	"AWS_EC2_METADATA_DISABLED":   "true",
	"AWS_CONFIG_FILE":             filepath.Join(os.TempDir(), "secretstest-no-such-config"),
	"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(os.TempDir(), "secretstest-no-such-credentials"),
}

// sdkUnset are the SDK's variables a developer's shell may hold that would
// change what a test sees: its region must come from the test's own
// environment (so a test can leave it out), its keys are the fake ones.
var sdkUnset = []string{"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL"}

var (
	shared    *Server
	sharedMu  sync.Mutex
	useCalled bool
)

// Use starts the process's stand-in and points the AWS SDK at it through
// the process environment. Call it from TestMain before m.Run, while no
// test runs: the environment is the process's.
func Use() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if useCalled {
		return
	}
	useCalled = true
	srv, err := localsecrets.Start()
	if err != nil {
		panic(err)
	}
	shared = &Server{Server: srv, URL: srv.Endpoint()}
	for k, v := range sdkEnv {
		os.Setenv(k, v)
	}
	for _, k := range sdkUnset {
		os.Unsetenv(k)
	}
	os.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", shared.URL)
}

// Shared returns the stand-in Use started, failing t when TestMain did
// not call Use.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		t.Fatal("secretstest: call secretstest.Use() from TestMain, which points the AWS SDK at the stand-in")
	}
	return shared
}

// Server is the stand-in, with a test's failures for a secret that is not
// there.
type Server struct {
	*localsecrets.Server
	// URL is the endpoint, for AWS_ENDPOINT_URL_SECRETS_MANAGER.
	URL string
}

// Create stores a new secret whose current value is value and returns its
// ARN (a unique name, so parallel tests never share one).
func (s *Server) Create(t testing.TB, name, value string) string {
	t.Helper()
	return s.Server.Create(name, value)
}

// Put makes value the secret's AWSCURRENT version, the one before becoming
// AWSPREVIOUS: what a rotation's last step (finishSecret) does.
func (s *Server) Put(t testing.TB, id, value string) {
	t.Helper()
	if !s.Has(id) {
		t.Fatalf("secretstest: no secret %s", id)
	}
	s.Server.Put(id, value)
}

// Deny makes every GetSecretValue of the secret fail as the service
// answers a caller whose policy does not allow it (AccessDeniedException).
func (s *Server) Deny(t testing.TB, id string) {
	t.Helper()
	if !s.Server.Deny(id) {
		t.Fatalf("secretstest: no secret %s", id)
	}
}

// Fetches returns how many GetSecretValue requests for the secret the
// stand-in has answered, refusals included.
func (s *Server) Fetches(id string) int { return s.Reads(id) }

// FetchTimes returns when each GetSecretValue request for the secret
// arrived, oldest first.
func (s *Server) FetchTimes(id string) []time.Time { return s.ReadTimes(id) }
