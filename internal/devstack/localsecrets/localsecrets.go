// Package localsecrets serves a stand-in for AWS Secrets Manager on a
// loopback port: GetSecretValue in the service's JSON 1.1 protocol (POST /,
// X-Amz-Target: secretsmanager.GetSecretValue, Content-Type:
// application/x-amz-json-1.1, errors as {"__type", "Message"}), from values
// held in memory. Processes read their secrets through their real AWS SDK
// client, pointed here by AWS_ENDPOINT_URL_SECRETS_MANAGER (Env): the local
// stack hands the Lambda binaries their secrets this way, and the tests
// (through internal/testkit/secretstest) the code under test, signing and
// HTTP included.
//
// There is no Secrets Manager server to run on this machine, so this one
// is written here, and it does what the code needs: versions (AWSCURRENT and
// AWSPREVIOUS, as a rotation leaves them), refusals (AccessDenied,
// ResourceNotFound) and a record of every read. It checks that a request is
// signed for the service, not the signature; it listens on the loopback
// only.
package localsecrets

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localendpoint"
)

// The fixed credentials the processes sign their requests with; nothing
// checks them.
const (
	AccessKeyID     = "localsecrets"
	SecretAccessKey = AccessKeyID + "-secret-key"
)

// Region and Account are what the ARNs Create makes say.
const (
	Region  = "eu-west-1"
	Account = "123456789012"
)

// Server is a running stand-in. Its methods are safe for concurrent use.
type Server struct {
	*localendpoint.Server

	mu sync.Mutex
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

// Start serves on a free loopback port until Close.
func Start() (*Server, error) {
	s := &Server{byID: map[string]*secret{}}
	srv, err := localendpoint.Start("AWS_ENDPOINT_URL_SECRETS_MANAGER", AccessKeyID, http.HandlerFunc(s.serve))
	if err != nil {
		return nil, err
	}
	s.Server = srv
	return s, nil
}

// Create stores a new secret whose current value is value and returns its
// ARN. Its name is name with a random suffix, so that parallel users never
// share a secret; the ARN ends as the service's do, with six characters.
func (s *Server) Create(name, value string) string {
	name = name + "-" + randomHex(4)
	arn := fmt.Sprintf("arn:aws:secretsmanager:%s:%s:secret:%s-%s", Region, Account, name, randomHex(3))
	s.Put(arn, value)
	return arn
}

// Put makes value the current version of the secret arn, the one before
// becoming AWSPREVIOUS (what PutSecretValue, or a rotation's last step,
// does), and returns the new version's id; a secret not stored yet is
// created under that ARN, its name the part after "secret:".
func (s *Server) Put(arn, value string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec, ok := s.byID[arn]
	if !ok {
		name := arn
		if i := strings.LastIndex(arn, ":secret:"); i >= 0 {
			name = arn[i+len(":secret:"):]
		}
		sec = &secret{arn: arn, name: name}
		s.byID[arn], s.byID[name] = sec, sec
	}
	id := uuid.NewString()
	sec.versions = append(sec.versions, version{id: id, value: value, created: time.Now()})
	return id
}

// Has reports whether a secret of this ARN or name is stored.
func (s *Server) Has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.byID[id]
	return ok
}

// Deny makes every read of the secret fail as the service answers a caller
// whose policy does not allow it (AccessDeniedException). It reports
// whether the secret exists.
func (s *Server) Deny(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec, ok := s.byID[id]
	if ok {
		sec.denied = true
	}
	return ok
}

// Reads returns how many reads of the secret the server answered,
// refusals included.
func (s *Server) Reads(id string) int { return len(s.ReadTimes(id)) }

// ReadTimes returns when each read of the secret arrived, oldest first.
func (s *Server) ReadTimes(id string) []time.Time {
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
	// another (a wrong endpoint variable) is a bug in the caller's set-up.
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
	w.Header().Set("X-Amzn-Requestid", uuid.NewString())
	_ = json.NewEncoder(w).Encode(getSecretValueOutput{
		ARN: sec.arn, Name: sec.name, VersionID: v.id, SecretString: v.value, VersionStages: stages,
		CreatedDate: float64(v.created.UnixMilli()) / 1000,
	})
}

// fail answers an error as the JSON protocol does: the type in __type
// (the SDK turns it into the error's code) and a message.
func fail(w http.ResponseWriter, status int, typ, message string) {
	w.Header().Set("Content-Type", jsonProtocol)
	w.Header().Set("X-Amzn-Requestid", uuid.NewString())
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "Message": message})
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails; see crypto/rand.Read
	return hex.EncodeToString(b)
}
