package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localscheduler"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localsecrets"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testclock"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/cfnresponse"
	"github.com/webhook-inbox/webhook-inbox/shared/relay"
)

const (
	processorARN = "arn:aws:lambda:us-east-1:123456789012:function:inbox-ProcessorFunction-AbC"
	archiverARN  = "arn:aws:lambda:us-east-1:123456789012:function:inbox-ArchiverFunction-DeF"
	roleARN      = "arn:aws:iam::123456789012:role/inbox-SchedulerRole-GhI"
	group        = "inbox-wake"
	stackID      = "arn:aws:cloudformation:us-east-1:123456789012:stack/inbox/5b6c9a80-0000-11ef-8d3e-0a1b2c3d4e5f"
	// validSources is a sources document; its secret must never be
	// logged or answered.
	sourcesSecret = "whsec_relay_0123456789abcdefghij"
)

var validSources = `{"sources":{"acme":{"kind":"stripe","secrets":["` + sourcesSecret + `"]}}}`

// fixture is a relay over a real S3 (versitygw) control bucket, the
// Secrets Manager and Scheduler stand-ins through the real SDK clients,
// and a stand-in for CloudFormation's pre-signed ResponseURL.
type fixture struct {
	t         *testing.T
	s3        *locals3.Server
	bucket    blobstore.Config
	store     *blobstore.Store
	rec       *s3test.Recorder
	secrets   *localsecrets.Server
	sched     *localscheduler.Server
	clock     *testclock.Clock // the relay's and the scheduler's
	secretARN string
	relay     *relay.Relay
	logs      *bytes.Buffer
	answers   *responder
}

type options struct {
	s3Opts    locals3.Options
	versioned bool
}

func setup(t *testing.T, opts ...options) *fixture {
	t.Helper()
	var o options
	if len(opts) > 0 {
		o = opts[0]
	}
	f := &fixture{t: t, logs: &bytes.Buffer{}, clock: testclock.At(time.Date(2026, 12, 3, 10, 0, 20, 0, time.UTC))}
	f.s3 = s3test.ServerWith(t, o.s3Opts)
	if o.versioned {
		f.bucket = s3test.VersionedBucket(t, f.s3)
	} else {
		f.bucket = s3test.Bucket(t, f.s3)
	}
	f.store = s3test.Open(t, f.bucket)
	f.rec = s3test.Record(t, f.bucket.Endpoint)
	var err error
	if f.secrets, err = localsecrets.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.secrets.Close() })
	f.secretARN = f.secrets.Create("inbox-sources", validSources)
	if f.sched, err = localscheduler.Start(localscheduler.Options{Now: f.clock.Now}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.sched.Close() })
	f.answers = newResponder(t)
	f.relay = f.newRelay(f.sched.Endpoint(), nil)
	return f
}

// env is the relay's environment in the test.
func (f *fixture) env() map[string]string {
	return map[string]string{
		"RELAY_CONTROL_BUCKET": f.bucket.Bucket, "RELAY_SOURCES_SECRET_ARN": f.secretARN,
		"RELAY_SCHEDULE_GROUP": group, "RELAY_SCHEDULER_ROLE_ARN": roleARN,
		"RELAY_PROCESSOR_ARN": processorARN, "RELAY_ARCHIVER_ARN": archiverARN,
		"S3_ENDPOINT": f.s3.Endpoint(), "S3_ACCESS_KEY_ID": locals3.AccessKeyID, "S3_SECRET_ACCESS_KEY": locals3.SecretAccessKey,
		"AWS_REGION": locals3.Region, "S3_MAX_ATTEMPTS": "1",
	}
}

// newRelay builds the relay as its main does (ConfigFromEnv and
// blobstore.ConnectionFromEnv, then Open), with its clients pointed at the
// stand-ins; edit changes the settings and the bucket's connection.
func (f *fixture) newRelay(schedulerEndpoint string, edit func(*relay.Config, *blobstore.Config)) *relay.Relay {
	f.t.Helper()
	env := f.env()
	getenv := func(k string) string { return env[k] }
	cfg, err := relay.ConfigFromEnv(getenv)
	if err != nil {
		f.t.Fatal(err)
	}
	conn, err := blobstore.ConnectionFromEnv(getenv)
	if err != nil {
		f.t.Fatal(err)
	}
	// The answers' stand-in is on loopback, as the local stacks' is.
	cfg.LocalResponseURL = true
	creds := credentials.NewStaticCredentialsProvider("AKIDRELAY", "relay-secret", "")
	deps := relay.Deps{
		Secrets:   secretsmanager.New(secretsmanager.Options{Region: "us-east-1", BaseEndpoint: aws.String(f.secrets.Endpoint()), Credentials: creds}),
		Scheduler: scheduler.New(scheduler.Options{Region: "us-east-1", BaseEndpoint: aws.String(schedulerEndpoint), Credentials: creds, RetryMaxAttempts: 1}),
		Clock:     f.clock,
		Logger:    slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	conn.Endpoint = f.rec.URL()
	if edit != nil {
		edit(&cfg, &conn)
	}
	r, err := relay.Open(f.t.Context(), cfg, conn, deps)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) handle(ev any) (relay.Outcome, error) {
	f.t.Helper()
	raw, err := json.Marshal(ev)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(f.t.Context(), time.Minute)
	defer cancel()
	return f.relay.Handle(ctx, raw)
}

// noSecretLeaked fails when the sources secret is in the logs or s.
func (f *fixture) noSecretLeaked(s ...string) {
	f.t.Helper()
	for _, v := range append(s, f.logs.String()) {
		if strings.Contains(v, sourcesSecret) || strings.Contains(v, "whsec_") {
			f.t.Fatalf("the sources secret leaked:\n%s", v)
		}
	}
}

// s3Notification is S3's event notification for keys in bucket, each
// URL-encoded as S3 encodes it.
func s3Notification(bucket string, eventName string, keys ...string) map[string]any {
	var recs []any
	for _, k := range keys {
		recs = append(recs, map[string]any{
			"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1", "eventTime": "2026-12-03T10:00:20.123Z",
			"eventName": eventName,
			"s3": map[string]any{"s3SchemaVersion": "1.0", "bucket": map[string]any{"name": bucket, "arn": "arn:aws:s3:::" + bucket},
				"object": map[string]any{"key": url.QueryEscape(k), "size": 0}},
		})
	}
	return map[string]any{"Records": recs}
}

// objectCreated is EventBridge's Object Created event from S3.
func objectCreated(bucket, key string) map[string]any {
	return map[string]any{
		"version": "0", "id": "17793124-05d4-b198-2fde-7ededc63b103", "detail-type": "Object Created", "source": "aws.s3",
		"account": "123456789012", "time": "2026-12-03T10:00:20Z", "region": "us-east-1", "resources": []string{"arn:aws:s3:::" + bucket},
		"detail": map[string]any{"version": "0", "bucket": map[string]any{"name": bucket},
			"object": map[string]any{"key": key, "size": 0, "etag": "d41d8cd98f00b204e9800998ecf8427e"}, "reason": "PutObject"},
	}
}

// labelUpdated is Secrets Manager's Secret Label Updated event.
func labelUpdated(arn, label, versionID string) map[string]any {
	name := arn[strings.LastIndex(arn, ":")+1:]
	return map[string]any{
		"version": "0", "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718", "detail-type": "Secret Label Updated", "source": "aws.secretsmanager",
		"account": "123456789012", "time": "2026-12-03T10:00:20Z", "region": "us-east-1", "resources": []string{arn},
		"detail": map[string]any{"name": name, "labelUpdated": label, "versionId": versionID},
	}
}

// TestArmsFromBothShapes: a marker's creation, as an S3 event notification
// (its key URL-encoded) or as EventBridge's Object Created, arms a one-time
// schedule for its target at its minute, exactly as specified.
func TestArmsFromBothShapes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	out, err := f.handle(s3Notification(f.bucket.Bucket, "ObjectCreated:Put", "wake/arm/processor/2026-12-03T10:15:00Z"))
	if err != nil || strings.Join(out.Armed, ",") != "processor-20261203T1015" {
		t.Fatalf("S3 notification: %+v %v\n%s", out, err, f.logs)
	}
	out, err = f.handle(objectCreated(f.bucket.Bucket, "wake/arm/archiver/2026-12-03T11:00:00Z"))
	if err != nil || strings.Join(out.Armed, ",") != "archiver-20261203T1100" {
		t.Fatalf("EventBridge: %+v %v\n%s", out, err, f.logs)
	}
	for name, want := range map[string]struct{ arn, expr string }{
		"processor-20261203T1015": {processorARN, "at(2026-12-03T10:15:00)"},
		"archiver-20261203T1100":  {archiverARN, "at(2026-12-03T11:00:00)"},
	} {
		sc, ok := f.sched.Get(group, name)
		if !ok {
			t.Fatalf("no schedule %s: %+v", name, f.sched.Schedules())
		}
		for _, c := range []struct{ field, got, want string }{
			{"ScheduleExpression", sc.ScheduleExpression, want.expr},
			{"ScheduleExpressionTimezone", sc.ScheduleExpressionTimezone, "UTC"},
			{"FlexibleTimeWindowMode", sc.FlexibleTimeWindowMode, "OFF"},
			{"ActionAfterCompletion", sc.ActionAfterCompletion, "DELETE"},
			{"State", sc.State, "ENABLED"},
			{"Target.Arn", sc.Target.Arn, want.arn},
			{"Target.RoleArn", sc.Target.RoleArn, roleARN},
			{"Target.Input", sc.Target.Input, `{"wake":"schedule"}`},
		} {
			if c.got != c.want {
				t.Errorf("%s: %s = %q, want %q", name, c.field, c.got, c.want)
			}
		}
		if wantRetry := (localscheduler.RetryPolicy{MaximumEventAgeInSeconds: 3600, MaximumRetryAttempts: 10}); sc.Target.RetryPolicy == nil || *sc.Target.RetryPolicy != wantRetry {
			t.Errorf("%s: Target.RetryPolicy = %+v, want %+v", name, sc.Target.RetryPolicy, wantRetry)
		}
	}
	// An EventBridge key that arrives URL-encoded all the same is read.
	if out, err := f.handle(objectCreated(f.bucket.Bucket, "wake/arm/processor/2026-12-03T10%3A20%3A00Z")); err != nil || strings.Join(out.Armed, ",") != "processor-20261203T1020" {
		t.Fatalf("an encoded EventBridge key: %+v %v", out, err)
	}
}

// TestArmingIsIdempotent: the same marker delivered again, or another for
// the same target and minute (in one notification too), arms one schedule:
// ConflictException is "already armed".
func TestArmingIsIdempotent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ev := s3Notification(f.bucket.Bucket, "ObjectCreated:Put", "wake/arm/processor/2026-12-03T10:15:00Z", "wake/arm/processor/2026-12-03T10:15:00Z")
	for range 3 {
		out, err := f.handle(ev)
		if err != nil || strings.Join(out.Armed, ",") != "processor-20261203T1015,processor-20261203T1015" {
			t.Fatalf("%+v %v", out, err)
		}
	}
	if out, err := f.handle(objectCreated(f.bucket.Bucket, "wake/arm/processor/2026-12-03T10:15:00Z")); err != nil || len(out.Armed) != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	if n := len(f.sched.Schedules()); n != 1 {
		t.Fatalf("%d schedules: %+v", n, f.sched.Schedules())
	}
}

// TestClamp: a time past, or less than a minute ahead, becomes the first
// whole minute at least a minute ahead; a later one is kept.
func TestClamp(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 10, 0, 20, 0, time.UTC)
	for at, want := range map[string]string{
		"2026-12-03T09:00:00Z": "2026-12-03T10:02:00Z", // an hour past
		"2026-12-03T10:00:00Z": "2026-12-03T10:02:00Z", // this minute
		"2026-12-03T10:01:00Z": "2026-12-03T10:02:00Z", // 40 s ahead
		"2026-12-03T10:02:00Z": "2026-12-03T10:02:00Z", // 100 s ahead
		"2026-12-03T10:03:00Z": "2026-12-03T10:03:00Z",
	} {
		a, _ := time.Parse(time.RFC3339, at)
		if got := relay.Clamp(a, now).Format(time.RFC3339); got != want {
			t.Errorf("Clamp(%s) = %s, want %s", at, got, want)
		}
	}
	// On a whole minute, a minute ahead is enough.
	if got := relay.Clamp(now.Truncate(time.Minute), now.Truncate(time.Minute)).Format(time.RFC3339); got != "2026-12-03T10:01:00Z" {
		t.Errorf("on the minute: %s", got)
	}
}

// TestPastMarkersAreClamped: a marker for a minute already past (a
// delayed delivery) arms its schedule at the first whole minute at least a
// minute ahead, under the marker's own name.
func TestPastMarkersAreClamped(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for key, want := range map[string]string{
		"wake/arm/processor/2026-12-03T09:58:00Z": "at(2026-12-03T10:02:00)",
		"wake/arm/archiver/2026-12-03T10:01:00Z":  "at(2026-12-03T10:02:00)",
	} {
		out, err := f.handle(objectCreated(f.bucket.Bucket, key))
		if err != nil || len(out.Armed) != 1 {
			t.Fatalf("%s: %+v %v", key, out, err)
		}
		if sc, _ := f.sched.Get(group, out.Armed[0]); sc.ScheduleExpression != want {
			t.Errorf("%s armed %s %s, want %s", key, out.Armed[0], sc.ScheduleExpression, want)
		}
	}
	if _, ok := f.sched.Get(group, "processor-20261203T0958"); !ok {
		t.Fatalf("schedules %+v", f.sched.Schedules())
	}
}

// TestMalformedKeysAreSkipped: a marker whose target or time cannot be
// read is logged with its cause and skipped, without failing the
// invocation (a retry would not mend it), while the good ones in the same
// notification are armed; keys of other prefixes, other buckets and other
// events are ignored.
func TestMalformedKeysAreSkipped(t *testing.T) {
	t.Parallel()
	f := setup(t)
	bad := []string{
		"wake/arm/receiver/2026-12-03T10:15:00Z",       // unknown target
		"wake/arm/processor/2026-12-03T10:15:30Z",      // seconds
		"wake/arm/processor/2026-12-03T11:15:00+01:00", // not UTC
		"wake/arm/processor/2026-12-03T10:15:00.000Z",  // fraction
		"wake/arm/processor/tomorrow",
		"wake/arm/processor/2026-12-03T10:15:00Z/extra",
		"wake/arm/processor",
	}
	keys := append([]string{"wake/arm/processor/2026-12-03T10:15:00Z", "wake/other/x", "config/sources.json"}, bad...)
	out, err := f.handle(s3Notification(f.bucket.Bucket, "ObjectCreated:Put", keys...))
	if err != nil {
		t.Fatalf("a notification with bad keys: %v", err)
	}
	if got := strings.Join(out.Armed, ","); got != "processor-20261203T1015" {
		t.Errorf("Armed = %s, want processor-20261203T1015", got)
	}
	if len(out.Skipped) != len(bad) {
		t.Errorf("Skipped = %v, want the %d bad keys", out.Skipped, len(bad))
	}
	if out.Ignored != 2 {
		t.Errorf("Ignored = %d, want 2", out.Ignored)
	}
	for _, s := range out.Skipped {
		if !strings.HasSuffix(s, ": malformed_key") {
			t.Errorf("skipped %q", s)
		}
	}
	if n := strings.Count(f.logs.String(), `"cause":"malformed_key"`); n != len(bad) {
		t.Fatalf("%d malformed_key lines:\n%s", n, f.logs)
	}
	// A key S3 could not have encoded.
	raw := s3Notification(f.bucket.Bucket, "ObjectCreated:Put")
	raw["Records"] = []any{map[string]any{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
		"s3": map[string]any{"bucket": map[string]any{"name": f.bucket.Bucket}, "object": map[string]any{"key": "wake/arm/processor/%zz"}}}}
	if out, err := f.handle(raw); err != nil || len(out.Skipped) != 1 {
		t.Fatalf("undecodable key: %+v %v", out, err)
	}
	// Another bucket, and a deletion, are ignored.
	if out, err := f.handle(s3Notification("someone-elses", "ObjectCreated:Put", "wake/arm/processor/2026-12-03T10:16:00Z")); err != nil || out.Ignored != 1 || len(out.Armed) != 0 {
		t.Fatalf("another bucket: %+v %v", out, err)
	}
	if out, err := f.handle(s3Notification(f.bucket.Bucket, "ObjectRemoved:Delete", "wake/arm/processor/2026-12-03T10:16:00Z")); err != nil || out.Ignored != 1 {
		t.Fatalf("a deletion: %+v %v", out, err)
	}
	if n := len(f.sched.Schedules()); n != 1 {
		t.Fatalf("%d schedules", n)
	}
}

// TestSchedulerDownFailsTheInvocation: a schedule that could not be
// created fails the invocation (the event is delivered again), after the
// other markers were tried; a malformed one is still only skipped.
func TestSchedulerDownFailsTheInvocation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.relay = f.newRelay(closedEndpoint(t), nil)
	out, err := f.handle(s3Notification(f.bucket.Bucket, "ObjectCreated:Put", "wake/arm/processor/2026-12-03T10:15:00Z", "wake/arm/nobody/2026-12-03T10:15:00Z"))
	if err == nil || !strings.Contains(err.Error(), "create schedule inbox-wake/processor-20261203T1015") || len(out.Skipped) != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	if !strings.Contains(f.logs.String(), `"cause":"schedule_failed"`) {
		t.Fatalf("logs:\n%s", f.logs)
	}
}

// TestUnknownEventsAreErrors: an event of no known shape fails with an
// error naming the shapes the relay knows, logged with its cause; no
// input makes it panic.
func TestUnknownEventsAreErrors(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for name, raw := range map[string]string{
		"not JSON":         `hello`,
		"an array":         `[1,2]`,
		"empty":            `{}`,
		"SQS":              `{"Records":[{"eventSource":"aws:sqs","body":"x"}]}`,
		"no records":       `{"Records":[]}`,
		"records not list": `{"Records":{"a":1}}`,
		"another detail":   `{"source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{}}`,
		"a schedule":       `{"wake":"schedule"}`,
	} {
		out, err := f.relay.Handle(t.Context(), json.RawMessage(raw))
		if err == nil || !strings.Contains(err.Error(), "relay:") || out.Event != "" {
			t.Errorf("%s: %+v %v", name, out, err)
		}
	}
	if n := strings.Count(f.logs.String(), `"cause":"unknown_event"`); n != 8 {
		t.Fatalf("%d unknown_event lines:\n%s", n, f.logs)
	}
}

// TestCopyOnLabelUpdate: AWSCURRENT moving on the sources secret copies
// the document to config/sources.json, SSE-S3 encrypted, JSON, with the
// version's id; another label or another secret is ignored; a partial ARN
// in the configuration matches the event's full one.
func TestCopyOnLabelUpdate(t *testing.T) {
	t.Parallel()
	f := setup(t)
	out, err := f.handle(labelUpdated(f.secretARN, "AWSCURRENT", "v1"))
	if err != nil || out.Copied == "" || out.Event != "secret" {
		t.Fatalf("%+v %v\n%s", out, err, f.logs)
	}
	f.checkCopy(validSources, out.Copied)
	if len(out.Armed) != 0 {
		t.Fatalf("a new version of the secret armed %v", out.Armed)
	}

	rotated := strings.Replace(validSources, sourcesSecret, sourcesSecret+"-2", 1)
	f.secrets.Put(f.secretARN, rotated)
	for _, ev := range []map[string]any{labelUpdated(f.secretARN, "STAGING", "v2"), labelUpdated(f.secretARN+"x", "AWSCURRENT", "v2")} {
		if out, err := f.handle(ev); err != nil || out.Ignored != 1 || out.Copied != "" {
			t.Fatalf("%+v %v", out, err)
		}
	}
	f.checkCopy(validSources, out.Copied)

	// The configuration names the secret by its partial ARN (which
	// Secrets Manager resolves; the stand-in holds it under both), the
	// event by its full ARN.
	partial := f.secretARN[:len(f.secretARN)-len("-a1b2c3")]
	f.secrets.Put(partial, rotated)
	f.relay = f.newRelay(f.sched.Endpoint(), func(c *relay.Config, _ *blobstore.Config) { c.SourcesSecretARN = partial })
	out2, err := f.handle(labelUpdated(f.secretARN, "AWSCURRENT", "v2"))
	if err != nil || out2.Copied == out.Copied {
		t.Fatalf("%+v %v", out2, err)
	}
	f.checkCopy(rotated, out2.Copied)
	f.noSecretLeaked(fmt.Sprint(out, out2))
}

// checkCopy checks the copy holds doc, from version, as specified.
func (f *fixture) checkCopy(doc, version string) {
	f.t.Helper()
	ctx := f.t.Context()
	got, err := f.store.Get(ctx, "config/sources.json")
	if err != nil || string(got) != doc {
		f.t.Fatalf("copy %q, %v; want the secret's value", got, err)
	}
	head, err := f.store.Head(ctx, "config/sources.json")
	if err != nil || head.ContentType != "application/json" || head.Metadata["secret-version-id"] != version {
		f.t.Fatalf("copy %+v, %v; want application/json and secret-version-id %s", head, err, version)
	}
	var last http.Header
	for _, r := range f.rec.Requests() {
		if r.Method == http.MethodPut {
			last = r.Header
		}
	}
	if last.Get("X-Amz-Server-Side-Encryption") != "AES256" || last.Get("X-Amz-Meta-Secret-Version-Id") != version {
		f.t.Fatalf("PUT headers %v", last)
	}
}

// TestInvalidDocumentIsRefused: a version that is not a valid sources
// document is not copied (the previous copy stays) and fails the
// invocation, logged with its cause, never quoting the document.
func TestInvalidDocumentIsRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	first, err := f.handle(labelUpdated(f.secretARN, "AWSCURRENT", "v1"))
	if err != nil {
		t.Fatal(err)
	}
	for i, doc := range []string{
		`{"sources":{"acme":{"kind":"stripe","secret":["` + sourcesSecret + `"]}}}`, // misspelt field
		`{"sources":{"acme":{"kind":"nope","secrets":["` + sourcesSecret + `"]}}}`,
		`not json ` + sourcesSecret,
	} {
		f.secrets.Put(f.secretARN, doc)
		out, err := f.handle(labelUpdated(f.secretARN, "AWSCURRENT", fmt.Sprintf("bad-%d", i)))
		if err == nil || !strings.Contains(err.Error(), "is not a valid sources document") || !strings.Contains(err.Error(), "the previous copy is kept") {
			t.Fatalf("%d: %+v %v", i, out, err)
		}
		f.noSecretLeaked(err.Error())
		f.checkCopy(validSources, first.Copied)
	}
	if n := strings.Count(f.logs.String(), `"cause":"invalid_sources"`); n != 3 {
		t.Fatalf("%d invalid_sources lines:\n%s", n, f.logs)
	}
}

// TestCustomResource: Custom::SourcesCopy's Create and Update copy the
// document (Update after a rotation copies the new version); Delete
// deletes the copy and every object under wake/ and config/, leaving the
// rest of the bucket; each request is answered once, exactly.
func TestCustomResource(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	out, err := f.handle(f.request("Create"))
	if err != nil || out.Status != "SUCCESS" {
		t.Fatalf("%+v %v\n%s", out, err, f.logs)
	}
	f.checkAnswer("Create", "SUCCESS", fmt.Sprintf("copied version %s of the sources secret to s3://%s/config/sources.json", out.Copied, f.bucket.Bucket),
		fmt.Sprintf(`{"SecretVersionId":%q,"SourcesKey":"config/sources.json"}`, out.Copied))
	f.checkCopy(validSources, out.Copied)
	// A deploy arms a processor wake-up a minute on, for whatever it left
	// stored and not processed.
	if len(out.Armed) != 1 || !strings.HasPrefix(out.Armed[0], "processor-") {
		t.Fatalf("armed after Create: %v", out.Armed)
	}
	if _, ok := f.sched.Get(group, out.Armed[0]); !ok {
		t.Fatalf("no schedule %s: %+v", out.Armed[0], f.sched.Schedules())
	}
	// A deploy arms a processor wake-up a minute on, for whatever it left
	// stored and not processed.
	if len(out.Armed) != 1 || !strings.HasPrefix(out.Armed[0], "processor-") {
		t.Fatalf("armed after Create: %v", out.Armed)
	}
	if _, ok := f.sched.Get(group, out.Armed[0]); !ok {
		t.Fatalf("no schedule %s: %+v", out.Armed[0], f.sched.Schedules())
	}

	rotated := strings.Replace(validSources, sourcesSecret, sourcesSecret+"-2", 1)
	f.secrets.Put(f.secretARN, rotated)
	out, err = f.handle(f.request("Update"))
	if err != nil || out.Status != "SUCCESS" {
		t.Fatalf("%+v %v", out, err)
	}
	f.checkCopy(rotated, out.Copied)

	// Markers, a few hundred, and what is not the relay's.
	for i := range 300 {
		if _, err := f.store.Put(ctx, fmt.Sprintf("wake/arm/processor/2026-12-03T10:%02d:00Z-%d", i%60, i), nil, "text/plain"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.store.Put(ctx, "config/other.json", []byte("{}"), "application/json"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Put(ctx, "archive/keep.bin", []byte("x"), "application/octet-stream"); err != nil {
		t.Fatal(err)
	}
	out, err = f.handle(f.request("Delete"))
	if err != nil || out.Status != "SUCCESS" || out.Deleted != 302 {
		t.Fatalf("%+v %v\n%s", out, err, f.logs)
	}
	f.checkAnswer("Delete", "SUCCESS", fmt.Sprintf("deleted 302 objects under wake/ and config/ of %s, the sources document's copy included", f.bucket.Bucket), "")
	for _, prefix := range []string{"wake/", "config/"} {
		if left, err := f.store.List(ctx, prefix); err != nil || len(left) != 0 {
			t.Fatalf("%s left: %d %v", prefix, len(left), err)
		}
	}
	if kept, err := f.store.List(ctx, "archive/"); err != nil || len(kept) != 1 {
		t.Fatalf("archive/ = %v %v", kept, err)
	}
	// A Delete again (CloudFormation may resend it) finds nothing and succeeds.
	if out, err := f.handle(f.request("Delete")); err != nil || out.Status != "SUCCESS" || out.Deleted != 0 {
		t.Fatalf("%+v %v", out, err)
	}
	if n := f.answers.count(); n != 4 {
		t.Fatalf("%d answers for 4 requests", n)
	}
	f.noSecretLeaked(string(f.answers.all()))
}

// TestDeleteEmptiesAVersionedBucket: in a versioned control bucket, Delete
// removes every version and delete marker under the prefixes.
func TestDeleteEmptiesAVersionedBucket(t *testing.T) {
	t.Parallel()
	f := setup(t, options{s3Opts: locals3.Options{Versioning: true}, versioned: true})
	ctx := t.Context()
	if _, err := f.handle(f.request("Create")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.handle(f.request("Update")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Put(ctx, "wake/arm/processor/2026-12-03T10:15:00Z", nil, "text/plain"); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Delete(ctx, "wake/arm/processor/2026-12-03T10:15:00Z"); err != nil {
		t.Fatal(err)
	}
	before, err := f.store.ListVersions(ctx, "")
	if err != nil || len(before) < 4 {
		t.Fatalf("versions before: %+v %v", before, err)
	}
	out, err := f.handle(f.request("Delete"))
	if err != nil || out.Status != "SUCCESS" || out.Deleted != len(before) {
		t.Fatalf("%+v %v (%d versions)\n%s", out, err, len(before), f.logs)
	}
	if after, err := f.store.ListVersions(ctx, ""); err != nil || len(after) != 0 {
		t.Fatalf("versions left: %+v %v", after, err)
	}
}

// TestCustomResourceFailuresAnswerFailed: a document that is not valid, a
// secret that cannot be read, another resource type, or work that cannot
// finish in time: each is answered (FAILED, or SUCCESS for a Delete that
// is not the relay's), with a reason holding no secret, before the
// deadline; an answer that cannot be delivered fails the invocation.
func TestCustomResourceFailuresAnswerFailed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.secrets.Put(f.secretARN, `{"sources":{"acme":{"kind":"stripe","secret":["`+sourcesSecret+`"]}}}`)
	if out, err := f.handle(f.request("Create")); err != nil || out.Status != "FAILED" {
		t.Fatalf("%+v %v", out, err)
	}
	f.checkAnswerContains("FAILED", "Create failed: the sources secret "+f.secretARN+", version ", "is not a valid sources document")

	f.relay = f.newRelay(f.sched.Endpoint(), func(c *relay.Config, _ *blobstore.Config) { c.SourcesSecretARN += "-gone" })
	if out, err := f.handle(f.request("Update")); err != nil || out.Status != "FAILED" {
		t.Fatalf("%+v %v", out, err)
	}
	f.checkAnswerContains("FAILED", "Update failed: read the sources secret "+f.secretARN+"-gone", "ResourceNotFoundException")

	other := f.request("Create")
	other.ResourceType = "Custom::DatabaseSchema"
	if _, err := f.handle(other); err != nil {
		t.Fatal(err)
	}
	f.checkAnswerContains("FAILED", "Create failed: the relay answers for Custom::SourcesCopy, not Custom::DatabaseSchema")
	other.RequestType = cfn.RequestDelete
	if _, err := f.handle(other); err != nil {
		t.Fatal(err)
	}
	f.checkAnswerContains("SUCCESS", "nothing deleted")

	// S3 that accepts connections and never answers: the work is given up
	// in time to answer. The answer is sent under the invocation's own
	// context, so that it was delivered proves it went out before the
	// deadline. The deadline is Lambda's, in real time: a short one keeps
	// the wait short, and half of it is kept to answer a loopback server.
	f.relay = f.newRelay(f.sched.Endpoint(), func(_ *relay.Config, conn *blobstore.Config) {
		conn.Endpoint = blackhole(t)
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	raw, _ := json.Marshal(f.request("Delete"))
	out, err := f.relay.Handle(ctx, raw)
	if err != nil || out.Status != "FAILED" {
		t.Fatalf("%+v %v", out, err)
	}
	f.checkAnswerContains("FAILED", "Delete failed: 0 objects deleted", "the relay ran out of time")
	f.noSecretLeaked(string(f.answers.all()))

	// An answer that cannot be delivered fails the invocation.
	g := setup(t)
	g.answers.refuse(http.StatusForbidden)
	before := g.clock.Now()
	if _, err := g.handle(g.request("Create")); err == nil || !strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "X-Amz-Signature") {
		t.Fatalf("undelivered: %v", err)
	}
	if !strings.Contains(g.logs.String(), `"cause":"answer_undelivered"`) || strings.Contains(g.logs.String(), "X-Amz-Signature") {
		t.Fatalf("logs:\n%s", g.logs)
	}
	// The retries wait on the relay's clock (a test's returns at once).
	if !g.clock.Now().After(before) {
		t.Fatal("the answer's retries did not wait on the relay's clock")
	}
}

func (f *fixture) request(typ string) cfn.Event {
	ev := cfn.Event{
		RequestType: cfn.RequestType(typ), RequestID: "req-" + strings.ToLower(typ), ResponseURL: f.answers.url(),
		ResourceType: "Custom::SourcesCopy", LogicalResourceID: "SourcesCopy", StackID: stackID,
		ResourceProperties: map[string]any{"ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:inbox-RelayFunction", "SecretArn": f.secretARN},
	}
	if typ != "Create" {
		ev.PhysicalResourceID = relay.PhysicalResourceID
	}
	return ev
}

// checkAnswer checks the last answer is exactly CloudFormation's document.
func (f *fixture) checkAnswer(typ, status, reason, data string) {
	f.t.Helper()
	r, _ := json.Marshal(reason)
	want := fmt.Sprintf(`{"Status":%q,"Reason":%s,"PhysicalResourceId":"webhook-inbox-sources-copy","StackId":%q,"RequestId":%q,"LogicalResourceId":"SourcesCopy","NoEcho":false`,
		status, r, stackID, "req-"+strings.ToLower(typ))
	if data != "" {
		want += `,"Data":` + data
	}
	want += "}"
	if got := string(f.answers.last(f.t)); got != want {
		f.t.Fatalf("%s answered\n%s\nwant\n%s", typ, got, want)
	}
}

func (f *fixture) checkAnswerContains(status string, parts ...string) {
	f.t.Helper()
	var got cfnresponse.Response
	body := f.answers.last(f.t)
	if err := json.Unmarshal(body, &got); err != nil {
		f.t.Fatal(err)
	}
	if got.Status != status {
		f.t.Fatalf("answer %s, want %s", body, status)
	}
	for _, p := range parts {
		if !strings.Contains(got.Reason, p) {
			f.t.Fatalf("reason %q lacks %q", got.Reason, p)
		}
	}
}

// responder stands in for the pre-signed ResponseURL: it records every PUT
// and answers 200, or the status refuse set.
type responder struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     [][]byte
	refused int
}

func newResponder(t *testing.T) *responder {
	r := &responder{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if req.Method != http.MethodPut || req.Header.Get("Content-Type") != "" || len(req.Header.Values("Content-Type")) != 1 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if r.refused != 0 {
			w.WriteHeader(r.refused)
			return
		}
		r.got = append(r.got, body)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *responder) url() string {
	return r.srv.URL + "/cloudformation-custom-resource-response-useast1/x?X-Amz-Signature=0ddba11"
}

func (r *responder) refuse(status int) { r.mu.Lock(); r.refused = status; r.mu.Unlock() }

func (r *responder) last(t *testing.T) []byte {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		t.Fatal("no answer")
	}
	return r.got[len(r.got)-1]
}

func (r *responder) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.got) }

func (r *responder) all() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Join(r.got, []byte("\n"))
}

// closedEndpoint is a loopback URL nothing listens on.
func closedEndpoint(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// blackhole is a loopback URL whose server accepts connections and never
// answers.
func blackhole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// TestForgedRequestDoesNothing: a custom resource request whose ResponseURL
// is not CloudFormation's bucket (plain HTTP, another host), as anyone
// allowed to invoke the function could send, is refused before anything
// is done: a forged Delete empties nothing, and nothing is PUT anywhere.
func TestForgedRequestDoesNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	if _, err := f.handle(f.request("Create")); err != nil {
		t.Fatal(err)
	}
	answered := f.answers.count()
	before, err := f.store.List(ctx, "")
	if err != nil || len(before) == 0 {
		t.Fatalf("objects before: %v %v", before, err)
	}
	env := f.env()
	cfg, err := relay.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || cfg.LocalResponseURL {
		t.Fatalf("the environment alone allows a loopback ResponseURL: %v %v", cfg.LocalResponseURL, err)
	}
	for _, target := range []string{
		"http://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/x?X-Amz-Signature=s",
		"https://attacker.example.com/x?X-Amz-Signature=s",
	} {
		ev := f.request("Delete")
		ev.ResponseURL = target
		if out, err := f.handle(ev); err == nil || out.Deleted != 0 || strings.Contains(err.Error(), "X-Amz-Signature") {
			t.Fatalf("forged Delete to %s: %+v, %v", target, out, err)
		}
	}
	if after, err := f.store.List(ctx, ""); err != nil || len(after) != len(before) {
		t.Fatalf("objects after the forged Deletes: %d of %d, %v", len(after), len(before), err)
	}
	if f.answers.count() != answered {
		t.Fatalf("a forged request was answered at the stand-in")
	}
	if !strings.Contains(f.logs.String(), `"cause":"refused_request"`) {
		t.Fatalf("logs:\n%s", f.logs)
	}
}
