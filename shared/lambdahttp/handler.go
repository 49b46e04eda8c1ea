package lambdahttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/aws/aws-lambda-go/events"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// Handler adapts h to a Lambda handler function for API Gateway HTTP API v2
// events; pass the result to lambda.Start.
//
// The returned function never returns an error and never panics. A Lambda
// error would reach the client as API Gateway's opaque 500 and, for a bad
// request, wrongly blame us, so every outcome is an HTTP response instead:
// an event that cannot become a request gets a 400 JSON rejection
// ({"status":"rejected","cause":"unparsable_body"|"invalid_request",
// "message":...}); a panic in h is logged through slog.Default with
// "cause"="panic" and answered with a 500 {"status":"error","cause":"internal"}
// that leaks nothing, and whatever h had written is discarded.
//
// Handler panics if h is nil, so the mistake shows at cold start rather
// than on every request.
func Handler(h http.Handler) func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	if h == nil {
		panic("lambdahttp: nil handler")
	}
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (resp events.APIGatewayV2HTTPResponse, _ error) {
		defer func() {
			if v := recover(); v != nil {
				if ctx == nil {
					ctx = context.Background()
				}
				slog.Default().ErrorContext(ctx, "http handler panicked",
					"cause", "panic",
					"panic", fmt.Sprint(v),
					"request_id", ev.RequestContext.RequestID,
					"method", ev.RequestContext.HTTP.Method,
					"path", ev.RawPath,
					"stack", string(debug.Stack()),
				)
				resp = jsonResponse(http.StatusInternalServerError, outcome{Status: "error", Cause: inbox.CauseInternal})
			}
		}()

		r, err := NewRequest(ctx, ev)
		if err != nil {
			return rejection(ctx, ev, err), nil
		}
		w := newResponseWriter()
		h.ServeHTTP(w, r)
		return w.result(), nil
	}
}

// outcome is the JSON body of the responses the adapter produces itself,
// shaped like the receiver's own so clients parse one format.
type outcome struct {
	Status  string      `json:"status"`
	Cause   inbox.Cause `json:"cause"`
	Message string      `json:"message,omitempty"`
}

// rejection answers an event NewRequest refused. The message is fixed text:
// the decoder's error would only add noise for the sender.
func rejection(ctx context.Context, ev events.APIGatewayV2HTTPRequest, err error) events.APIGatewayV2HTTPResponse {
	o := outcome{Status: "rejected", Cause: inbox.CauseInvalidRequest, Message: "the request line could not be parsed"}
	if errors.Is(err, ErrUnparsableBody) {
		o.Cause, o.Message = inbox.CauseUnparsableBody, "the request body is flagged base64 but is not valid base64"
	}
	if ctx == nil {
		ctx = context.Background()
	}
	slog.Default().WarnContext(ctx, "rejected API Gateway event",
		"cause", o.Cause,
		"error", err.Error(),
		"request_id", ev.RequestContext.RequestID,
	)
	return jsonResponse(http.StatusBadRequest, o)
}

func jsonResponse(status int, o outcome) events.APIGatewayV2HTTPResponse {
	body, err := json.Marshal(o)
	if err != nil {
		// outcome only holds strings; Marshal cannot fail on it.
		body = []byte(`{"status":"error","cause":"internal"}`)
	}
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers: map[string]string{
			"Content-Type":           "application/json",
			"X-Content-Type-Options": "nosniff",
		},
		Body: string(body),
	}
}
