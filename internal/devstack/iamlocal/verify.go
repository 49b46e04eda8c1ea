package iamlocal

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// What a function URL with AuthType AWS_IAM accepts.
const (
	algorithm = "AWS4-HMAC-SHA256"
	service   = "lambda"
	// MaxSkew is how far X-Amz-Date may be from the verifier's clock,
	// either way, as AWS allows.
	MaxSkew = 5 * time.Minute
	// MaxBodyBytes is Lambda's limit on a synchronous invocation's
	// payload; no function URL request body can be larger.
	MaxBodyBytes  = 6 << 20
	amzDateFormat = "20060102T150405Z"
)

// ErrForbidden is wrapped by every refusal of Verify: Lambda answers each
// of them alike, 403 {"Message":"Forbidden"}; the wrapping error says why,
// for the log.
var ErrForbidden = errors.New("forbidden")

// ErrBodyTooLarge is returned by Verify for a body over the verifier's
// limit: Lambda refuses it as too large before anything else.
var ErrBodyTooLarge = errors.New("request body too large")

// Verifier checks requests as Lambda checks those sent to a function URL
// with AuthType AWS_IAM. Set its fields before its first use; then it is
// safe for concurrent use.
type Verifier struct {
	// Region, when set, is the only region a credential scope may name:
	// the function URL's.
	Region string
	// Now is the clock X-Amz-Date is checked against; nil is time.Now.
	Now func() time.Time
	// MaxBodyBytes bounds the body read; 0 is MaxBodyBytes.
	MaxBodyBytes int64

	byKey map[string]Identity
}

// NewVerifier returns a verifier that knows the identities given, by
// their access key ids.
func NewVerifier(region string, ids ...Identity) (*Verifier, error) {
	if len(ids) == 0 {
		return nil, errNoIdentities
	}
	v := &Verifier{Region: region, byKey: map[string]Identity{}}
	for _, id := range ids {
		if err := id.validate(); err != nil {
			return nil, err
		}
		if _, dup := v.byKey[id.AccessKeyID]; dup {
			return nil, fmt.Errorf("iamlocal: access key id %s given twice", id.AccessKeyID)
		}
		v.byKey[id.AccessKeyID] = id
	}
	return v, nil
}

// Verify checks that r is signed with SigV4 for service lambda by a known
// identity, over exactly what it carries, and that the identity may
// invoke target; it returns the caller's description, as Lambda hands it
// to the function. It reads the body (up to the limit) and leaves r.Body
// holding the same bytes, for the handler that serves the request.
//
// A refusal wraps ErrForbidden, or is ErrBodyTooLarge; its text says why,
// for the log only (Lambda tells the client nothing but Forbidden).
func (v *Verifier) Verify(r *http.Request, target string) (*events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription, error) {
	// The body first: whatever the outcome, the handler must find r.Body
	// as the client sent it, and Lambda refuses an oversized request
	// before it looks at the signature.
	body, err := readBody(r, v.maxBody())
	if err != nil {
		return nil, err
	}
	auth, err := parseAuthorization(r.Header.Values("Authorization"))
	if err != nil {
		return nil, refuse("%v", err)
	}
	id, ok := v.byKey[auth.accessKeyID]
	if !ok {
		return nil, refuse("unknown access key id %s", auth.accessKeyID)
	}
	if auth.service != service {
		return nil, refuse("credential scope names service %q, not %s", auth.service, service)
	}
	if v.Region != "" && auth.region != v.Region {
		return nil, refuse("credential scope names region %q, not %s", auth.region, v.Region)
	}
	for _, need := range []string{"host", "x-amz-date"} {
		if !slices.Contains(auth.signedHeaders, need) {
			return nil, refuse("%s is not among the signed headers %q", need, strings.Join(auth.signedHeaders, ";"))
		}
	}

	dates := r.Header.Values("X-Amz-Date")
	if len(dates) != 1 {
		return nil, refuse("want one X-Amz-Date header, got %d", len(dates))
	}
	signed, err := time.Parse(amzDateFormat, dates[0])
	if err != nil {
		return nil, refuse("X-Amz-Date %q is not yyyymmddThhmmssZ", dates[0])
	}
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	if skew := now.Sub(signed); skew > MaxSkew || skew < -MaxSkew {
		return nil, refuse("X-Amz-Date %s is %v from now, more than %v", dates[0], skew.Round(time.Second), MaxSkew)
	}
	if auth.date != signed.Format("20060102") {
		return nil, refuse("credential scope date %s is not X-Amz-Date's day %s", auth.date, dates[0])
	}

	tokens := r.Header.Values("X-Amz-Security-Token")
	switch {
	case id.SessionToken == "" && len(tokens) > 0:
		return nil, refuse("a session token sent with %s, whose credentials are not temporary", id.AccessKeyID)
	case id.SessionToken != "" && len(tokens) != 1:
		return nil, refuse("%s's credentials are temporary: want one X-Amz-Security-Token, got %d", id.AccessKeyID, len(tokens))
	case id.SessionToken != "" && subtle.ConstantTimeCompare([]byte(tokens[0]), []byte(id.SessionToken)) != 1:
		return nil, refuse("the session token is not %s's", id.AccessKeyID)
	}

	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	if claimed := r.Header.Values("X-Amz-Content-Sha256"); len(claimed) > 1 {
		return nil, refuse("%d X-Amz-Content-Sha256 headers", len(claimed))
	} else if len(claimed) == 1 && claimed[0] != payloadHash {
		// UNSIGNED-PAYLOAD included: Lambda signs over the body.
		return nil, refuse("X-Amz-Content-Sha256 %q is not the body's SHA-256", claimed[0])
	}

	canonical, err := canonicalRequest(r, auth.signedHeaders, payloadHash)
	if err != nil {
		return nil, refuse("%v", err)
	}
	scope := strings.Join([]string{auth.date, auth.region, auth.service, "aws4_request"}, "/")
	hashed := sha256.Sum256([]byte(canonical))
	toSign := algorithm + "\n" + dates[0] + "\n" + scope + "\n" + hex.EncodeToString(hashed[:])
	want := hmacSHA256(signingKey(id.SecretAccessKey, auth.date, auth.region, auth.service), toSign)
	if !hmac.Equal(want, auth.signature) {
		return nil, refuse("the signature does not match the request (canonical request hash %x)", hashed)
	}

	if !id.May(target) {
		return nil, refuse("%s may not invoke the %q function URL", id.UserARN, target)
	}
	return id.IAM(), nil
}

func (v *Verifier) maxBody() int64 {
	if v.MaxBodyBytes > 0 {
		return v.MaxBodyBytes
	}
	return MaxBodyBytes
}

func refuse(format string, args ...any) error {
	return fmt.Errorf("iamlocal: %w: "+format, append([]any{ErrForbidden}, args...)...)
}

func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		r.Body = http.NoBody
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	_ = r.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("iamlocal: read the request body: %w", err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("iamlocal: %w: over %d bytes", ErrBodyTooLarge, limit)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// authorization is a parsed Authorization header.
type authorization struct {
	accessKeyID, date, region, service string
	signedHeaders                      []string
	signature                          []byte
}

// parseAuthorization reads
// "AWS4-HMAC-SHA256 Credential=AKID/yyyymmdd/region/service/aws4_request,
// SignedHeaders=a;b, Signature=hex", its three parts in any order.
func parseAuthorization(values []string) (authorization, error) {
	var a authorization
	if len(values) != 1 {
		return a, fmt.Errorf("want one Authorization header, got %d", len(values))
	}
	alg, rest, ok := strings.Cut(values[0], " ")
	if !ok || alg != algorithm {
		return a, fmt.Errorf("authorization is not %s", algorithm)
	}
	parts := map[string]string{}
	for _, p := range strings.Split(rest, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			return a, fmt.Errorf("authorization part %q is not key=value", p)
		}
		switch k {
		case "Credential", "SignedHeaders", "Signature":
		default:
			return a, fmt.Errorf("authorization part %q is unknown", k)
		}
		if _, dup := parts[k]; dup {
			return a, fmt.Errorf("authorization part %s given twice", k)
		}
		parts[k] = val
	}
	for _, k := range []string{"Credential", "SignedHeaders", "Signature"} {
		if parts[k] == "" {
			return a, fmt.Errorf("authorization has no %s", k)
		}
	}

	scope := strings.Split(parts["Credential"], "/")
	if len(scope) != 5 || scope[4] != "aws4_request" || scope[0] == "" || scope[2] == "" || scope[3] == "" {
		return a, fmt.Errorf("credential %q is not AKID/yyyymmdd/region/service/aws4_request", parts["Credential"])
	}
	if _, err := time.Parse("20060102", scope[1]); err != nil || len(scope[1]) != 8 {
		return a, fmt.Errorf("credential scope date %q is not yyyymmdd", scope[1])
	}
	a.accessKeyID, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]

	// The canonical request lists the signed headers lowercase, sorted,
	// once each; a list that is not so was not made by a SigV4 signer.
	a.signedHeaders = strings.Split(parts["SignedHeaders"], ";")
	for i, h := range a.signedHeaders {
		if h != strings.ToLower(h) || !inbox.ValidHeaderName(h) {
			return a, fmt.Errorf("signed header %q is not a lowercase header name", h)
		}
		if i > 0 && a.signedHeaders[i-1] >= h {
			return a, fmt.Errorf("signed headers %q are not sorted and distinct", parts["SignedHeaders"])
		}
	}

	sig := parts["Signature"]
	if len(sig) != 64 || strings.ToLower(sig) != sig {
		return a, fmt.Errorf("signature is not 64 lowercase hex digits")
	}
	var err error
	if a.signature, err = hex.DecodeString(sig); err != nil {
		return a, fmt.Errorf("signature is not 64 lowercase hex digits")
	}
	return a, nil
}

// canonicalRequest is SigV4's canonical request for r over the signed
// headers: the method; the path as received, each byte but the unreserved
// ones and "/" percent-encoded once more (services other than S3 encode
// the path twice); the query parameters sorted by name then value, each
// encoded with %20 for a space; each signed header's values, spaces
// trimmed and runs of spaces collapsed, comma-joined; the list of signed
// headers; the payload's hash.
func canonicalRequest(r *http.Request, signedHeaders []string, payloadHash string) (string, error) {
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "", fmt.Errorf("query %q: %w", r.URL.RawQuery, err)
	}
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(escape(path, false))
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(query))
	b.WriteByte('\n')
	for _, h := range signedHeaders {
		values, err := headerValues(r, h)
		if err != nil {
			return "", err
		}
		b.WriteString(h)
		b.WriteByte(':')
		for i, v := range values {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(collapseSpaces(v))
		}
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(signedHeaders, ";"))
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String(), nil
}

// headerValues are the values of signed header h as received. Go's server
// moves Host out of the header map into r.Host, and may hold the length
// only in r.ContentLength.
func headerValues(r *http.Request, h string) ([]string, error) {
	switch h {
	case "host":
		if r.Host == "" {
			return nil, errors.New("signed header host is not in the request")
		}
		return []string{r.Host}, nil
	case "content-length":
		if vs := r.Header.Values("Content-Length"); len(vs) > 0 {
			return vs, nil
		}
		if r.ContentLength > 0 {
			return []string{strconv.FormatInt(r.ContentLength, 10)}, nil
		}
	}
	vs := r.Header.Values(h)
	if len(vs) == 0 {
		return nil, fmt.Errorf("signed header %s is not in the request", h)
	}
	return vs, nil
}

func canonicalQuery(q url.Values) string {
	type pair struct{ k, v string }
	var pairs []pair
	for k, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, pair{escape(k, true), escape(v, true)})
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].k != pairs[j].k {
			return pairs[i].k < pairs[j].k
		}
		return pairs[i].v < pairs[j].v
	})
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = p.k + "=" + p.v
	}
	return strings.Join(parts, "&")
}

// escape is SigV4's URI encoding: every byte but A-Z a-z 0-9 - . _ ~
// becomes %XX (uppercase hex); "/" is kept in a path (encodeSlash false)
// and encoded in a query's names and values.
func escape(s string, encodeSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' || (c == '/' && !encodeSlash) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// collapseSpaces trims a header value and turns each run of spaces inside
// it into one.
func collapseSpaces(v string) string {
	v = strings.TrimSpace(v)
	var b strings.Builder
	space := false
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' {
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteByte(v[i])
	}
	return b.String()
}

func signingKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	return hmacSHA256(k, "aws4_request")
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// Middleware serves next the requests v accepts for target, with the
// caller's description; every other request gets Lambda's own refusal,
// 403 {"Message":"Forbidden"} (413 for a body over the limit), and the
// reason goes to log (nil discards). Nothing of the request is echoed.
func Middleware(target string, v *Verifier, log *slog.Logger, next func(http.ResponseWriter, *http.Request, *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription)) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		iam, err := v.Verify(r, target)
		switch {
		case errors.Is(err, ErrBodyTooLarge):
			log.Warn("local function URL: request refused", "target", target, "err", err)
			WriteTooLarge(w)
		case err != nil:
			log.Warn("local function URL: request refused", "target", target, "err", err)
			WriteForbidden(w)
		default:
			next(w, r, iam)
		}
	})
}

// WriteForbidden writes Lambda's answer to a function URL request that
// AWS_IAM authorization refuses.
func WriteForbidden(w http.ResponseWriter) {
	writeMessage(w, http.StatusForbidden, "Forbidden")
}

// WriteTooLarge writes the answer to a request whose body Lambda cannot
// carry in an invocation.
func WriteTooLarge(w http.ResponseWriter) {
	writeMessage(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
}

func writeMessage(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `{"Message":"`+msg+`"}`)
}
