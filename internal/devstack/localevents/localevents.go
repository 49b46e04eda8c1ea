// Package localevents serves a stand-in for Amazon EventBridge's default
// event bus as the stack uses it: Amazon S3 sends the bus an event for
// each object created or deleted in a bucket whose EventBridge
// notifications are on (the control bucket, whose wake-up markers wake the
// processor and the relay), and the bus's rules match each event against
// their event pattern and invoke their Lambda targets asynchronously
// (https://docs.aws.amazon.com/lambda/latest/dg/services-cloudwatchevents.html).
// Put takes any other event, as PutEvents would, such as Secrets Manager's
// Secret Label Updated.
//
// The S3 side is the local S3 server's (versitygw, locals3): it POSTs a
// notification of each object written or deleted to NotificationURL
// (locals3.Options.EventWebhookURL), shaped like S3's event notification
// but not quite S3's (its eventName says "s3:ObjectCreated:Put", and the
// key is not URL-encoded; locals3's TestEventNotificationsAreS3Shaped pins
// what v1.8.0 sends). The bus turns each record into the event S3 sends
// EventBridge (ObjectEvent), for the buckets Options.Buckets names only,
// as S3 sends EventBridge the events of the buckets whose
// EventBridgeConfiguration is on:
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html
//
// Event patterns are matched as EventBridge matches them, for the
// comparisons this project's rules use and a few more (exact values,
// prefix, suffix, equals-ignore-case, exists, anything-but of values);
// AddRule refuses a pattern with any other, rather than match it wrongly
// (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html).
//
// Not reproduced: a rule's retries of a failed delivery and its dead-letter
// queue (a local delivery, Options.Invoke, only queues the event), input
// transformers, other event buses, and the delay S3 and EventBridge add
// (here a delivery follows the write within milliseconds). Neither S3 nor
// EventBridge promises order or exactly-once delivery, and neither does
// versitygw, which sends each notification once, from a goroutine of its
// own: an event lost here (the bus not answering within its 3 s) is lost,
// as one may be in AWS.
package localevents

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Defaults of Options.Account and Options.Region: what the template's
// evaluation (samtemplate) assumes.
const (
	DefaultAccount = "123456789012"
	DefaultRegion  = "us-east-1"
)

// Options configures Start.
type Options struct {
	// Buckets are the buckets whose EventBridge notifications are on; S3
	// sends the bus the events of these only.
	Buckets []string
	// Account and Region are what the events say; defaults
	// DefaultAccount and DefaultRegion.
	Account, Region string
	// Invoke hands an event that rule matched to its target (a function's
	// ARN or name) to be run asynchronously, as EventBridge hands it to
	// Lambda; its error is the delivery's. Nil records the deliveries
	// only.
	Invoke func(target string, event []byte, rule string) error
	// Logger gets a line per delivery and per refusal; nil discards.
	Logger *slog.Logger
}

// Rule is a rule on the bus: its event pattern, and the functions it
// invokes.
type Rule struct {
	Name    string
	Pattern map[string]any
	// Targets are the functions invoked, by ARN or name.
	Targets []string
}

// Delivery is one event handed to one rule's target.
type Delivery struct {
	Rule, Target string
	Event        []byte
	At           time.Time
	Err          error
}

// Bus is a running stand-in. Its methods are safe for concurrent use.
type Bus struct {
	ln   net.Listener
	srv  *http.Server
	opts Options
	log  *slog.Logger

	mu         sync.Mutex
	rules      []Rule
	deliveries []Delivery
	events     int
}

// Start serves the notification endpoint on a free loopback port until
// Close.
func Start(o Options) (*Bus, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("localevents: %w", err)
	}
	if o.Account == "" {
		o.Account = DefaultAccount
	}
	if o.Region == "" {
		o.Region = DefaultRegion
	}
	b := &Bus{ln: ln, opts: o, log: o.Logger}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.srv = &http.Server{Handler: http.HandlerFunc(b.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

// NotificationURL is where the local S3 server sends its notifications
// (locals3.Options.EventWebhookURL).
func (b *Bus) NotificationURL() string { return "http://" + b.ln.Addr().String() + "/s3-notifications" }

// Close stops serving.
func (b *Bus) Close() error { return b.srv.Close() }

// AddRule adds r; a pattern with a comparison the bus does not match is
// refused, and so is a rule without a target.
func (b *Bus) AddRule(r Rule) error {
	if len(r.Targets) == 0 {
		return fmt.Errorf("localevents: rule %s has no target", r.Name)
	}
	if len(r.Pattern) == 0 {
		return fmt.Errorf("localevents: rule %s has no event pattern", r.Name)
	}
	if err := CheckPattern(r.Pattern); err != nil {
		return fmt.Errorf("localevents: rule %s: %w", r.Name, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rules = append(b.rules, r)
	return nil
}

// Rules returns the rules, in the order they were added.
func (b *Bus) Rules() []Rule {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.rules)
}

// Deliveries returns every delivery so far, oldest first.
func (b *Bus) Deliveries() []Delivery {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.deliveries)
}

// Events returns how many events the bus received.
func (b *Bus) Events() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.events
}

// Put puts an event on the bus, as PutEvents does, and hands it to the
// target of every rule it matches; it returns those deliveries. An event
// that is not a JSON object is refused.
func (b *Bus) Put(event []byte) ([]Delivery, error) {
	var ev map[string]any
	if err := json.Unmarshal(event, &ev); err != nil {
		return nil, fmt.Errorf("localevents: the event is not a JSON object: %w", err)
	}
	b.mu.Lock()
	b.events++
	rules := slices.Clone(b.rules)
	b.mu.Unlock()
	var out []Delivery
	for _, r := range rules {
		if !Matches(r.Pattern, ev) {
			continue
		}
		for _, target := range r.Targets {
			d := Delivery{Rule: r.Name, Target: target, Event: event, At: time.Now()}
			if b.opts.Invoke != nil {
				d.Err = b.opts.Invoke(target, event, r.Name)
			}
			if d.Err != nil {
				b.log.Error("local EventBridge: the delivery failed", "rule", r.Name, "target", target, "err", d.Err)
			} else {
				b.log.Debug("local EventBridge: delivered", "rule", r.Name, "target", target)
			}
			out = append(out, d)
		}
	}
	b.mu.Lock()
	b.deliveries = append(b.deliveries, out...)
	b.mu.Unlock()
	return out, nil
}

// serve takes the local S3 server's notifications.
func (b *Bus) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST S3 notifications here", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable", http.StatusBadRequest)
		return
	}
	var n notification
	if err := json.Unmarshal(body, &n); err != nil {
		b.log.Warn("local EventBridge: not an S3 notification", "err", err)
		http.Error(w, "not an S3 notification", http.StatusBadRequest)
		return
	}
	if n.Records == nil {
		// The test event S3 (and versitygw, at start) sends a new
		// destination: nothing to deliver.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	enabled := map[string]bool{}
	for _, name := range b.opts.Buckets {
		enabled[name] = true
	}
	for _, rec := range n.Records {
		if !enabled[rec.S3.Bucket.Name] {
			continue
		}
		ev, ok := ObjectEvent(rec, b.opts.Account, b.opts.Region, time.Now())
		if !ok {
			continue
		}
		raw, _ := json.Marshal(ev)
		if _, err := b.Put(raw); err != nil {
			b.log.Error("local EventBridge: an S3 event", "err", err)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// notification is S3's event notification as the local S3 server sends it.
type notification struct {
	Records []Record `json:"Records"`
}

// Record is one record of an S3 event notification.
type Record struct {
	EventName    string `json:"eventName"`
	EventTime    string `json:"eventTime"`
	UserIdentity struct {
		PrincipalID string `json:"PrincipalId"`
	} `json:"userIdentity"`
	RequestParameters struct {
		SourceIPAddress string `json:"sourceIPAddress"`
	} `json:"requestParameters"`
	ResponseElements struct {
		RequestID string `json:"x-amz-request-id"`
	} `json:"responseElements"`
	S3 struct {
		Bucket struct {
			Name string `json:"name"`
		} `json:"bucket"`
		Object struct {
			Key       string  `json:"key"`
			Size      int64   `json:"size"`
			ETag      *string `json:"eTag"`
			VersionID *string `json:"versionId"`
			Sequencer string  `json:"sequencer"`
		} `json:"object"`
	} `json:"s3"`
}

// Event is an EventBridge event (its envelope), as S3 sends it.
type Event struct {
	Version    string         `json:"version"`
	ID         string         `json:"id"`
	DetailType string         `json:"detail-type"`
	Source     string         `json:"source"`
	Account    string         `json:"account"`
	Time       string         `json:"time"`
	Region     string         `json:"region"`
	Resources  []string       `json:"resources"`
	Detail     map[string]any `json:"detail"`
}

// The reasons S3 gives EventBridge, by the notification's event name.
var reasons = map[string]struct{ detailType, reason string }{
	"ObjectCreated:Put":                     {"Object Created", "PutObject"},
	"ObjectCreated:Post":                    {"Object Created", "POSTObject"},
	"ObjectCreated:Copy":                    {"Object Created", "CopyObject"},
	"ObjectCreated:CompleteMultipartUpload": {"Object Created", "CompleteMultipartUpload"},
	"ObjectRemoved:Delete":                  {"Object Deleted", "DeleteObject"},
	"ObjectRemoved:DeleteMarkerCreated":     {"Object Deleted", "DeleteObject"},
	// versitygw's own name for each object of a DeleteObjects request.
	"ObjectRemoved:DeleteObjects": {"Object Deleted", "DeleteObjects"},
}

// ObjectEvent is the EventBridge event S3 sends for rec (Object Created,
// Object Deleted); ok is false for a record of another kind. A record as
// S3 notifies it ("ObjectCreated:Put", its key URL-encoded) and as
// versitygw does ("s3:ObjectCreated:Put", its key as it is) give the same
// event, whose key is the object's key: S3's example event shows the key
// as it is, and does not say whether it would be encoded (the relay reads
// either).
func ObjectEvent(rec Record, account, region string, now time.Time) (Event, bool) {
	name, versitygw := strings.CutPrefix(rec.EventName, "s3:")
	kind, ok := reasons[name]
	if !ok {
		return Event{}, false
	}
	key := rec.S3.Object.Key
	if !versitygw {
		if k, err := url.QueryUnescape(key); err == nil {
			key = k
		}
	}
	object := map[string]any{"key": key, "sequencer": rec.S3.Object.Sequencer}
	if kind.detailType == "Object Created" {
		object["size"] = rec.S3.Object.Size
		if rec.S3.Object.ETag != nil {
			object["etag"] = strings.Trim(*rec.S3.Object.ETag, `"`)
		}
	}
	if rec.S3.Object.VersionID != nil && *rec.S3.Object.VersionID != "" {
		object["version-id"] = *rec.S3.Object.VersionID
	}
	detail := map[string]any{
		"version":           "0",
		"bucket":            map[string]any{"name": rec.S3.Bucket.Name},
		"object":            object,
		"request-id":        rec.ResponseElements.RequestID,
		"requester":         account,
		"source-ip-address": rec.RequestParameters.SourceIPAddress,
		"reason":            kind.reason,
	}
	if kind.detailType == "Object Deleted" {
		detail["deletion-type"] = "Permanently Deleted"
		if name == "ObjectRemoved:DeleteMarkerCreated" {
			detail["deletion-type"] = "Delete Marker Created"
		}
	}
	at := now.UTC()
	if t, err := time.Parse(time.RFC3339, rec.EventTime); err == nil {
		at = t.UTC()
	}
	return Event{
		Version: "0", ID: uuid.NewString(), DetailType: kind.detailType, Source: "aws.s3",
		Account: account, Time: at.Format(time.RFC3339), Region: region,
		Resources: []string{"arn:aws:s3:::" + rec.S3.Bucket.Name}, Detail: detail,
	}, true
}

// CheckPattern returns an error naming the first comparison of pattern
// that Matches does not implement, or a pattern that is not shaped as
// EventBridge's are (every leaf a list).
func CheckPattern(pattern map[string]any) error {
	for k, v := range pattern {
		switch x := v.(type) {
		case map[string]any:
			if err := CheckPattern(x); err != nil {
				return fmt.Errorf("%s.%w", k, err)
			}
		case []any:
			for _, m := range x {
				if err := checkMatcher(m); err != nil {
					return fmt.Errorf("%s: %w", k, err)
				}
			}
		default:
			return fmt.Errorf("%s: a pattern's leaf is a list of values or comparisons, not %v", k, v)
		}
	}
	return nil
}

func checkMatcher(m any) error {
	obj, ok := m.(map[string]any)
	if !ok {
		if _, isList := m.([]any); isList {
			return errors.New("a list inside a list")
		}
		return nil // an exact value
	}
	if len(obj) != 1 {
		return fmt.Errorf("a comparison is one key, got %v", obj)
	}
	for op, arg := range obj {
		switch op {
		case "prefix", "suffix", "equals-ignore-case":
			if _, ok := arg.(string); !ok {
				return fmt.Errorf("%s takes a string, not %v (not served locally)", op, arg)
			}
		case "exists":
			if _, ok := arg.(bool); !ok {
				return fmt.Errorf("exists takes true or false, not %v", arg)
			}
		case "anything-but":
			switch a := arg.(type) {
			case []any:
				for _, v := range a {
					if _, isObj := v.(map[string]any); isObj {
						return errors.New("anything-but of comparisons is not served locally")
					}
				}
			case map[string]any:
				return errors.New("anything-but of a comparison is not served locally")
			}
		default:
			return fmt.Errorf("the comparison %q is not served locally", op)
		}
	}
	return nil
}

// Matches reports whether event matches pattern as EventBridge decides it:
// every field the pattern names is in the event (but for exists: false)
// and, at a leaf, the event's value (or, for a list, one of its values)
// satisfies one of the pattern's values or comparisons. A pattern
// CheckPattern refuses matches nothing.
func Matches(pattern map[string]any, event map[string]any) bool {
	if CheckPattern(pattern) != nil {
		return false
	}
	return matches(pattern, event)
}

func matches(pattern, event map[string]any) bool {
	for k, p := range pattern {
		v, present := event[k]
		switch x := p.(type) {
		case map[string]any:
			sub, ok := v.(map[string]any)
			if !present || !ok || !matches(x, sub) {
				return false
			}
		case []any:
			if !leaf(x, v, present) {
				return false
			}
		}
	}
	return true
}

// leaf reports whether one of matchers accepts the event's value v.
func leaf(matchers []any, v any, present bool) bool {
	for _, m := range matchers {
		if obj, ok := m.(map[string]any); ok {
			if e, isExists := obj["exists"]; isExists {
				if e.(bool) == present {
					return true
				}
				continue
			}
		}
		if !present {
			continue
		}
		values := []any{v}
		if list, ok := v.([]any); ok {
			values = list
		}
		for _, value := range values {
			if accepts(m, value) {
				return true
			}
		}
	}
	return false
}

func accepts(m, value any) bool {
	obj, ok := m.(map[string]any)
	if !ok {
		return equal(m, value)
	}
	s, isString := value.(string)
	for op, arg := range obj {
		switch op {
		case "prefix":
			return isString && strings.HasPrefix(s, arg.(string))
		case "suffix":
			return isString && strings.HasSuffix(s, arg.(string))
		case "equals-ignore-case":
			return isString && strings.EqualFold(s, arg.(string))
		case "anything-but":
			list, isList := arg.([]any)
			if !isList {
				list = []any{arg}
			}
			for _, a := range list {
				if equal(a, value) {
					return false
				}
			}
			return true
		}
	}
	return false
}

// equal compares JSON values as EventBridge does: strings with strings,
// numbers as numbers, and true, false and null as themselves.
func equal(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	return false
}
