package lambdahttp

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// ErrUnparsableBody is wrapped by NewRequest when an event flagged
// isBase64Encoded carries a body that is not standard base64. It is the
// client's fault (or the emulator's), so Handler answers 400 instead of
// failing the invocation.
var ErrUnparsableBody = errors.New("lambdahttp: body is not valid base64")

// ErrInvalidRequest is wrapped by NewRequest when the event's method or path
// cannot form an HTTP request, the cases where the net/http server would
// answer 400 before any handler ran.
var ErrInvalidRequest = errors.New("lambdahttp: event is not a valid HTTP request")

// defaultStage is the stage name whose paths API Gateway does not prefix.
const defaultStage = "$default"

type requestIDKey struct{}

type iamKey struct{}

// IAMCaller returns the caller's identity as AWS verified it, when the
// event r was built from carries one: a Lambda function URL with AuthType
// AWS_IAM (or an API Gateway IAM-authorized route) signs nothing into the
// request itself; Lambda checks the SigV4 signature and puts the principal
// in requestContext.authorizer.iam, which no client can write. It is
// false for requests that did not come through NewRequest (make dev,
// tests) and for events without an IAM authorizer.
func IAMCaller(r *http.Request) (events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription, bool) {
	if r == nil {
		return events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{}, false
	}
	iam, ok := r.Context().Value(iamKey{}).(events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription)
	return iam, ok
}

// RequestID returns the API Gateway request id (requestContext.requestId) of
// the event r was built from, or "" for requests that did not come through
// NewRequest (tests). It lives in the context rather than in a
// header so a client cannot forge it and the handler's view of the client's
// headers stays untouched; it is the id API Gateway's access logs carry, so
// logging it joins our logs with theirs.
func RequestID(r *http.Request) string {
	if r == nil {
		return ""
	}
	id, _ := r.Context().Value(requestIDKey{}).(string)
	return id
}

// NewRequest converts an API Gateway HTTP API payload 2.0 event into the
// *http.Request the net/http server would have built for the same request on
// the wire. It is exported so tests and the local emulator front can build
// exactly what the Lambda sees.
//
// The request's context is ctx (carrying the Lambda deadline) plus the value
// read by RequestID. The path is ev.RawPath, still percent-encoded as
// received, so r.URL.Path is decoded, r.URL.RawPath keeps the original
// escaping and Go 1.22 ServeMux wildcards match segments such as "a%2Fb". A
// named stage's "/<stage>" prefix is removed so routes are written once,
// independent of the stage. The query is ev.RawQueryString, because the
// parsed queryStringParameters map comma-joins repeated keys.
//
// Errors wrap ErrUnparsableBody or ErrInvalidRequest.
func NewRequest(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (*http.Request, error) {
	if ctx == nil {
		ctx = context.Background()
	}

	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		decoded, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnparsableBody, err)
		}
		body = decoded
	}

	u, err := requestURL(ev)
	if err != nil {
		return nil, err
	}

	// NewRequestWithContext validates the method token for us; an empty
	// method becomes GET, as for any http.Request.
	ctx = context.WithValue(ctx, requestIDKey{}, ev.RequestContext.RequestID)
	if a := ev.RequestContext.Authorizer; a != nil && a.IAM != nil && a.IAM.UserARN != "" {
		ctx = context.WithValue(ctx, iamKey{}, *a.IAM)
	}
	r, err := http.NewRequestWithContext(ctx, ev.RequestContext.HTTP.Method, "/", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	// Server-side requests always have a non-nil Body and no GetBody.
	r.GetBody = nil
	if len(body) == 0 {
		r.Body = http.NoBody
	} else {
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	r.ContentLength = int64(len(body))
	r.URL = u
	r.RequestURI = u.RequestURI()

	if major, minor, ok := http.ParseHTTPVersion(ev.RequestContext.HTTP.Protocol); ok {
		r.Proto, r.ProtoMajor, r.ProtoMinor = ev.RequestContext.HTTP.Protocol, major, minor
	}
	if ip := ev.RequestContext.HTTP.SourceIP; ip != "" {
		// API Gateway does not tell us the client port; ":0" keeps
		// RemoteAddr in the host:port form net.SplitHostPort expects.
		r.RemoteAddr = net.JoinHostPort(ip, "0")
	}

	copyHeaders(r.Header, ev.Headers)
	if len(ev.Cookies) > 0 {
		// Payload 2.0 moves the Cookie header into the cookies array; put it
		// back so r.Cookie works. The array is API Gateway's canonical copy,
		// so it wins over any stray header.
		r.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}

	// Like the net/http server, promote Host out of the header map.
	r.Host = r.Header.Get("Host")
	r.Header.Del("Host")
	if r.Host == "" {
		r.Host = ev.RequestContext.DomainName
	}

	// API Gateway has already de-chunked and buffered the body, so the
	// client's framing headers no longer describe what the handler reads.
	r.Header.Del("Transfer-Encoding")
	if len(body) > 0 || r.Header.Get("Content-Length") != "" {
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	}
	return r, nil
}

// requestURL builds the server-side URL (path and query only, like the
// net/http server's) from the event.
func requestURL(ev events.APIGatewayV2HTTPRequest) (*url.URL, error) {
	raw := ev.RawPath
	if stage := ev.RequestContext.Stage; stage != "" && stage != defaultStage {
		prefix := "/" + stage
		switch {
		case raw == prefix:
			raw = "/"
		case strings.HasPrefix(raw, prefix+"/"):
			raw = raw[len(prefix):]
		}
	}
	if raw == "" {
		raw = "/"
	}
	// A literal '?' cannot be in a path API Gateway received (it starts the
	// query, which arrives separately), but an emulator could put one there;
	// escaping it keeps it in the path instead of silently eating the query.
	raw = strings.ReplaceAll(raw, "?", "%3F")

	// ParseRequestURI is what the net/http server applies to a request
	// target: it decodes Path, keeps RawPath when the escaping is not the
	// default one, and does not treat '#' as a fragment.
	u, err := url.ParseRequestURI(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: path: %v", ErrInvalidRequest, err)
	}
	if u.Scheme != "" || u.Host != "" || !strings.HasPrefix(u.Path, "/") {
		// Absolute-form targets are for proxies; API Gateway never sends one.
		return nil, fmt.Errorf("%w: path %q is not an absolute path", ErrInvalidRequest, raw)
	}
	u.RawQuery = ev.RawQueryString
	return u, nil
}

// copyHeaders adds the event's headers under their canonical names, so
// lookups are case-insensitive as they are on the wire. Values stay exactly
// as API Gateway joined them ("a,b" for a repeated header): splitting on ','
// would corrupt single headers that legitimately contain commas, such as
// Stripe-Signature "t=...,v1=..." or an HTTP date.
func copyHeaders(dst http.Header, src map[string]string) {
	// Payload 2.0 keys are lowercase and unique, but hand-written events may
	// spell one name two ways; sorting keeps the merge order deterministic.
	keys := make([]string, 0, len(src))
	for k := range src {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst.Add(k, src[k])
	}
}
