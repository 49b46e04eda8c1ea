// Package localsecrets serves a stand-in for AWS Secrets Manager on a
// loopback port, for the Lambda binaries run under the emulator: it answers
// GetSecretValue in the JSON 1.1 protocol the AWS SDK speaks, from values
// held in memory, so that a binary reads its secrets through its real SDK
// client, pointed here by AWS_ENDPOINT_URL_SECRETS_MANAGER (Env). It is how
// the local stack hands the migration function each role's secret, as the
// template's generated secrets are handed in AWS.
//
// There is no Secrets Manager server to run on this machine, so this one
// is written here, and it does as little as the binaries need: no
// signature is checked (it listens on the loopback only), no version but
// the current one is kept, and no other operation is served.
package localsecrets

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The fixed credentials the binaries sign their requests with; nothing
// checks them.
const (
	AccessKeyID     = "localsecrets"
	SecretAccessKey = "localsecrets-secret-key"
)

// Server is a running stand-in.
type Server struct {
	ln  net.Listener
	srv *http.Server

	mu     sync.Mutex
	values map[string]secret // by ARN and by name
	reads  map[string]int
}

type secret struct {
	arn, name, value string
	version          int
	created          time.Time
}

// Start serves on a free loopback port until Close.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("localsecrets: %w", err)
	}
	s := &Server{ln: ln, values: map[string]secret{}, reads: map[string]int{}}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Endpoint is the server's URL.
func (s *Server) Endpoint() string { return "http://" + s.ln.Addr().String() }

// Env is what a process needs to reach the server with the AWS SDK: the
// Secrets Manager endpoint and credentials to sign with.
func (s *Server) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL_SECRETS_MANAGER=" + s.Endpoint(),
		"AWS_ACCESS_KEY_ID=" + AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + SecretAccessKey,
	}
}

// Put sets the secret arn (an ARN, whose name is the part after
// "secret:") to value, as PutSecretValue would: a new current version.
func (s *Server) Put(arn, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := arn
	if i := strings.LastIndex(arn, ":secret:"); i >= 0 {
		name = arn[i+len(":secret:"):]
	}
	old := s.values[arn]
	sec := secret{arn: arn, name: name, value: value, version: old.version + 1, created: time.Now()}
	s.values[arn], s.values[name] = sec, sec
}

// Reads returns how many times the secret arn was read.
func (s *Server) Reads(arn string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[arn]
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// serve answers one request of the JSON 1.1 protocol: POST /, the operation
// in X-Amz-Target.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	op := r.Header.Get("X-Amz-Target")
	if r.Method != http.MethodPost || op != "secretsmanager.GetSecretValue" {
		fail(w, http.StatusBadRequest, "UnknownOperationException", "localsecrets serves GetSecretValue only, not "+op)
		return
	}
	var in struct{ SecretId string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		fail(w, http.StatusBadRequest, "InvalidRequestException", "the request is not JSON")
		return
	}
	s.mu.Lock()
	sec, ok := s.values[in.SecretId]
	if ok {
		s.reads[sec.arn]++
	}
	s.mu.Unlock()
	if !ok {
		fail(w, http.StatusBadRequest, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"ARN": sec.arn, "Name": sec.name, "SecretString": sec.value,
		"VersionId": fmt.Sprintf("v%d", sec.version), "VersionStages": []string{"AWSCURRENT"},
		"CreatedDate": float64(sec.created.UnixMilli()) / 1000,
	})
}

// fail writes an error as the SDK reads it (__type and message).
func fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
}
