package destination

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Target is where a route's events go, as a routes entry of the sources
// document spells it: exactly one of forward, sqs and eventbridge. It has no
// UnmarshalJSON of its own, so that a route may embed it and its fields
// sit beside the route's name, source and types.
type Target struct {
	Forward     *Forward     `json:"forward,omitempty"`
	SQS         *SQS         `json:"sqs,omitempty"`
	EventBridge *EventBridge `json:"eventbridge,omitempty"`
}

// Forward posts each event to an HTTPS endpoint, signed with Standard
// Webhooks.
type Forward struct {
	// URL is the endpoint: https, without userinfo.
	URL string `json:"url"`
	// Secret is the Standard Webhooks secret ("whsec_" and base64 of 24 to
	// 64 bytes) that signs each delivery. Secrets is the same for a
	// rotation: every secret listed signs (one signature each, the first
	// first), so a consumer holding the old secret and one holding the new
	// both verify while it rotates. Exactly one of the two is given.
	Secret  string   `json:"secret,omitempty"`
	Secrets []string `json:"secrets,omitempty"`
	// Timeout bounds one delivery, connection and redirects included: Go
	// duration text, DefaultTimeout when empty, at most MaxTimeout.
	Timeout string `json:"timeout,omitempty"`
	// Headers are static headers added to each delivery (an API key the
	// consumer's gateway wants, say). Their values are never logged.
	Headers map[string]string `json:"headers,omitempty"`
}

// SQS sends each event as one message to a queue.
type SQS struct {
	// QueueURL is the queue's URL as SQS gives it; a name ending in .fifo
	// makes it a FIFO queue, which deduplicates on MessageID.
	QueueURL string `json:"queue_url"`
}

// EventBridge puts each event on an event bus.
type EventBridge struct {
	// Bus is the bus's name or ARN.
	Bus string `json:"bus"`
	// Source is the events' source field; "webhook-inbox.<source name>"
	// when empty.
	Source string `json:"source,omitempty"`
}

// Forwarding's timeouts.
const (
	DefaultTimeout = 10 * time.Second
	// MaxTimeout keeps one slow consumer from holding the processor's
	// batch for long.
	MaxTimeout = 30 * time.Second
)

// Standard Webhooks' secret bounds (its specification: 24 to 64 bytes).
const (
	secretPrefix   = "whsec_"
	minSecretBytes = 24
	maxSecretBytes = 64
)

// Validate says what is wrong with t, each problem naming its field
// (forward.url, sqs.queue_url, ...), or nil.
func (t Target) Validate() error {
	var set []string
	if t.Forward != nil {
		set = append(set, "forward")
	}
	if t.SQS != nil {
		set = append(set, "sqs")
	}
	if t.EventBridge != nil {
		set = append(set, "eventbridge")
	}
	switch {
	case len(set) == 0:
		return errors.New("a target needs one of forward, sqs or eventbridge")
	case len(set) > 1:
		return fmt.Errorf("a target has exactly one of forward, sqs or eventbridge, not %s", strings.Join(set, " and "))
	case t.Forward != nil:
		_, err := t.Forward.compile()
		return err
	case t.SQS != nil:
		return t.SQS.validate()
	default:
		return t.EventBridge.validate()
	}
}

// forward is a Forward checked and parsed, ready to send with.
type forward struct {
	url     *url.URL
	keys    [][]byte
	timeout time.Duration
	headers http.Header
	// hidden are the strings never to show in a Result (the secrets and
	// the static headers' values), should a consumer echo them back.
	hidden []string
}

func (f *Forward) compile() (*forward, error) {
	var errs []error
	c := &forward{timeout: DefaultTimeout, headers: http.Header{}}
	u, err := checkForwardURL(f.URL)
	if err != nil {
		errs = append(errs, fmt.Errorf("forward.url: %w", err))
	}
	c.url = u

	secrets := f.Secrets
	field := "forward.secrets"
	switch {
	case f.Secret != "" && len(f.Secrets) > 0:
		errs = append(errs, errors.New("forward.secret and forward.secrets: give one, not both"))
	case f.Secret != "":
		secrets, field = []string{f.Secret}, "forward.secret"
	case len(f.Secrets) == 0:
		errs = append(errs, errors.New("forward.secret: required (a Standard Webhooks whsec_ secret); every delivery is signed"))
	}
	for i, s := range secrets {
		key, err := decodeSecret(s)
		if err != nil {
			if field == "forward.secret" {
				errs = append(errs, fmt.Errorf("%s: %w", field, err))
			} else {
				errs = append(errs, fmt.Errorf("%s[%d]: %w", field, i, err))
			}
			continue
		}
		c.keys = append(c.keys, key)
		c.hidden = append(c.hidden, s, strings.TrimPrefix(s, secretPrefix))
	}

	if f.Timeout != "" {
		d, err := time.ParseDuration(f.Timeout)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("forward.timeout: %q is not a duration (10s, 1500ms)", f.Timeout))
		case d <= 0 || d > MaxTimeout:
			errs = append(errs, fmt.Errorf("forward.timeout: %s is outside (0, %s]", d, MaxTimeout))
		default:
			c.timeout = d
		}
	}

	for name, value := range f.Headers {
		if err := checkStaticHeader(name, value); err != nil {
			errs = append(errs, fmt.Errorf("forward.headers[%q]: %w", name, err))
			continue
		}
		c.headers.Set(name, value)
		if len(value) >= minHiddenLen {
			c.hidden = append(c.hidden, value)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// minHiddenLen: a header value shorter than this is not searched for in a
// consumer's answer (hiding "1" or "yes" would garble the text, and hides
// nothing secret).
const minHiddenLen = 6

func decodeSecret(s string) ([]byte, error) {
	if !strings.HasPrefix(s, secretPrefix) {
		return nil, errors.New("not a Standard Webhooks secret: it starts with whsec_")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, secretPrefix))
	if err != nil {
		return nil, errors.New("the part after whsec_ is not base64")
	}
	if len(key) < minSecretBytes || len(key) > maxSecretBytes {
		return nil, fmt.Errorf("the key is %d bytes; Standard Webhooks keys are %d to %d", len(key), minSecretBytes, maxSecretBytes)
	}
	return key, nil
}

func checkForwardURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the URL, which may hold a token: say only why.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("does not parse: %w", err)
	}
	if u.User != nil {
		return nil, errors.New("has userinfo (user:password@); put credentials in forward.headers")
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, errors.New("has no host")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !privateHost(u.Hostname()) {
			return nil, errors.New("must be https (http only for localhost or a private address, which forwarding reaches only when private destinations are allowed)")
		}
	default:
		return nil, fmt.Errorf("must be https, not %q", u.Scheme)
	}
	if p := u.Port(); p != "" {
		if n, err := netip.ParseAddrPort("0.0.0.0:" + p); err != nil || n.Port() == 0 {
			return nil, fmt.Errorf("port %q is not a port", p)
		}
	}
	return u, nil
}

// privateHost reports whether host names the local machine or a refused
// address, the only hosts plain http may name: a consumer beside the inbox
// (a developer's server, one in the VPC), never one across the internet.
func privateHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && refusedClass(a) != ""
}

// Static headers may not replace what the delivery sets (the signature,
// its own Webhook-Inbox-* headers, the body's framing) nor the hop-by-hop
// headers, which are the connection's, not the message's.
var reservedHeaders = map[string]bool{
	"Webhook-Id": true, "Webhook-Timestamp": true, "Webhook-Signature": true,
	"Content-Type": true, "Content-Length": true, "Content-Encoding": true,
	"Host": true, "Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true,
}

func checkStaticHeader(name, value string) error {
	if !validHeaderName(name) {
		return errors.New("not a header name (letters, digits and !#$%&'*+-.^_`|~)")
	}
	canon := http.CanonicalHeaderKey(name)
	if reservedHeaders[canon] || strings.HasPrefix(canon, headerPrefix) {
		return errors.New("set by the delivery itself, or hop-by-hop; it cannot be configured")
	}
	if !validHeaderValue(value) {
		return errors.New("the value holds control characters")
	}
	return nil
}

// validHeaderName: an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue: no control character but tab (a CR or LF would split
// the header).
func validHeaderValue(s string) bool {
	for _, c := range []byte(s) {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// SQS queue URLs: https://sqs.<region>.amazonaws.com/<account>/<name>, the
// legacy https://<region>.queue.amazonaws.com/..., the China partition's
// .amazonaws.com.cn and the dual-stack sqs.<region>.api.aws. A queue name
// is 1 to 80 letters, digits, hyphens and underscores, a FIFO queue's
// ending in .fifo within the 80.
var (
	queueHostPattern = regexp.MustCompile(`^(sqs\.[a-z0-9-]+\.amazonaws\.com(\.cn)?|[a-z0-9-]+\.queue\.amazonaws\.com(\.cn)?|queue\.amazonaws\.com|sqs\.[a-z0-9-]+\.api\.aws)$`)
	queuePathPattern = regexp.MustCompile(`^/[0-9]{12}/([A-Za-z0-9_-]{1,80}|[A-Za-z0-9_-]{1,75}\.fifo)$`)
)

func (q *SQS) validate() error {
	if q.QueueURL == "" {
		return errors.New("sqs.queue_url: required")
	}
	u, err := url.Parse(q.QueueURL)
	if err != nil || u.Scheme != "https" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		!queueHostPattern.MatchString(u.Host) || !queuePathPattern.MatchString(u.Path) {
		return fmt.Errorf("sqs.queue_url: %q is not an SQS queue URL (https://sqs.<region>.amazonaws.com/<account id>/<queue name>)", q.QueueURL)
	}
	return nil
}

func (q *SQS) fifo() bool { return strings.HasSuffix(q.QueueURL, ".fifo") }

// EventBridge names: a bus name is 1 to 256 of [/._-A-Za-z0-9]; an ARN is
// arn:<partition>:events:<region>:<account>:event-bus/<name>. An event's
// source is 1 to 256 of [._-A-Za-z0-9], and "aws." begins only AWS's own.
var (
	busNamePattern = regexp.MustCompile(`^[/._A-Za-z0-9-]{1,256}$`)
	busARNPattern  = regexp.MustCompile(`^arn:aws[a-z-]*:events:[a-z0-9-]+:[0-9]{12}:event-bus/[/._A-Za-z0-9-]{1,256}$`)
	sourcePattern  = regexp.MustCompile(`^[._A-Za-z0-9-]{1,256}$`)
)

func (e *EventBridge) validate() error {
	var errs []error
	switch {
	case e.Bus == "":
		errs = append(errs, errors.New("eventbridge.bus: required (a bus name or ARN)"))
	case strings.HasPrefix(e.Bus, "arn:"):
		if !busARNPattern.MatchString(e.Bus) {
			errs = append(errs, fmt.Errorf("eventbridge.bus: %q is not an event bus ARN (arn:aws:events:<region>:<account id>:event-bus/<name>)", e.Bus))
		}
	case !busNamePattern.MatchString(e.Bus):
		errs = append(errs, fmt.Errorf("eventbridge.bus: %q is not an event bus name (1 to 256 of letters, digits and /._-)", e.Bus))
	}
	if e.Source != "" {
		if !sourcePattern.MatchString(e.Source) || strings.HasPrefix(strings.ToLower(e.Source), "aws.") {
			errs = append(errs, fmt.Errorf("eventbridge.source: %q is not an event source (1 to 256 of letters, digits and ._-, not starting with aws.)", e.Source))
		}
	}
	return errors.Join(errs...)
}

// eventSource is the PutEvents Source for events of source.
func (e *EventBridge) eventSource(source string) string {
	if e.Source != "" {
		return e.Source
	}
	return "webhook-inbox." + source
}

// splitHostPort is net.SplitHostPort with the scheme's default port.
func splitHostPort(u *url.URL) (host, port string) {
	host, port = u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return host, port
}
