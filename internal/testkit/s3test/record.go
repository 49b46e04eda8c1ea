package s3test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// Request is what a Recorder noted of one request: its method and headers
// as the SDK sent them.
type Request struct {
	Method string
	Header http.Header
}

// Recorder is a reverse proxy in front of an S3 server that notes every
// request it passes on, so that a test sees what the SDK actually sends
// through the one setting a user has for it, the endpoint. The Host header
// is passed on unchanged, so signatures still verify.
type Recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []Request
}

// Record starts a Recorder in front of endpoint for this test; the test's
// cleanup closes it. Point a blobstore.Config's Endpoint at its URL.
func Record(t testing.TB, endpoint string) *Recorder {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatalf("s3test: endpoint %q: %v", endpoint, err)
	}
	r := &Recorder{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.reqs = append(r.reqs, Request{Method: req.Method, Header: req.Header.Clone()})
		r.mu.Unlock()
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the endpoint to give the client under test.
func (r *Recorder) URL() string { return r.srv.URL }

// Requests returns the requests passed on so far, oldest first.
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}
