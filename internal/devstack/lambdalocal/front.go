package lambdalocal

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// maxRequestBytes mirrors API Gateway's 10 MB payload limit.
const maxRequestBytes = 10 << 20

// Route binds a template HttpApi route to the emulator serving it.
type Route struct {
	Method   string // "POST", or "ANY"
	Path     string // "/webhooks/{source}"
	Function *Emulator
}

// NewFront returns the local API Gateway: an http.Handler that turns each
// request matching a route into a payload 2.0 event, invokes the function
// and writes its response back, as API Gateway's HTTP API does.
func NewFront(routes []Route, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range routes {
		pattern := rt.Path
		if rt.Method != "" && !strings.EqualFold(rt.Method, "ANY") {
			pattern = strings.ToUpper(rt.Method) + " " + rt.Path
		}
		routeKey := strings.ToUpper(rt.Method) + " " + rt.Path
		fn := rt.Function
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			serveRoute(w, r, routeKey, fn, log)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// API Gateway's own answer for an unmatched route.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"message":"Not Found"}`)
	})
	return mux
}

func serveRoute(w http.ResponseWriter, r *http.Request, routeKey string, fn *Emulator, log *slog.Logger) {
	ev, err := NewEvent(r, routeKey)
	if err != nil {
		WriteResponse(w, TooLarge)
		return
	}
	payload, _ := json.Marshal(ev)
	out, err := fn.Invoke(r.Context(), payload)
	if err != nil {
		// API Gateway answers a failed integration with a bare 500.
		log.Error("local API: invocation failed", "function", fn.Name, "err", err)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"message":"Internal Server Error"}`)
		return
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode == 0 {
		log.Error("local API: the function's response is not an API Gateway v2 response", "function", fn.Name)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	WriteResponse(w, resp)
}

// WriteResponse writes a function's API Gateway v2 response to w as API
// Gateway does: its headers, multi-value headers and cookies, and its
// body, decoded when it is flagged base64 (a 500 when it is not valid
// base64).
func WriteResponse(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) {
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// ErrTooLarge is NewEvent's error for a body over API Gateway's payload
// limit, which API Gateway answers 413 without invoking the function;
// any other error of NewEvent's is the request's body failing to read.
var ErrTooLarge = errors.New("request too large")

// TooLarge is API Gateway's own answer to a request over its payload
// limit (ErrTooLarge).
var TooLarge = events.APIGatewayV2HTTPResponse{
	StatusCode: http.StatusRequestEntityTooLarge,
	Headers:    map[string]string{"Content-Type": "application/json"},
	Body:       `{"message":"Request Entity Too Large"}`,
}

// NewEvent builds the API Gateway HTTP API (payload 2.0) event for r as the
// real service does: lowercase headers with repeated ones comma-joined,
// cookies apart, and the body base64-encoded so any bytes arrive unchanged.
func NewEvent(r *http.Request, routeKey string) (events.APIGatewayV2HTTPRequest, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
	if err != nil {
		return events.APIGatewayV2HTTPRequest{}, err
	}
	if len(body) > maxRequestBytes {
		return events.APIGatewayV2HTTPRequest{}, fmt.Errorf("%w: body over %d bytes", ErrTooLarge, maxRequestBytes)
	}
	headers := map[string]string{}
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			continue
		}
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	headers["host"] = r.Host
	headers["content-length"] = fmt.Sprint(len(body))
	var cookies []string
	for _, c := range r.Cookies() {
		cookies = append(cookies, c.String())
	}
	now := time.Now().UTC()
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	params := map[string]string{}
	if strings.Contains(routeKey, "{source}") {
		params["source"] = r.PathValue("source")
	}
	return events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       routeKey,
		RawPath:        r.URL.EscapedPath(),
		RawQueryString: r.URL.RawQuery,
		Cookies:        cookies,
		Headers:        headers,
		PathParameters: params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     routeKey,
			AccountID:    "123456789012",
			Stage:        "$default",
			RequestID:    randomID(),
			APIID:        "local",
			DomainName:   r.Host,
			DomainPrefix: "local",
			Time:         now.Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: ip, UserAgent: r.UserAgent(),
			},
		},
		Body:            base64.StdEncoding.EncodeToString(body),
		IsBase64Encoded: true,
	}, nil
}

// ScheduledEvent is the EventBridge event a schedule rule sends.
func ScheduledEvent(functionID, rule string, now time.Time) events.EventBridgeEvent {
	return events.EventBridgeEvent{
		Version:    "0",
		ID:         randomID(),
		DetailType: "Scheduled Event",
		Source:     "aws.events",
		AccountID:  "123456789012",
		Time:       now.UTC(),
		Region:     "us-east-1",
		Resources:  []string{"arn:aws:events:us-east-1:123456789012:rule/" + functionID + "-" + rule},
		Detail:     json.RawMessage(`{}`),
	}
}

// InvokeSchedule fires one scheduled event at fn.
func InvokeSchedule(ctx context.Context, fn *Emulator, rule string) ([]byte, error) {
	payload, _ := json.Marshal(ScheduledEvent(fn.Name, rule, time.Now()))
	return fn.Invoke(ctx, payload)
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
