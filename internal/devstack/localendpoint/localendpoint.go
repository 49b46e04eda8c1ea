// Package localendpoint serves a local stand-in of an AWS service's API on
// a free loopback port: what the dev stack's stand-ins (Lambda's Invoke,
// EventBridge Scheduler, Secrets Manager) share. Each is reached by the
// AWS SDK through its service's endpoint variable
// (AWS_ENDPOINT_URL_<SERVICE>) and fixed credentials that nothing checks:
// the SDK signs every request and refuses to without them.
package localendpoint

import (
	"fmt"
	"net"
	"net/http"
	"time"
)

// Server is a stand-in's listener and HTTP server.
type Server struct {
	ln     net.Listener
	srv    *http.Server
	envVar string
	keyID  string
}

// Start serves h on a free loopback port until Close. envVar is the SDK's
// endpoint variable for the service (AWS_ENDPOINT_URL_LAMBDA), keyID the
// access key id Env gives (its secret is keyID + "-secret-key"), so that a
// request in a log says which stand-in it was signed for.
func Start(envVar, keyID string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyID, err)
	}
	s := &Server{ln: ln, envVar: envVar, keyID: keyID}
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Endpoint is the server's URL, for the endpoint variable or an SDK
// client's BaseEndpoint.
func (s *Server) Endpoint() string { return "http://" + s.ln.Addr().String() }

// Env is what a process needs to reach the server with the AWS SDK: the
// service's endpoint variable and credentials to sign with.
func (s *Server) Env() []string {
	return []string{
		s.envVar + "=" + s.Endpoint(),
		"AWS_ACCESS_KEY_ID=" + s.keyID, "AWS_SECRET_ACCESS_KEY=" + SecretKey(s.keyID),
	}
}

// SecretKey is the secret access key that goes with keyID.
func SecretKey(keyID string) string { return keyID + "-secret-key" }

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }
