package lambdalocal

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/iamlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
)

// maxInvokePayload is Lambda's limit on a synchronous invocation's
// payload, the event included: a function URL request whose event would
// be larger is refused.
const maxInvokePayload = 6 << 20

// localURLRegion is the region of a local function URL when the verifier
// names none: the emulators' AWS_REGION (baseEnv).
const localURLRegion = "us-east-1"

// FunctionURLEvent is the event Lambda sends a function for a request to
// its function URL: API Gateway's payload format 2.0, with "$default" for
// the route and the stage, the URL's id for the API's, and the caller's
// IAM principal when the URL's AuthType is AWS_IAM. It decodes as
// aws-lambda-go's events.LambdaFunctionURLRequest and as
// events.APIGatewayV2HTTPRequest alike.
type FunctionURLEvent struct {
	Version               string                    `json:"version"`
	RouteKey              string                    `json:"routeKey"`
	RawPath               string                    `json:"rawPath"`
	RawQueryString        string                    `json:"rawQueryString"`
	Cookies               []string                  `json:"cookies,omitempty"`
	Headers               map[string]string         `json:"headers"`
	QueryStringParameters map[string]string         `json:"queryStringParameters,omitempty"`
	RequestContext        FunctionURLRequestContext `json:"requestContext"`
	Body                  string                    `json:"body,omitempty"`
	IsBase64Encoded       bool                      `json:"isBase64Encoded"`
}

// FunctionURLRequestContext is a function URL event's requestContext.
type FunctionURLRequestContext struct {
	AccountID    string                                                       `json:"accountId"`
	APIID        string                                                       `json:"apiId"`
	Authorizer   *events.LambdaFunctionURLRequestContextAuthorizerDescription `json:"authorizer,omitempty"`
	DomainName   string                                                       `json:"domainName"`
	DomainPrefix string                                                       `json:"domainPrefix"`
	HTTP         events.LambdaFunctionURLRequestContextHTTPDescription        `json:"http"`
	RequestID    string                                                       `json:"requestId"`
	RouteKey     string                                                       `json:"routeKey"`
	Stage        string                                                       `json:"stage"`
	Time         string                                                       `json:"time"`
	TimeEpoch    int64                                                        `json:"timeEpoch"`
}

// FunctionURLDomain is the local function URL's domain for the function
// logicalID, as Lambda names one: <url-id>.lambda-url.<region>.on.aws,
// the id 32 lowercase letters and digits (here derived from the logical
// id, so that it is stable across runs).
func FunctionURLDomain(logicalID, region string) string {
	sum := sha256.Sum256([]byte("lambdalocal function URL " + logicalID))
	return hex.EncodeToString(sum[:16]) + ".lambda-url." + region + ".on.aws"
}

// NewFunctionURLEvent builds the event Lambda sends for r, whose body is
// body, to the function URL at domain: headers lowercased with repeated
// ones comma-joined, cookies apart, query parameters decoded and
// comma-joined, the body as text when its content type is text and
// base64-encoded otherwise, and the caller iam (nil for AuthType NONE).
func NewFunctionURLEvent(r *http.Request, body []byte, domain string, iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription, now time.Time) FunctionURLEvent {
	urlID, _, _ := strings.Cut(domain, ".")
	headers := map[string]string{}
	var cookies []string
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			// Lambda splits the Cookie header into its pairs.
			for _, v := range vs {
				for c := range strings.SplitSeq(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						cookies = append(cookies, c)
					}
				}
			}
			continue
		}
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	headers["host"] = r.Host
	delete(headers, "content-length")
	if len(body) > 0 {
		headers["content-length"] = fmt.Sprint(len(body))
	}
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	// What Lambda's front adds, for the client as it saw it.
	headers["x-forwarded-for"] = ip
	if _, p, err := net.SplitHostPort(r.Host); err == nil {
		headers["x-forwarded-port"] = p
	} else {
		headers["x-forwarded-port"] = "80"
	}
	headers["x-forwarded-proto"] = "http"
	if r.TLS != nil {
		headers["x-forwarded-proto"] = "https"
	}
	headers["x-amzn-trace-id"] = fmt.Sprintf("Root=1-%08x-%s", now.Unix(), randomID()[:24])

	var params map[string]string
	if q, err := url.ParseQuery(r.URL.RawQuery); err == nil && len(q) > 0 {
		params = make(map[string]string, len(q))
		for k, vs := range q {
			params[k] = strings.Join(vs, ",")
		}
	}

	ev := FunctionURLEvent{
		Version:               "2.0",
		RouteKey:              "$default",
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: params,
		RequestContext: FunctionURLRequestContext{
			AccountID:    iamlocal.Account,
			APIID:        urlID,
			DomainName:   domain,
			DomainPrefix: urlID,
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: ip, UserAgent: r.UserAgent(),
			},
			RequestID: uuid.NewString(),
			RouteKey:  "$default",
			Stage:     "$default",
			Time:      now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch: now.UnixMilli(),
		},
	}
	if ev.RawPath == "" {
		ev.RawPath = "/"
	}
	if iam != nil {
		ev.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{
			IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
				AccessKey: iam.AccessKey, AccountID: iam.AccountID, CallerID: iam.CallerID, UserARN: iam.UserARN, UserID: iam.UserID,
			},
		}
	}
	if len(body) > 0 {
		if textual(r.Header.Get("Content-Type")) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	return ev
}

// textual reports whether Lambda passes a body of this content type as
// text; any other body, one without a content type included, arrives
// base64-encoded.
func textual(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	switch {
	case strings.HasPrefix(mt, "text/"),
		mt == "application/json", strings.HasSuffix(mt, "+json"),
		mt == "application/xml", strings.HasSuffix(mt, "+xml"),
		mt == "application/javascript":
		return true
	}
	return false
}

// NewFunctionURL returns the local function URL of fn, configured as u:
// requests are authorized as Lambda does for AuthType AWS_IAM (by v, for
// target), turned into FunctionURLEvents, and the function's answer
// written back as Lambda writes it. AuthType NONE and InvokeMode
// RESPONSE_STREAM are not served: the project uses neither, and a local
// stand-in must not open what AWS would not. log (nil discards) gets each
// refusal and failure.
func NewFunctionURL(fn *Emulator, u samtemplate.FunctionURL, target string, v *iamlocal.Verifier, log *slog.Logger) (http.Handler, error) {
	if u.AuthType != "AWS_IAM" {
		return nil, fmt.Errorf("lambdalocal: %s: function URL AuthType %s: only AWS_IAM is served locally", fn.Name, u.AuthType)
	}
	if u.InvokeMode != "" && u.InvokeMode != "BUFFERED" {
		return nil, fmt.Errorf("lambdalocal: %s: function URL InvokeMode %s: only BUFFERED is served locally", fn.Name, u.InvokeMode)
	}
	if v == nil {
		return nil, fmt.Errorf("lambdalocal: %s: a function URL with AuthType AWS_IAM needs an iamlocal.Verifier", fn.Name)
	}
	if target == "" {
		return nil, fmt.Errorf("lambdalocal: %s: no target named for its function URL", fn.Name)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	region := v.Region
	if region == "" {
		region = localURLRegion
	}
	domain := FunctionURLDomain(fn.Name, region)
	return iamlocal.Middleware(target, v, log, func(w http.ResponseWriter, r *http.Request, iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) {
		// The verifier read the body, within Lambda's limit, and left it
		// in r.Body.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			log.Error("local function URL: read the body", "function", fn.Name, "err", err)
			writeInternalError(w)
			return
		}
		ev := NewFunctionURLEvent(r, body, domain, iam, time.Now())
		payload, err := json.Marshal(ev)
		if err != nil || len(payload) > maxInvokePayload {
			log.Warn("local function URL: the event is over Lambda's invocation payload limit", "function", fn.Name, "bytes", len(payload))
			iamlocal.WriteTooLarge(w)
			return
		}
		out, err := fn.Invoke(r.Context(), payload)
		if err != nil {
			log.Error("local function URL: invocation failed", "function", fn.Name, "request_id", ev.RequestContext.RequestID, "err", err)
			writeInternalError(w)
			return
		}
		if err := writeFunctionURLResponse(w, out, ev.RequestContext.RequestID); err != nil {
			log.Error("local function URL: the function's response", "function", fn.Name, "request_id", ev.RequestContext.RequestID, "err", err)
			writeInternalError(w)
		}
	}), nil
}

// writeInternalError is a function URL's answer when the function fails
// (an error returned, a crash, a timeout) or answers what cannot be
// turned into HTTP: 502 and "Internal Server Error".
func writeInternalError(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusBadGateway)
	_, _ = io.WriteString(w, "Internal Server Error")
}

// writeFunctionURLResponse writes the function's output as Lambda does:
// a JSON object with a statusCode is the response (headers, cookies as
// Set-Cookie, the body, base64-decoded when so flagged); any other output
// is the body of a 200 application/json response. It writes nothing when
// it returns an error.
func writeFunctionURLResponse(w http.ResponseWriter, out []byte, requestID string) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(out, &probe); err != nil || probe["statusCode"] == nil {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Requestid", requestID)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(out)
		return nil
	}
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return fmt.Errorf("not a function URL response: %w", err)
	}
	if resp.StatusCode < 100 || resp.StatusCode > 599 {
		return fmt.Errorf("status code %d", resp.StatusCode)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			return errors.New("isBase64Encoded, but the body is not base64")
		}
	}
	h := w.Header()
	// No content type sniffed for the function: it says its own or none.
	h["Content-Type"] = nil
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	h.Set("X-Amzn-Requestid", requestID)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
	return nil
}
