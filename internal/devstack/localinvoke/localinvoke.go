// Package localinvoke serves a stand-in for AWS Lambda's Invoke API on a
// loopback port (POST /2015-03-31/functions/{FunctionName}/invocations, in
// the service's REST protocol), so that a function's real SDK client can
// start another function here as it does in AWS: the receiver's wake-up of
// the processor (shared/wake, invoke mode), and the migration front's call
// of the in-VPC migrator. Processes are pointed here by
// AWS_ENDPOINT_URL_LAMBDA (Env).
//
// There is no Lambda service to run on this machine. This one does what
// the callers rely on, as AWS documents it
// (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html):
//
//   - X-Amz-Invocation-Type Event queues the payload and answers 202 at
//     once; the function runs later, one invocation per event, and a
//     failed invocation is retried twice (Lambda's asynchronous retries),
//     with a pause between tries;
//   - RequestResponse (the default) runs the function and answers 200 with
//     its result, or with X-Amz-Function-Error: Unhandled and the error
//     document when it failed;
//   - an unknown function answers 404 ResourceNotFoundException.
//
// The functions are Go functions registered by name (a function name or
// the last part of an ARN finds them), which the dev stack and the tests
// bind to handlers in the process or to a binary under the Lambda Runtime
// Interface Emulator. The local stand-ins of the services that invoke
// functions asynchronously (EventBridge's rules, EventBridge Scheduler's
// schedules) hand their events over with InvokeEvent, as those services
// hand them to Lambda, so that every invocation of a local stack is
// recorded in one place, with who made it (Invocation.Via). It checks that
// a request is signed for the service, not the signature; it listens on
// the loopback only.
package localinvoke

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localendpoint"
)

// The fixed credentials processes sign their requests with; nothing checks
// them.
const (
	AccessKeyID     = "localinvoke"
	SecretAccessKey = AccessKeyID + "-secret-key"
)

// Function runs one invocation: payload in, result out.
type Function func(ctx context.Context, payload []byte) ([]byte, error)

// ViaAPI is Invocation.Via for a request to the Invoke API.
const ViaAPI = "lambda:Invoke"

// Invocation is one invocation's record.
type Invocation struct {
	Function string
	// Via is who invoked: ViaAPI for a request to the Invoke API (a
	// function's SDK client), or what InvokeEvent was told.
	Via string
	// Async is true for an Event invocation.
	Async   bool
	Payload []byte
	// Output is the last try's result.
	Output []byte
	// Received is when the request arrived, Started when the function
	// started (its first try), Finished when its last try ended (zero
	// while it is queued or running, or will be tried again).
	Received, Started, Finished time.Time
	// Tries is how many times it ran; Err is the last try's error.
	Tries int
	Err   error
}

// Options configures Start.
type Options struct {
	// RetryPause is the pause before an asynchronous invocation's retry;
	// default 100 ms (AWS waits a minute, then two: the dev stack has no
	// reason to).
	RetryPause time.Duration
}

// Server is a running stand-in. Its methods are safe for concurrent use.
type Server struct {
	*localendpoint.Server
	opts Options
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu    sync.Mutex
	funcs map[string]Function
	log   []*Invocation
}

// Start serves on a free loopback port until Close.
func Start(opts Options) (*Server, error) {
	if opts.RetryPause <= 0 {
		opts.RetryPause = 100 * time.Millisecond
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{opts: opts, ctx: ctx, stop: stop, funcs: map[string]Function{}}
	srv, err := localendpoint.Start("AWS_ENDPOINT_URL_LAMBDA", AccessKeyID, http.HandlerFunc(s.serve))
	if err != nil {
		stop()
		return nil, err
	}
	s.Server = srv
	return s, nil
}

// Register makes fn the function called name.
func (s *Server) Register(name string, fn Function) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.funcs[name] = fn
}

// Unregister deletes the function called name, as a stack's deletion
// does: later invocations find no such function.
func (s *Server) Unregister(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.funcs, name)
}

// InvokeEvent hands the function id (a name or an ARN) an event, as a
// service that invokes functions asynchronously does (EventBridge's
// rules, EventBridge Scheduler, S3): the invocation is recorded as an
// Event one made via via, queued, run and retried as an Event request
// to the Invoke API is. The error, which the service would get, is for
// a function that does not exist.
// https://docs.aws.amazon.com/lambda/latest/dg/invocation-async.html
func (s *Server) InvokeEvent(id string, payload []byte, via string) error {
	name, ok := nameOf(id)
	if !ok {
		return fmt.Errorf("localinvoke: %q is not a function name or ARN", id)
	}
	s.mu.Lock()
	fn, found := s.funcs[name]
	s.mu.Unlock()
	if !found {
		return fmt.Errorf("localinvoke: ResourceNotFoundException: Function not found: %s", name)
	}
	inv := &Invocation{Function: name, Via: via, Async: true, Payload: payload, Received: time.Now()}
	s.mu.Lock()
	s.log = append(s.log, inv)
	s.mu.Unlock()
	s.wg.Add(1)
	go s.runAsync(inv, fn)
	return nil
}

// Close stops serving, cancels the running invocations and waits for them.
func (s *Server) Close() error {
	err := s.Server.Close()
	s.stop()
	s.wg.Wait()
	return err
}

// Invocations returns a copy of the records so far, oldest first.
func (s *Server) Invocations() []Invocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Invocation, len(s.log))
	for i, inv := range s.log {
		out[i] = *inv
	}
	return out
}

// asyncTries is how often Lambda runs a failing asynchronous invocation:
// the first try and two retries.
const asyncTries = 3

// maxPayload is Lambda's request payload limit: 6 MB synchronous, 1 MB
// (since 2025; 256 KB before) asynchronous. The stand-in takes the larger.
const maxPayload = 6 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	name, ok := functionName(r.URL.Path)
	if r.Method != http.MethodPost || !ok {
		writeError(w, http.StatusNotFound, "UnknownOperationException", "only Invoke is served here")
		return
	}
	if !strings.Contains(r.Header.Get("Authorization"), "/lambda/aws4_request") {
		writeError(w, http.StatusForbidden, "MissingAuthenticationTokenException", "the request is not signed for lambda")
		return
	}
	s.mu.Lock()
	fn, found := s.funcs[name]
	s.mu.Unlock()
	if !found {
		writeError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+name)
		return
	}
	payload, err := io.ReadAll(io.LimitReader(r.Body, maxPayload+1))
	if err != nil || len(payload) > maxPayload {
		writeError(w, http.StatusRequestEntityTooLarge, "RequestTooLargeException", "the request payload is too large or unreadable")
		return
	}
	inv := &Invocation{Function: name, Via: ViaAPI, Payload: payload, Received: time.Now()}
	s.mu.Lock()
	s.log = append(s.log, inv)
	s.mu.Unlock()

	switch typ := r.Header.Get("X-Amz-Invocation-Type"); typ {
	case "Event":
		inv.Async = true
		s.wg.Add(1)
		go s.runAsync(inv, fn)
		w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("local-%d", inv.Received.UnixNano()))
		w.WriteHeader(http.StatusAccepted)
	case "", "RequestResponse":
		out, err := s.try(r.Context(), inv, fn)
		s.finish(inv)
		if err != nil {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			out, _ = json.Marshal(map[string]string{"errorType": "error", "errorMessage": err.Error()})
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(out)
	default:
		writeError(w, http.StatusBadRequest, "InvalidParameterValueException", "invocation type "+typ+" is not served here")
	}
}

func (s *Server) runAsync(inv *Invocation, fn Function) {
	defer s.wg.Done()
	defer s.finish(inv)
	for try := 0; try < asyncTries; try++ {
		if try > 0 {
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(s.opts.RetryPause):
			}
		}
		if _, err := s.try(s.ctx, inv, fn); err == nil || s.ctx.Err() != nil {
			return
		}
	}
}

func (s *Server) finish(inv *Invocation) {
	s.mu.Lock()
	inv.Finished = time.Now()
	s.mu.Unlock()
}

func (s *Server) try(ctx context.Context, inv *Invocation, fn Function) ([]byte, error) {
	s.mu.Lock()
	if inv.Tries == 0 {
		inv.Started = time.Now()
	}
	inv.Tries++
	s.mu.Unlock()
	out, err := fn(ctx, inv.Payload)
	s.mu.Lock()
	inv.Output, inv.Err = out, err
	s.mu.Unlock()
	return out, err
}

// functionName returns the function the Invoke path names: a name, or the
// name part of an ARN (arn:aws:lambda:region:account:function:name[:qualifier]).
func functionName(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/2015-03-31/functions/")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "/invocations")
	if !ok {
		return "", false
	}
	return nameOf(name)
}

// nameOf returns the function id names: id itself, or the name part of an
// ARN (arn:aws:lambda:region:account:function:name[:qualifier]).
func nameOf(id string) (string, bool) {
	if id == "" {
		return "", false
	}
	if strings.HasPrefix(id, "arn:") {
		parts := strings.Split(id, ":")
		if len(parts) < 7 || parts[6] == "" {
			return "", false
		}
		return parts[6], true
	}
	return id, true
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Type": "User", "message": msg})
}
