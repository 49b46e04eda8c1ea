// Package cfnresponse answers CloudFormation's custom resource requests:
// the answer's document, its size bound, the deadline the work must keep
// so that the answer goes out in time, and its delivery to the request's
// pre-signed ResponseURL. The migration function (shared/migrator)
// and the relay (shared/relay) answer through it.
//
// The answer is an HTTP PUT of the JSON document CloudFormation documents
// ("Custom resource response objects": Status, Reason, PhysicalResourceId,
// StackId, RequestId, LogicalResourceId, NoEcho, Data; 4096 bytes at most)
// to the request's pre-signed ResponseURL, with an empty Content-Type, as
// AWS's own cfn-response module sends it, retried a few times when it is
// refused. A function that ends without answering leaves CloudFormation
// waiting for the resource's whole ServiceTimeout (an hour by default), so
// the work is bounded by the invocation's deadline less a reserve
// (WorkContext), and the answer always has time to go out.
//
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-requests.html
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cfn-lambda-function-code-cfnresponsemodule.html
package cfnresponse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/cfn"
)

// Request is CloudFormation's request to a custom resource.
type Request = cfn.Event

// The request types.
const (
	RequestCreate = string(cfn.RequestCreate)
	RequestUpdate = string(cfn.RequestUpdate)
	RequestDelete = string(cfn.RequestDelete)
)

// The answer's statuses.
const (
	StatusSuccess = string(cfn.StatusSuccess)
	StatusFailed  = string(cfn.StatusFailed)
)

// Response is the document PUT to the request's ResponseURL.
type Response struct {
	Status             string            `json:"Status"`
	Reason             string            `json:"Reason"`
	PhysicalResourceID string            `json:"PhysicalResourceId"`
	StackID            string            `json:"StackId"`
	RequestID          string            `json:"RequestId"`
	LogicalResourceID  string            `json:"LogicalResourceId"`
	NoEcho             bool              `json:"NoEcho"`
	Data               map[string]string `json:"Data,omitempty"`
}

// MaxResponseBytes is CloudFormation's limit on the answer's body.
const MaxResponseBytes = 4096

// Reserve is the time kept, before the invocation's deadline, to answer
// (half the time left when that is shorter): the answer's PUT, retried a
// few times if need be.
const Reserve = 10 * time.Second

// Delivery: attempts of the PUT, and the wait before the first retry,
// doubled at each.
const (
	putAttempts     = 5
	putFirstBackoff = 250 * time.Millisecond
)

// For returns the answer's frame for req: its ids, and physicalID as the
// resource's id on Create (or when the request has none). Any other time
// the request's own id is kept: a different id in an Update's answer
// would make CloudFormation replace the resource and send a Delete for the
// old one.
func For(req Request, physicalID string) Response {
	resp := Response{
		PhysicalResourceID: req.PhysicalResourceID,
		StackID:            req.StackID, RequestID: req.RequestID, LogicalResourceID: req.LogicalResourceID,
	}
	if string(req.RequestType) == RequestCreate || resp.PhysicalResourceID == "" {
		resp.PhysicalResourceID = physicalID
	}
	return resp
}

// WorkContext is ctx ending Reserve before ctx's deadline (or halfway
// there when less is left), so the answer can go out after it; it also
// returns the reserve kept.
func WorkContext(ctx context.Context) (context.Context, time.Duration, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		ctx, cancel := context.WithCancel(ctx)
		return ctx, 0, cancel
	}
	reserve := Reserve
	if left := time.Until(dl); left < 2*reserve {
		reserve = left / 2
	}
	ctx, cancel := context.WithDeadline(ctx, dl.Add(-reserve))
	return ctx, reserve, cancel
}

// Redact replaces every non-empty value of values in s: belt and braces,
// as no reason is built from a secret.
func Redact(s string, values []string) string {
	for _, v := range values {
		if v != "" {
			s = strings.ReplaceAll(s, v, "xxxxx")
		}
	}
	return s
}

// Encode marshals resp, shortening its Reason until the body fits
// CloudFormation's limit.
func Encode(resp Response) ([]byte, error) {
	for {
		body, err := json.Marshal(resp)
		if err != nil {
			return nil, fmt.Errorf("encode the answer: %w", err)
		}
		if len(body) <= MaxResponseBytes {
			return body, nil
		}
		over := len(body) - MaxResponseBytes
		r := resp.Reason
		if r == "" {
			return nil, fmt.Errorf("the answer is %d bytes without a reason, over CloudFormation's %d", len(body), MaxResponseBytes)
		}
		cut := max(len(r)-over-len(" …"), 0)
		for cut > 0 && !utf8.RuneStart(r[cut]) {
			cut--
		}
		resp.Reason = r[:cut] + " …"
	}
}

// Sender delivers answers. Its zero value is ready to use.
type Sender struct {
	// After waits between attempts (250ms before the first retry, doubled
	// at each); nil is time.After. A component with a clock passes its
	// clock's, so that a test's clock ends the waits.
	After func(time.Duration) <-chan time.Time
}

// client PUTs the answers: http.DefaultClient's settings in a client of
// the package's own.
var client = &http.Client{}

// Send encodes resp and PUTs it to responseURL, retrying until it is taken
// or the attempts or ctx run out. It returns the body sent. Its errors
// never hold the pre-signed URL (whoever holds it may answer for the
// resource), only its host.
func (s Sender) Send(ctx context.Context, responseURL string, resp Response) ([]byte, error) {
	body, err := Encode(resp)
	if err != nil {
		return nil, err
	}
	return body, s.Put(ctx, responseURL, body)
}

// Put sends an encoded answer, retrying until it is taken or the attempts
// or ctx run out.
func (s Sender) Put(ctx context.Context, responseURL string, body []byte) error {
	if responseURL == "" {
		return errors.New("the request has no ResponseURL")
	}
	after := s.After
	if after == nil {
		after = time.After
	}
	backoff := putFirstBackoff
	var err error
	for attempt := 1; attempt <= putAttempts; attempt++ {
		if err = s.putOnce(ctx, responseURL, body); err == nil {
			return nil
		}
		if attempt == putAttempts {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (then %w)", err, ctx.Err())
		case <-after(backoff):
		}
		backoff *= 2
	}
	return err
}

func (s Sender) putOnce(ctx context.Context, responseURL string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, responseURL, bytes.NewReader(body))
	if err != nil {
		return errors.New("the ResponseURL is not a URL")
	}
	// The URL is signed for a PUT without a content type: the header is
	// sent, empty, as AWS's cfn-response module sends it.
	req.Header["Content-Type"] = []string{""}
	resp, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // its message repeats the pre-signed URL
		}
		return fmt.Errorf("PUT the answer to %s: %w", HostOf(responseURL), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("PUT the answer to %s: %s: %s", HostOf(responseURL), resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// HostOf is the host of a URL, what may be logged of a pre-signed one.
func HostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Host
	}
	return "the ResponseURL"
}

// responseHost is the host of CloudFormation's pre-signed response URLs:
// its response bucket in virtual-hosted style
// (cloudformation-custom-resource-response-<region>.s3[.-<region>].amazonaws.com)
// or S3's endpoint in path style (s3[.-<region>].amazonaws.com, the path
// then starting with the bucket), in every partition's domain.
var (
	responseHost = regexp.MustCompile(`^(cloudformation-custom-resource-response-[a-z0-9-]+\.)?s3([.-][a-z]{2}(-[a-z]+)+-[0-9])?\.amazonaws\.com(\.cn)?$`)
	responsePath = "/cloudformation-custom-resource-response-"
)

// CheckResponseURL refuses a ResponseURL that is not CloudFormation's: an
// https URL on the default port of its S3 response bucket. Whoever may
// invoke a custom resource's function can send it any request; answering
// only there means a forged request's answer (which may say what was done)
// goes nowhere but to CloudFormation's own bucket. allowLoopback also
// accepts http or https on 127.0.0.1, ::1 or localhost: the local stacks'
// and the tests' stand-ins, never set by a template. The error holds the
// URL's host only (the URL is pre-signed).
func CheckResponseURL(raw string, allowLoopback bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("the ResponseURL is not an absolute URL")
	}
	host := u.Hostname()
	if allowLoopback && (host == "127.0.0.1" || host == "::1" || host == "localhost") && (u.Scheme == "http" || u.Scheme == "https") {
		return nil
	}
	switch {
	case u.Scheme != "https":
		return fmt.Errorf("the ResponseURL (host %s) is %s, not https: CloudFormation's response URLs are https", u.Host, u.Scheme)
	case u.User != nil || (u.Port() != "" && u.Port() != "443"):
		return fmt.Errorf("the ResponseURL (host %s) has credentials or a port: not CloudFormation's", u.Host)
	case !responseHost.MatchString(strings.ToLower(host)):
		return fmt.Errorf("the ResponseURL's host %s is not CloudFormation's S3 response bucket (cloudformation-custom-resource-response-<region>.s3…amazonaws.com)", host)
	case !strings.HasPrefix(strings.ToLower(host), "cloudformation-custom-resource-response-") && !strings.HasPrefix(u.EscapedPath(), responsePath):
		return fmt.Errorf("the ResponseURL (host %s) is not in CloudFormation's S3 response bucket", host)
	}
	return nil
}
