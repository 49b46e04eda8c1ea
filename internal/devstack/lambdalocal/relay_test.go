package lambdalocal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localscheduler"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localsecrets"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/pinnedtools"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/relay"
)

// TestRelayUnderTheEmulator: the relay's real bootstrap, built by its
// Makefile target, runs under the Runtime Interface Emulator with its
// real AWS SDK clients pointed at a real S3 (versitygw) control bucket and
// the Secrets Manager and EventBridge Scheduler stand-ins. It answers
// Custom::SourcesCopy's Create (the sources document copied), arms a
// wake-up schedule from an S3 notification, copies a rotated secret on its
// Secret Label Updated event, fails on an event it does not know, and
// answers Delete with the control bucket's wake/ and config/ emptied; no
// log line holds the sources' secret.
func TestRelayUnderTheEmulator(t *testing.T) {
	tier.Heavy(t, "builds the relay and runs it under the emulator")
	ctx := context.Background()
	root, err := pinnedtools.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rie, err := pinnedtools.Tool(ctx, "aws-lambda-rie", "AWS_LAMBDA_RIE")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bins, err := lambdalocal.Build(ctx, root, dir, []string{"RelayFunction"})
	if err != nil {
		t.Fatal(err)
	}
	s3srv := s3test.Server(t)
	bucket := s3test.Bucket(t, s3srv)
	store := s3test.Open(t, bucket)
	secrets, err := localsecrets.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer secrets.Close()
	sched, err := localscheduler.Start(localscheduler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sched.Close()

	const secret = "whsec_relay_emulator_0123456789abcd"
	doc := `{"sources":{"acme":{"kind":"stripe","secrets":["` + secret + `"]}}}`
	sourcesARN := secrets.Create("inbox-sources", doc)
	env := append([]string{"LOG_LEVEL=debug",
		"RELAY_CONTROL_BUCKET=" + bucket.Bucket, "RELAY_SOURCES_SECRET_ARN=" + sourcesARN, "RELAY_SCHEDULE_GROUP=inbox-wake",
		"RELAY_SCHEDULER_ROLE_ARN=arn:aws:iam::123456789012:role/inbox-SchedulerRole",
		"RELAY_PROCESSOR_ARN=arn:aws:lambda:us-east-1:123456789012:function:inbox-ProcessorFunction",
		"RELAY_ARCHIVER_ARN=arn:aws:lambda:us-east-1:123456789012:function:inbox-ArchiverFunction",
		"S3_ENDPOINT=" + s3srv.Endpoint(), "S3_ACCESS_KEY_ID=" + locals3.AccessKeyID, "S3_SECRET_ACCESS_KEY=" + locals3.SecretAccessKey,
		"AWS_REGION=" + locals3.Region, "AWS_ENDPOINT_URL_SCHEDULER=" + sched.Endpoint(),
		// The answers' stand-in is on loopback, as the local stack's is.
		relay.EnvLocalResponseURL + "=true",
	}, secrets.Env()...)
	em, err := lambdalocal.StartEmulator(ctx, lambdalocal.EmulatorOptions{
		Name: "RelayFunction", RIE: rie, Bootstrap: bins["RelayFunction"], Timeout: 30 * time.Second, MemoryMB: 128,
		Env: env, LogPath: filepath.Join(dir, "RelayFunction.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer em.Close()

	request := func(typ cfn.RequestType) cfn.Event {
		ev := cfn.Event{RequestType: typ, RequestID: "req-" + strings.ToLower(string(typ)), ResourceType: "Custom::SourcesCopy",
			LogicalResourceID: "SourcesCopy", StackID: stackID,
			ResourceProperties: map[string]any{"ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:inbox-RelayFunction", "SecretArn": sourcesARN}}
		if typ != cfn.RequestCreate {
			ev.PhysicalResourceID = "webhook-inbox-sources-copy"
		}
		return ev
	}
	answer := func(typ cfn.RequestType) map[string]any {
		t.Helper()
		a, _, err := lambdalocal.InvokeCustomResource(ctx, em, request(typ))
		if err != nil {
			t.Fatalf("%s: %v\n%s", typ, err, tailOf(em))
		}
		if !field.Check(t, string(typ)+"'s answer",
			field.Eq("Method", a.Method, "PUT"),
			field.Is("Content-Type", a.ContentType, len(a.ContentType) == 1 && a.ContentType[0] == "", "present and empty"),
			field.Eq("Content-Length", a.ContentLength, int64(len(a.Body))),
		) {
			t.FailNow()
		}
		m, err := a.Response()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	// Create: the document copied, with its version.
	created := answer(cfn.RequestCreate)
	data, _ := created["Data"].(map[string]any)
	if created["Status"] != "SUCCESS" || data["SourcesKey"] != "config/sources.json" || data["SecretVersionId"] == "" {
		t.Fatalf("Create answered %v", created)
	}
	if got, err := store.Get(ctx, "config/sources.json"); err != nil || string(got) != doc {
		t.Fatalf("the copy: %q %v", got, err)
	}

	// A marker's creation, as S3 notifies it: a schedule armed.
	notification := fmt.Sprintf(`{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"us-east-1","eventName":"ObjectCreated:Put",
		"s3":{"s3SchemaVersion":"1.0","bucket":{"name":%q},"object":{"key":"wake/arm/processor/2030-01-02T03%%3A04%%3A00Z","size":0}}}]}`, bucket.Bucket)
	out, err := em.Invoke(ctx, []byte(notification))
	if err != nil || !strings.Contains(string(out), `"armed":["processor-20300102T0304"]`) {
		t.Fatalf("the notification: %s %v", out, err)
	}
	if sc, ok := sched.Get("inbox-wake", "processor-20300102T0304"); !ok || sc.ScheduleExpression != "at(2030-01-02T03:04:00)" || sc.ActionAfterCompletion != "DELETE" {
		t.Fatalf("schedule %+v %v", sc, ok)
	}

	// A rotation: the new version copied on its event.
	rotated := strings.Replace(doc, secret, secret+"-2", 1)
	secrets.Put(sourcesARN, rotated)
	ev, _ := json.Marshal(map[string]any{"version": "0", "detail-type": "Secret Label Updated", "source": "aws.secretsmanager",
		"resources": []string{sourcesARN}, "detail": map[string]any{"name": "inbox-sources", "labelUpdated": "AWSCURRENT", "versionId": "v2"}})
	if out, err := em.Invoke(ctx, ev); err != nil || !strings.Contains(string(out), `"copied"`) {
		t.Fatalf("the label event: %s %v", out, err)
	}
	if got, err := store.Get(ctx, "config/sources.json"); err != nil || string(got) != rotated {
		t.Fatalf("the copy after the rotation: %q %v", got, err)
	}

	// An event it does not know fails the invocation.
	if out, err := em.Invoke(ctx, []byte(`{"hello":"world"}`)); err == nil || !strings.Contains(err.Error(), "unknown event") {
		t.Fatalf("an unknown event: %s %v", out, err)
	}

	// Delete: the copy and the markers gone, so the bucket can be deleted.
	if _, err := store.Put(ctx, "wake/arm/archiver/2030-01-02T04:00:00Z", nil, "text/plain"); err != nil {
		t.Fatal(err)
	}
	deleted := answer(cfn.RequestDelete)
	if deleted["Status"] != "SUCCESS" {
		t.Fatalf("Delete answered %v", deleted)
	}
	if left, err := store.List(ctx, ""); err != nil || len(left) != 0 {
		t.Fatalf("left in the bucket: %v %v", left, err)
	}

	b, err := os.ReadFile(em.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) {
		t.Fatal("the relay's log holds the sources' secret")
	}
}
