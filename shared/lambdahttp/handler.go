package lambdahttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// ErrorWriter answers an error the way the application answers its own:
// status, body, log line and metrics. *receiver.Handler is one
// (WriteError), so what the adapter refuses itself and what panics are
// answered by the receiver's one status table, exactly as its own
// refusals.
type ErrorWriter interface {
	WriteError(w http.ResponseWriter, r *http.Request, err error)
}

// Handler adapts h to a Lambda handler function for API Gateway HTTP API v2
// events; pass the result to lambda.Start. ew answers what h never does:
//
//   - an event that cannot become a request: an *inbox.Error with cause
//     invalid_request, or unparsable_body for a body flagged base64 that
//     is not, written for a minimal request synthesized from the event
//     (method, path, headers, and the request id RequestID reads);
//   - a panic in h: an *inbox.Error with cause internal wrapping a
//     *PanicError (the value and the stack, for the log line), after
//     discarding whatever h had written.
//
// The returned function never returns an error and never panics. A Lambda
// error would reach the client as API Gateway's opaque 500 and, for a bad
// request, wrongly blame us, so every outcome is an HTTP response instead.
// Should ew itself panic, the answer is a fixed 503
// {"status":"unavailable","cause":"internal"}, logged through slog's
// default logger (the mains make it the JSON one).
//
// Handler panics if h or ew is nil, so the mistake shows at cold start
// rather than on every request.
func Handler(h http.Handler, ew ErrorWriter) func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	if h == nil || ew == nil {
		panic("lambdahttp: nil handler or error writer")
	}
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if ctx == nil {
			ctx = context.Background()
		}
		r, err := NewRequest(ctx, ev)
		if err != nil {
			return writeError(ew, synthesize(ctx, ev), refusal(err)).result(), nil
		}
		w := newResponseWriter()
		if perr := serve(h, w, r); perr != nil {
			return writeError(ew, r, perr).result(), nil
		}
		return w.result(), nil
	}
}

// PanicError is a panic recovered from a handler: its value and the stack
// where it happened, which the error writer's log line carries (LogAttrs)
// and the answer never does.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic's value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// LogAttrs are the attributes a log line about the panic carries beside
// its error: "panic" (the value) and "stack".
func (e *PanicError) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("panic", fmt.Sprint(e.Value)), slog.String("stack", string(e.Stack))}
}

// panicMessage is what the sender reads: fixed text that leaks nothing.
const panicMessage = "the request could not be handled; retry later"

// serve runs h and returns the panic it raised, as an *inbox.Error with
// cause internal wrapping a *PanicError, or nil.
func serve(h http.Handler, w http.ResponseWriter, r *http.Request) (perr *inbox.Error) {
	defer func() {
		if v := recover(); v != nil {
			perr = inbox.WrapError(inbox.CauseInternal, &PanicError{Value: v, Stack: debug.Stack()}, panicMessage)
		}
	}()
	h.ServeHTTP(w, r)
	return nil
}

// refusal is the error for an event NewRequest refused. The message is
// fixed text: the decoder's error would only add noise for the sender; it
// stays wrapped, for the log.
func refusal(err error) *inbox.Error {
	if errors.Is(err, ErrUnparsableBody) {
		return inbox.WrapError(inbox.CauseUnparsableBody, err, "the request body is flagged base64 but is not valid base64")
	}
	return inbox.WrapError(inbox.CauseInvalidRequest, err, "the request line could not be parsed")
}

// writeError has ew answer err into a fresh buffer. A writer that panics
// (a bug in the error path itself) still leaves a clean, retryable answer.
func writeError(ew ErrorWriter, r *http.Request, err error) (w *responseWriter) {
	defer func() {
		if v := recover(); v != nil {
			slog.Default().ErrorContext(r.Context(), "lambdahttp: the error writer panicked",
				"cause", inbox.CauseInternal, "request_id", RequestID(r), "err", err,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			w = newResponseWriter()
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.Header().Set("Retry-After", strconv.Itoa(5))
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"unavailable","cause":"internal"}` + "\n"))
		}
	}()
	w = newResponseWriter()
	ew.WriteError(w, r, err)
	return w
}

// synthesize builds the request an error writer gets for an event that is
// not a valid request: what is known of it, enough for a log line and a
// rejection record. The request id is in the context, where RequestID
// reads it for every request NewRequest builds (a header would let the
// client forge it). The body is not carried: it is never logged, and its
// size is enough for the record.
func synthesize(ctx context.Context, ev events.APIGatewayV2HTTPRequest) *http.Request {
	u, err := requestURL(ev) // the stage prefix removed, when the path parses
	if err != nil {
		u = &url.URL{Path: ev.RawPath, RawQuery: ev.RawQueryString}
	}
	r := &http.Request{
		Method:        ev.RequestContext.HTTP.Method,
		URL:           u,
		RequestURI:    ev.RawPath,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        make(http.Header),
		Body:          http.NoBody,
		ContentLength: int64(len(ev.Body)),
		Host:          ev.RequestContext.DomainName,
	}
	copyHeaders(r.Header, ev.Headers)
	if ip := ev.RequestContext.HTTP.SourceIP; ip != "" {
		r.RemoteAddr = net.JoinHostPort(ip, "0")
	}
	return r.WithContext(context.WithValue(ctx, requestIDKey{}, ev.RequestContext.RequestID))
}
