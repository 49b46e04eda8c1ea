package localevents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localevents"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
)

// The relay's and the economy processor's rules, as the template writes
// them (bucket name filled in).
func markerRule(name, prefix, bucket, target string) localevents.Rule {
	return localevents.Rule{Name: name, Targets: []string{target}, Pattern: map[string]any{
		"source": []any{"aws.s3"}, "detail-type": []any{"Object Created"},
		"detail": map[string]any{"bucket": map[string]any{"name": []any{bucket}}, "object": map[string]any{"key": []any{map[string]any{"prefix": prefix}}}},
	}}
}

type delivered struct {
	mu  sync.Mutex
	got []localevents.Delivery
}

func (d *delivered) invoke(target string, event []byte, rule string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, localevents.Delivery{Rule: rule, Target: target, Event: event})
	return nil
}

func (d *delivered) all() []localevents.Delivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]localevents.Delivery(nil), d.got...)
}

// TestObjectEventsFromTheLocalS3: a real versitygw notifies the bus of
// every object written and deleted; the bus turns each of an enabled
// bucket's records into the EventBridge event S3 sends
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html)
// and hands it to the targets of the rules it matches, asynchronously;
// another bucket's objects, other prefixes and deletions reach no target.
func TestObjectEventsFromTheLocalS3(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var d delivered
	// The server is this test's own: the names are free.
	const control, other = "control", "other"
	bus, err := localevents.Start(localevents.Options{Buckets: []string{control}, Invoke: d.invoke})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	for _, r := range []localevents.Rule{
		markerRule("Arm", "wake/arm/", control, "arn:aws:lambda:us-east-1:123456789012:function:RelayFunction"),
		markerRule("ProcessorWakeRule", "wake/now/", control, "arn:aws:lambda:us-east-1:123456789012:function:ProcessorFunction"),
	} {
		if err := bus.AddRule(r); err != nil {
			t.Fatal(err)
		}
	}
	s3 := s3test.ServerWith(t, locals3.Options{EventWebhookURL: bus.NotificationURL()})
	controlStore, otherStore := s3test.Open(t, s3test.Config(s3, control)), s3test.Open(t, s3test.Config(s3, other))
	for _, b := range []string{control, other} {
		if err := locals3.CreateBucket(ctx, s3test.Config(s3, b), false); err != nil {
			t.Fatal(err)
		}
	}
	const arm = "wake/arm/processor/2030-01-02T03:04:00Z"
	for _, key := range []string{arm, "wake/now/1767322800000000000-0a1b2c3d", "config/sources.json"} {
		if _, err := controlStore.Put(ctx, key, nil, "application/octet-stream"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := otherStore.Put(ctx, "wake/arm/processor/2030-01-02T03:05:00Z", nil, "application/octet-stream"); err != nil {
		t.Fatal(err)
	}
	if err := controlStore.Delete(ctx, arm); err != nil {
		t.Fatal(err)
	}
	// Three creations and a deletion in the control bucket.
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return bus.Events() == 4, fmt.Sprintf("%d events on the bus", bus.Events())
	})
	got := d.all()
	if len(got) != 2 || len(bus.Deliveries()) != 2 {
		t.Fatalf("deliveries: %d (bus %d), want the two markers'", len(got), len(bus.Deliveries()))
	}
	byRule := map[string]localevents.Event{}
	for _, dv := range got {
		var ev localevents.Event
		if err := json.Unmarshal(dv.Event, &ev); err != nil {
			t.Fatal(err)
		}
		byRule[dv.Rule] = ev
		if !strings.HasSuffix(dv.Target, map[string]string{"Arm": ":RelayFunction", "ProcessorWakeRule": ":ProcessorFunction"}[dv.Rule]) {
			t.Errorf("rule %s delivered to %s", dv.Rule, dv.Target)
		}
	}
	ev := byRule["Arm"]
	obj, _ := ev.Detail["object"].(map[string]any)
	bucket, _ := ev.Detail["bucket"].(map[string]any)
	if !field.Check(t, "the marker's event",
		field.Eq("version", ev.Version, "0"),
		field.Eq("source", ev.Source, "aws.s3"),
		field.Eq("detail-type", ev.DetailType, "Object Created"),
		field.Eq("account", ev.Account, localevents.DefaultAccount),
		field.Eq("region", ev.Region, localevents.DefaultRegion),
		field.Is("resources", ev.Resources, len(ev.Resources) == 1 && ev.Resources[0] == "arn:aws:s3:::"+control, "[arn:aws:s3:::"+control+"]"),
		field.Eq("detail.bucket.name", bucket["name"], any(control)),
		field.Eq("detail.object.key", obj["key"], any(arm)),
		field.Eq("detail.reason", ev.Detail["reason"], "PutObject"),
		field.Eq("detail.version", ev.Detail["version"], "0"),
		field.Is("id", ev.ID, ev.ID != "", "set"),
	) {
		t.FailNow()
	}
	if _, err := time.Parse(time.RFC3339, ev.Time); err != nil {
		t.Fatalf("time %q: %v", ev.Time, err)
	}
	if obj, _ := byRule["ProcessorWakeRule"].Detail["object"].(map[string]any); !strings.HasPrefix(fmt.Sprint(obj["key"]), "wake/now/") {
		t.Fatalf("the wake-up's event: %+v", byRule["ProcessorWakeRule"])
	}

	// A notification that is not S3's is refused; S3's test event is taken.
	for body, want := range map[string]int{`not json`: http.StatusBadRequest, `{"Service":"Amazon S3","Event":"s3:TestEvent"}`: http.StatusNoContent} {
		resp, err := http.Post(bus.NotificationURL(), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", body, resp.StatusCode, want)
		}
	}
}

// TestObjectEventFromS3sOwnNotification: a record as S3 itself writes it
// (ObjectCreated:Put, its key URL-encoded) and as versitygw writes it give
// one event, whose key is the object's.
func TestObjectEventFromS3sOwnNotification(t *testing.T) {
	t.Parallel()
	var s3s, vgw localevents.Record
	_ = json.Unmarshal([]byte(`{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"wake/arm/processor/2030-01-02T03%3A04%3A00Z+x","size":0,"eTag":"\"e\""}}}`), &s3s)
	_ = json.Unmarshal([]byte(`{"eventName":"s3:ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"wake/arm/processor/2030-01-02T03:04:00Z x","size":0,"eTag":"\"e\""}}}`), &vgw)
	now := time.Date(2030, 1, 2, 3, 3, 0, 0, time.UTC)
	a, okA := localevents.ObjectEvent(s3s, "1", "r", now)
	b, okB := localevents.ObjectEvent(vgw, "1", "r", now)
	if !okA || !okB {
		t.Fatal("not an object event")
	}
	a.ID, b.ID = "", ""
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) || !strings.Contains(string(ja), `"key":"wake/arm/processor/2030-01-02T03:04:00Z x"`) || !strings.Contains(string(ja), `"etag":"e"`) {
		t.Fatalf("S3's record gives %s\nversitygw's gives %s", ja, jb)
	}
	if _, ok := localevents.ObjectEvent(localevents.Record{EventName: "s3:ObjectTagging:Put"}, "1", "r", now); ok {
		t.Fatal("a tagging record made an event")
	}
}

// TestPatterns: EventBridge's matching, for the comparisons served, and a
// refusal of those that are not.
func TestPatterns(t *testing.T) {
	t.Parallel()
	event := map[string]any{
		"source": "aws.secretsmanager", "detail-type": "Secret Label Updated",
		"resources": []any{"arn:aws:secretsmanager:us-east-1:123456789012:secret:sources-AbCdEf"},
		"detail":    map[string]any{"labelUpdated": "AWSCURRENT", "count": 2.0, "empty": nil},
	}
	for _, c := range []struct {
		pattern string
		want    bool
	}{
		{`{"source":["aws.secretsmanager"],"detail":{"labelUpdated":["AWSCURRENT"]}}`, true},
		{`{"source":["aws.s3","aws.secretsmanager"]}`, true},
		{`{"source":["aws.s3"]}`, false},
		{`{"resources":["arn:aws:secretsmanager:us-east-1:123456789012:secret:sources-AbCdEf"]}`, true},
		{`{"resources":[{"prefix":"arn:aws:secretsmanager:"}]}`, true},
		{`{"resources":[{"suffix":"-XxXxXx"}]}`, false},
		{`{"detail-type":[{"equals-ignore-case":"secret label updated"}]}`, true},
		{`{"detail":{"labelUpdated":[{"anything-but":"AWSPREVIOUS"}]}}`, true},
		{`{"detail":{"labelUpdated":[{"anything-but":["AWSCURRENT","AWSPENDING"]}]}}`, false},
		{`{"detail":{"count":[2]}}`, true},
		{`{"detail":{"count":["2"]}}`, false},
		{`{"detail":{"empty":[null]}}`, true},
		{`{"detail":{"missing":[{"exists":false}]}}`, true},
		{`{"detail":{"labelUpdated":[{"exists":true}]}}`, true},
		{`{"detail":{"missing":["x"]}}`, false},
		{`{"detail":{"labelUpdated":{"nested":["x"]}}}`, false},
		{`{"nothing":{"here":["x"]}}`, false},
	} {
		var p map[string]any
		if err := json.Unmarshal([]byte(c.pattern), &p); err != nil {
			t.Fatal(err)
		}
		if err := localevents.CheckPattern(p); err != nil {
			t.Errorf("%s: %v", c.pattern, err)
		}
		if got := localevents.Matches(p, event); got != c.want {
			t.Errorf("%s: matches %v, want %v", c.pattern, got, c.want)
		}
	}
	for _, refused := range []string{
		`{"detail":{"count":[{"numeric":[">",1]}]}}`,
		`{"detail":{"labelUpdated":[{"wildcard":"AWS*"}]}}`,
		`{"detail":{"labelUpdated":[{"anything-but":{"prefix":"AWS"}}]}}`,
		`{"source":"aws.s3"}`,
	} {
		var p map[string]any
		_ = json.Unmarshal([]byte(refused), &p)
		if err := localevents.CheckPattern(p); err == nil {
			t.Errorf("%s was accepted", refused)
		}
		if localevents.Matches(p, event) {
			t.Errorf("%s matched", refused)
		}
	}
	bus, err := localevents.Start(localevents.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	if err := bus.AddRule(localevents.Rule{Name: "numeric", Targets: []string{"f"}, Pattern: map[string]any{"n": []any{map[string]any{"numeric": []any{">", 1.0}}}}}); err == nil {
		t.Fatal("a rule with a comparison the bus does not serve was added")
	}
	if err := bus.AddRule(localevents.Rule{Name: "nobody", Pattern: map[string]any{"source": []any{"x"}}}); err == nil {
		t.Fatal("a rule without target was added")
	}
}
