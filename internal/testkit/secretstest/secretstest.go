// Package secretstest is a stand-in for AWS Secrets Manager that the real
// aws-sdk-go-v2 client talks to over HTTP: GetSecretValue in the service's
// JSON protocol (POST /, X-Amz-Target: secretsmanager.GetSecretValue,
// Content-Type: application/x-amz-json-1.1, errors as {"__type",
// "Message"}), so that code under test reads its secrets through its
// production path, SDK, signing and HTTP included. Only the SDK's
// credentials are fake; the stand-in checks that requests are signed for
// the service, not the signature.
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
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Region and Account are what the stand-in's ARNs say; a test's
// AWS_REGION may be any region, as the SDK only signs with it.
const (
	Region  = "eu-west-1"
	Account = "123456789012"
)

// The SDK's own variables Use sets: the service's endpoint and keys, and
// files that do not exist, so the machine's AWS configuration (a profile,
// a region, SSO) cannot leak into a test.
var sdkEnv = map[string]string{
	"AWS_ACCESS_KEY_ID":           "AKIDSECRETSTEST",
	"AWS_SECRET_ACCESS_KEY":       "secretstest-not-a-secret",
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
	shared = Start()
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

// Server is the stand-in. Its methods are safe for concurrent use.
type Server struct {
	// URL is the endpoint, for AWS_ENDPOINT_URL_SECRETS_MANAGER.
	URL string

	srv *httptest.Server
	mu  sync.Mutex
	// byID finds a secret by its ARN or its name, as the service does.
	byID map[string]*secret
}

type secret struct {
	arn, name string
	versions  []version // the last is AWSCURRENT, the one before AWSPREVIOUS
	fetches   []time.Time
	denied    bool
}

type version struct {
	id      string
	value   string
	created time.Time
}

// Start starts a stand-in of its own, which Close stops. Most tests want
// Shared: the SDK only finds the one Use started.
func Start() *Server {
	s := &Server{byID: map[string]*secret{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the stand-in.
func (s *Server) Close() { s.srv.Close() }

// Create stores a new secret whose AWSCURRENT value is value and returns
// its ARN. The name is name with a random suffix, so parallel tests never
// share a secret; the ARN ends as the service's do, with six characters.
func (s *Server) Create(t testing.TB, name, value string) string {
	t.Helper()
	name = name + "-" + randomHex(4)
	arn := fmt.Sprintf("arn:aws:secretsmanager:%s:%s:secret:%s-%s", Region, Account, name, randomHex(3))
	sec := &secret{arn: arn, name: name, versions: []version{{id: uuid(), value: value, created: time.Now()}}}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID[arn], s.byID[name] = sec, sec
	return arn
}

// Put makes value the secret's AWSCURRENT version, the one before
// becoming AWSPREVIOUS: what a rotation's last step (finishSecret) does.
func (s *Server) Put(t testing.TB, id, value string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	sec, ok := s.byID[id]
	if !ok {
		t.Fatalf("secretstest: no secret %s", id)
	}
	sec.versions = append(sec.versions, version{id: uuid(), value: value, created: time.Now()})
}

// Deny makes every GetSecretValue of the secret fail as the service
// answers a caller whose policy does not allow it (AccessDeniedException).
func (s *Server) Deny(t testing.TB, id string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	sec, ok := s.byID[id]
	if !ok {
		t.Fatalf("secretstest: no secret %s", id)
	}
	sec.denied = true
}

// Fetches returns how many GetSecretValue requests for the secret the
// stand-in has answered, refusals included.
func (s *Server) Fetches(id string) int { return len(s.FetchTimes(id)) }

// FetchTimes returns when the stand-in received each GetSecretValue
// request for the secret, oldest first.
func (s *Server) FetchTimes(id string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec, ok := s.byID[id]; ok {
		return append([]time.Time(nil), sec.fetches...)
	}
	return nil
}

// getSecretValueInput is the request's body (API reference, GetSecretValue).
type getSecretValueInput struct {
	SecretID     string `json:"SecretId"`
	VersionID    string `json:"VersionId"`
	VersionStage string `json:"VersionStage"`
}

// getSecretValueOutput is the answer's body; CreatedDate is in epoch
// seconds, as the JSON protocol writes timestamps.
type getSecretValueOutput struct {
	ARN           string   `json:"ARN"`
	Name          string   `json:"Name"`
	VersionID     string   `json:"VersionId"`
	SecretString  string   `json:"SecretString"`
	VersionStages []string `json:"VersionStages"`
	CreatedDate   float64  `json:"CreatedDate"`
}

const jsonProtocol = "application/x-amz-json-1.1"

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/" || r.Header.Get("Content-Type") != jsonProtocol {
		fail(w, http.StatusBadRequest, "SerializationException", "expected POST / with Content-Type "+jsonProtocol)
		return
	}
	// The SDK signs with SigV4 for the service; a request signed for
	// another (a wrong endpoint variable) is a bug in the test's set-up.
	if auth := r.Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || !strings.Contains(auth, "/secretsmanager/aws4_request") {
		fail(w, http.StatusBadRequest, "IncompleteSignatureException", "the request is not signed for secretsmanager")
		return
	}
	if target := r.Header.Get("X-Amz-Target"); target != "secretsmanager.GetSecretValue" {
		fail(w, http.StatusBadRequest, "UnknownOperationException", "the stand-in answers secretsmanager.GetSecretValue only, not "+target)
		return
	}
	var in getSecretValueInput
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.SecretID == "" {
		fail(w, http.StatusBadRequest, "InvalidParameterException", "SecretId is required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sec, ok := s.byID[in.SecretID]
	if !ok {
		fail(w, http.StatusBadRequest, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
		return
	}
	sec.fetches = append(sec.fetches, time.Now())
	if sec.denied {
		fail(w, http.StatusBadRequest, "AccessDeniedException", "User is not authorized to perform: secretsmanager:GetSecretValue on resource: "+sec.arn)
		return
	}
	n := len(sec.versions) - 1
	stages := []string{"AWSCURRENT"}
	switch in.VersionStage {
	case "", "AWSCURRENT":
	case "AWSPREVIOUS":
		if n--; n < 0 {
			fail(w, http.StatusBadRequest, "ResourceNotFoundException", "Secrets Manager can't find the specified secret value for staging label: AWSPREVIOUS")
			return
		}
		stages = []string{"AWSPREVIOUS"}
	default:
		fail(w, http.StatusBadRequest, "ResourceNotFoundException", "Secrets Manager can't find the specified secret value for staging label: "+in.VersionStage)
		return
	}
	v := sec.versions[n]
	if in.VersionID != "" && in.VersionID != v.id {
		fail(w, http.StatusBadRequest, "ResourceNotFoundException", "Secrets Manager can't find the specified secret value for VersionId: "+in.VersionID)
		return
	}
	w.Header().Set("Content-Type", jsonProtocol)
	w.Header().Set("X-Amzn-Requestid", uuid())
	_ = json.NewEncoder(w).Encode(getSecretValueOutput{
		ARN: sec.arn, Name: sec.name, VersionID: v.id, SecretString: v.value, VersionStages: stages,
		CreatedDate: float64(v.created.UnixMilli()) / 1000,
	})
}

// fail answers an error as the JSON protocol does: the type in __type
// (the SDK turns it into the error's code) and a message.
func fail(w http.ResponseWriter, status int, typ, message string) {
	w.Header().Set("Content-Type", jsonProtocol)
	w.Header().Set("X-Amzn-Requestid", uuid())
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "Message": message})
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails; see crypto/rand.Read
	return hex.EncodeToString(b)
}

// uuid is a version identifier shaped as the service's (32 hex digits and
// dashes); it need not be a valid UUID.
func uuid() string {
	h := randomHex(16)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
