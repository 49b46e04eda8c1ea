package destination

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Config is the Sender's settings.
type Config struct {
	// AllowPrivate lets forwarding connect to loopback, private,
	// link-local, CGNAT and the other addresses it otherwise refuses, and
	// lets forward.url be plain http on such a host: for a consumer inside
	// the VPC, or a developer's local server.
	AllowPrivate bool
}

// Deps is what a Sender works with.
type Deps struct {
	// SQS and EventBridge are the clients of sqs and eventbridge targets
	// (sqs.Client and eventbridge.Client); nil leaves such targets
	// undeliverable (Retry, naming what is missing), as a deployment that
	// routes to none needs neither.
	SQS         SQSSender
	EventBridge EventPutter
	// Clock is the time of a delivery's webhook-timestamp and what a
	// Retry-After date is measured from; nil means the system clock.
	Clock Clock
}

// SQSSender is the part of the SQS client a Sender uses.
type SQSSender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// EventPutter is the part of the EventBridge client a Sender uses.
type EventPutter interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Clock is where a Sender reads the time.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Sender delivers events to targets. It is safe for concurrent use, and
// keeps its HTTP connections between deliveries: build one per process.
type Sender struct {
	cfg       Config
	deps      Deps
	dialer    *dialer
	transport *http.Transport
	client    *http.Client
}

// New returns a Sender. Its HTTP client is its own: no proxy from the
// environment (a proxy would connect where the dialer cannot judge), every
// connection through the address check, at least TLS 1.2, and redirects
// only within the same origin (see Deliver).
func New(cfg Config, deps Deps) *Sender {
	if deps.Clock == nil {
		deps.Clock = systemClock{}
	}
	d := newDialer(cfg.AllowPrivate)
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   10,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	s := &Sender{cfg: cfg, deps: deps, dialer: d, transport: t}
	s.client = &http.Client{Transport: t, CheckRedirect: checkRedirect}
	return s
}

// Outcome is what became of a delivery.
type Outcome int

const (
	// Delivered: the target took the event.
	Delivered Outcome = iota + 1
	// Retry: it did not, and may later (the target failed, was throttled,
	// timed out, or is misconfigured in a way an operator can mend).
	Retry
	// Permanent: it never will as the event and target are (refused,
	// too large, an address forwarding may not reach, a 4xx answer).
	Permanent
)

func (o Outcome) String() string {
	switch o {
	case Delivered:
		return "delivered"
	case Retry:
		return "retry"
	case Permanent:
		return "permanent"
	default:
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
}

// Result is the outcome of one delivery.
type Result struct {
	Outcome Outcome
	// Status is the consumer's HTTP status, or the AWS service's for an
	// sqs or eventbridge target; 0 when there was no answer.
	Status int
	// Code is the AWS error code (ThrottlingException, ...) of a failed
	// sqs or eventbridge delivery.
	Code string
	// RetryAfter is how long the target asked to be left alone (a 429 or
	// 503's Retry-After, at most MaxRetryAfter); 0 when it did not say.
	RetryAfter time.Duration
	// Message says what happened, safe to log and show: never a body, a
	// secret, a header value, or a URL's path or query. Empty when
	// Delivered.
	Message string
}

// MaxRetryAfter caps a target's Retry-After: a consumer cannot park the
// events routed to it for longer than this per attempt.
const MaxRetryAfter = time.Hour

// Deliver sends d to t once and says what became of it. It never retries:
// the caller owns the attempts and their backoff. A target that does not
// validate is Permanent, with Validate's message.
func (s *Sender) Deliver(ctx context.Context, t Target, d Delivery) Result {
	if err := t.Validate(); err != nil {
		return Result{Outcome: Permanent, Message: "invalid target: " + err.Error()}
	}
	switch {
	case t.Forward != nil:
		f, _ := t.Forward.compile()
		return s.forward(ctx, f, d)
	case t.SQS != nil:
		return s.sendSQS(ctx, t.SQS, d)
	default:
		return s.putEvent(ctx, t.EventBridge, d)
	}
}
