package destination

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The headers a forwarded delivery carries besides Standard Webhooks'
// webhook-id, webhook-timestamp and webhook-signature (docs/destinations.md).
const (
	headerPrefix     = "Webhook-Inbox-"
	headerSource     = headerPrefix + "Source"
	headerEventType  = headerPrefix + "Event-Type"
	headerEventID    = headerPrefix + "Event-Id"
	headerAttempt    = headerPrefix + "Attempt"
	headerReceivedAt = headerPrefix + "Received-At"
	// headerMetaPrefix heads each kept metadata value: key github_hook_id
	// is sent as Webhook-Inbox-Meta-Github-Hook-Id.
	headerMetaPrefix = headerPrefix + "Meta-"
)

// metaContentType is the metadata key of the Content-Type the sender
// posted, when its source keeps it.
const metaContentType = "content_type"

// maxRedirects bounds the same-origin redirects a delivery follows.
const maxRedirects = 3

// answerBytes is how much of a consumer's answer is read, for the Result's
// message; answerShown is how much of it the message quotes.
const (
	answerBytes = 4 << 10
	answerShown = 256
)

// errRedirect marks a redirect the client refused to follow.
type errRedirect struct{ why string }

func (e *errRedirect) Error() string { return e.why }

// checkRedirect follows a redirect only to the same scheme, host and port,
// and only one that repeats the POST with its body (307, 308): a 301, 302
// or 303 would turn the delivery into a GET without its body, and a
// consumer that answered it 2xx would count as delivered having received
// nothing. Another host is never followed: the endpoint configured is the
// one the route's author chose, and a redirect is how an SSRF reaches
// what the author did not.
func checkRedirect(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	host, port := splitHostPort(req.URL)
	firstHost, firstPort := splitHostPort(first)
	switch {
	case req.URL.Scheme != first.Scheme || !strings.EqualFold(host, firstHost) || port != firstPort:
		return &errRedirect{fmt.Sprintf("redirected to another host (%s://%s); forwarding never follows a redirect off the configured host: configure the new URL", req.URL.Scheme, req.URL.Host)}
	case req.Method != http.MethodPost:
		return &errRedirect{fmt.Sprintf("redirected with %d, which would resend the delivery as a GET without its body; configure the new URL", req.Response.StatusCode)}
	case len(via) > maxRedirects:
		return &errRedirect{fmt.Sprintf("more than %d redirects", maxRedirects)}
	}
	return nil
}

func (s *Sender) forward(ctx context.Context, f *forward, d Delivery) Result {
	host := f.url.Scheme + "://" + f.url.Host
	fail := func(o Outcome, format string, args ...any) Result {
		return Result{Outcome: o, Message: "forward to " + host + ": " + f.scrub(fmt.Sprintf(format, args...))}
	}

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url.String(), bytes.NewReader(d.Body))
	if err != nil {
		return fail(Permanent, "build the request: %v", unwrapURLError(err))
	}
	id := MessageID(d.Source, d.EventID)
	now := s.deps.Clock.Now()
	for name, vals := range f.headers {
		req.Header[name] = vals
	}
	setHeaders(req.Header, d)
	req.Header.Set("webhook-id", id)
	ts := strconv.FormatInt(now.Unix(), 10)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", sign(f.keys, id, ts, d.Body))

	resp, err := s.client.Do(req)
	if err != nil {
		return transportFailure(parent, ctx, f, fail, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, answerBytes))

	code := resp.StatusCode
	r := Result{Status: code}
	switch {
	case code >= 200 && code <= 299:
		r.Outcome = Delivered
		return r
	case code >= 400 && code <= 499 && code != http.StatusRequestTimeout && code != http.StatusConflict && code != http.StatusTooManyRequests:
		r.Outcome = Permanent
	default:
		r.Outcome = Retry
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			r.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), now)
		}
	}
	msg := fmt.Sprintf("answered %d %s", code, http.StatusText(code))
	if len(answer) > 0 {
		msg += ": " + quoteAnswer(answer)
	}
	r.Message = fail(r.Outcome, "%s", msg).Message
	return r
}

// transportFailure classifies a request that got no final answer.
// parent is the caller's context, ctx the delivery's (parent with the
// forward's timeout): a caller's deadline is told apart from the forward's.
func transportFailure(parent, ctx context.Context, f *forward, fail func(Outcome, string, ...any) Result, err error) Result {
	var refused *refusedError
	var redirect *errRedirect
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &refused):
		return fail(Permanent, "%v", refused)
	case errors.As(err, &redirect):
		return fail(Permanent, "%v", redirect)
	case parent.Err() != nil:
		return fail(Retry, "the caller gave up before an answer: %v", parent.Err())
	case ctx.Err() != nil:
		return fail(Retry, "no answer within %s", f.timeout)
	case errors.As(err, &unknownCA), errors.As(err, &badHost), errors.As(err, &invalid):
		// A certificate is mended by the consumer (a renewal, a chain),
		// so the event waits for it rather than failing for ever.
		return fail(Retry, "TLS: %v", unwrapURLError(err))
	default:
		return fail(Retry, "%v", unwrapURLError(err))
	}
}

// unwrapURLError drops url.Error's method and URL (the URL may hold a
// token in its path or query) and keeps why.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// setHeaders sets the delivery's own headers: its Content-Type and what
// the inbox knows of the event. A metadata key or value a header cannot
// carry is left out rather than failing the delivery.
func setHeaders(h http.Header, d Delivery) {
	ct := d.Metadata[metaContentType]
	switch {
	case ct != "" && validHeaderValue(ct):
	case json.Valid(d.Body):
		ct = "application/json"
	default:
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("User-Agent", "webhook-inbox")
	setIf(h, headerSource, d.Source)
	setIf(h, headerEventType, d.Type)
	setIf(h, headerEventID, d.EventID)
	if d.Attempt > 0 {
		h.Set(headerAttempt, strconv.Itoa(d.Attempt))
	}
	if !d.ReceivedAt.IsZero() {
		h.Set(headerReceivedAt, d.ReceivedAt.UTC().Format(time.RFC3339Nano))
	}
	for k, v := range d.Metadata {
		name := headerMetaPrefix + strings.ReplaceAll(k, "_", "-")
		if validHeaderName(name) {
			setIf(h, name, v)
		}
	}
}

func setIf(h http.Header, name, value string) {
	if value != "" && validHeaderValue(value) {
		h.Set(name, value)
	}
}

// sign is Standard Webhooks' webhook-signature: "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>" for each key, space-separated; a consumer accepts the
// delivery when any one verifies.
func sign(keys [][]byte, id, ts string, body []byte) string {
	sigs := make([]string, 0, len(keys))
	for _, key := range keys {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id))
		m.Write([]byte{'.'})
		m.Write([]byte(ts))
		m.Write([]byte{'.'})
		m.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	return strings.Join(sigs, " ")
}

// retryAfter reads a Retry-After header (delay seconds or an HTTP date,
// RFC 9110 10.2.3), capped at MaxRetryAfter; 0 when absent, unreadable or
// past.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		if n > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), MaxRetryAfter)
}

// quoteAnswer quotes the start of a consumer's answer, escaped, so that it
// can neither forge a log line nor fill one.
func quoteAnswer(b []byte) string {
	more := ""
	if len(b) > answerShown {
		b, more = b[:answerShown], "..."
	}
	return strconv.QuoteToASCII(string(b)) + more
}

// scrub hides the forward's secrets and header values from a message,
// should the consumer have echoed them in its answer.
func (f *forward) scrub(s string) string {
	for _, h := range f.hidden {
		if h != "" {
			s = strings.ReplaceAll(s, h, "[redacted]")
		}
	}
	return s
}
