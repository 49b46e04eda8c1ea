package destination

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testclock"
)

// awsCall is one request the SDK sent to the stand-in service.
type awsCall struct {
	header http.Header
	body   map[string]any
}

// awsService stands in for SQS or EventBridge at the SDK's BaseEndpoint:
// it records what the SDK encoded and answers as the service's JSON
// protocol does (answer writes the response; each test gives its own).
type awsService struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []awsCall
}

func newAWSService(t *testing.T, answer func(w http.ResponseWriter, body map[string]any)) *awsService {
	t.Helper()
	s := &awsService{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("the SDK sent a body that is not JSON: %q", raw)
		}
		s.mu.Lock()
		s.calls = append(s.calls, awsCall{header: r.Header.Clone(), body: body})
		s.mu.Unlock()
		answer(w, body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *awsService) recorded() []awsCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]awsCall(nil), s.calls...)
}

var testCredentials = credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "")

// awsSender is a Sender whose SQS and EventBridge clients talk to svc, with
// the SDK's own retries off: the caller owns retries, and a test sees
// each answer's classification.
func awsSender(t *testing.T, svc *awsService) *Sender {
	t.Helper()
	q := sqs.New(sqs.Options{Region: "eu-west-1", Credentials: testCredentials, BaseEndpoint: aws.String(svc.srv.URL), Retryer: aws.NopRetryer{}})
	eb := eventbridge.New(eventbridge.Options{Region: "eu-west-1", Credentials: testCredentials, BaseEndpoint: aws.String(svc.srv.URL), Retryer: aws.NopRetryer{}})
	return New(Config{}, Deps{SQS: q, EventBridge: eb, Clock: testclock.At(t0)})
}

// jsonError answers as the AWS JSON protocols answer an error; queryCode,
// when set, is SQS's query-compatible code header.
func jsonError(w http.ResponseWriter, status int, typ, queryCode string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	if queryCode != "" {
		w.Header().Set("x-amzn-query-error", queryCode+";Sender")
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": "it went wrong"})
}

func sqsOK(w http.ResponseWriter, body map[string]any) {
	sum := md5.Sum([]byte(body["MessageBody"].(string)))
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	json.NewEncoder(w).Encode(map[string]string{"MessageId": "m-1", "MD5OfMessageBody": hex.EncodeToString(sum[:])})
}

func checkSigned(t *testing.T, c awsCall, service, target string) {
	t.Helper()
	auth := c.header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(auth, "/eu-west-1/"+service+"/aws4_request") {
		t.Fatalf("Authorization %q is not SigV4 for %s", auth, service)
	}
	if got := c.header.Get("X-Amz-Target"); got != target {
		t.Fatalf("X-Amz-Target = %q, want %s", got, target)
	}
}

func attr(body map[string]any, name string) string {
	a, _ := body["MessageAttributes"].(map[string]any)[name].(map[string]any)
	if a == nil {
		return ""
	}
	return a["DataType"].(string) + ":" + a["StringValue"].(string)
}

func TestSQSFIFODeduplicatesOnTheMessageID(t *testing.T) {
	t.Parallel()
	svc := newAWSService(t, sqsOK)
	s := awsSender(t, svc)
	queue := "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo"
	d := delivery(`{"amount":1200,"note":"café"}`)
	r := s.Deliver(t.Context(), Target{SQS: &SQS{QueueURL: queue}}, d)
	if r.Outcome != Delivered {
		t.Fatalf("result %+v", r)
	}
	calls := svc.recorded()
	if len(calls) != 1 {
		t.Fatalf("%d calls", len(calls))
	}
	c := calls[0]
	checkSigned(t, c, "sqs", "AmazonSQS.SendMessage")
	want := map[string]any{
		"QueueUrl": queue, "MessageBody": string(d.Body),
		"MessageDeduplicationId": MessageID("billing", "evt_1"), "MessageGroupId": "billing",
	}
	for k, v := range want {
		if c.body[k] != v {
			t.Errorf("%s = %v, want %v", k, c.body[k], v)
		}
	}
	for name, v := range map[string]string{
		"source": "String:billing", "event_type": "String:invoice.paid", "event_id": "String:evt_1",
		"message_id": "String:" + MessageID("billing", "evt_1"), "body_encoding": "",
	} {
		if got := attr(c.body, name); got != v {
			t.Errorf("attribute %s = %q, want %q", name, got, v)
		}
	}
}

func TestSQSStandardQueueSendsBinaryAsBase64(t *testing.T) {
	t.Parallel()
	svc := newAWSService(t, sqsOK)
	s := awsSender(t, svc)
	d := delivery("\x00\xffnot text")
	d.Type = ""
	r := s.Deliver(t.Context(), Target{SQS: &SQS{QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"}}, d)
	if r.Outcome != Delivered {
		t.Fatalf("result %+v", r)
	}
	c := svc.recorded()[0]
	if _, ok := c.body["MessageDeduplicationId"]; ok {
		t.Error("a standard queue was given a deduplication id")
	}
	if _, ok := c.body["MessageGroupId"]; ok {
		t.Error("a standard queue was given a group id")
	}
	if got := c.body["MessageBody"]; got != base64.StdEncoding.EncodeToString(d.Body) {
		t.Errorf("body %q, want base64 of the body", got)
	}
	if attr(c.body, "body_encoding") != "String:base64" || attr(c.body, "event_type") != "" {
		t.Errorf("attributes %v, want body_encoding base64 and no empty event_type", c.body["MessageAttributes"])
	}
}

func TestSQSClassifiesFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		status    int
		typ       string
		queryCode string
		want      Outcome
		wantCode  string
	}{
		{"throttled", 400, "com.amazonaws.sqs#ThrottlingException", "", Retry, "ThrottlingException"},
		{"internal", 500, "com.amazonaws.sqs#InternalError", "", Retry, "InternalError"},
		{"no queue", 400, "com.amazonaws.sqs#QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", Retry, "AWS.SimpleQueueService.NonExistentQueue"},
		{"access denied", 403, "com.amazonaws.sqs#AccessDeniedException", "AccessDenied", Retry, "AccessDenied"},
		{"kms disabled", 400, "com.amazonaws.sqs#KmsDisabled", "", Retry, "KmsDisabled"},
		{"bad contents", 400, "com.amazonaws.sqs#InvalidMessageContents", "", Permanent, "InvalidMessageContents"},
		{"too long for the queue", 400, "com.amazonaws.sqs#InvalidParameterValueException", "InvalidParameterValue", Permanent, "InvalidParameterValue"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := newAWSService(t, func(w http.ResponseWriter, _ map[string]any) { jsonError(w, tc.status, tc.typ, tc.queryCode) })
			r := awsSender(t, svc).Deliver(t.Context(), Target{SQS: &SQS{QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"}}, delivery(`{}`))
			if r.Outcome != tc.want || r.Code != tc.wantCode || r.Status != tc.status || !strings.Contains(r.Message, tc.wantCode+": it went wrong") {
				t.Fatalf("result %+v, want %s with code %s and status %d", r, tc.want, tc.wantCode, tc.status)
			}
		})
	}
}

func TestSQSRefusesWhatItCannotSendBeforeSending(t *testing.T) {
	t.Parallel()
	svc := newAWSService(t, sqsOK)
	s := awsSender(t, svc)
	queue := Target{SQS: &SQS{QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"}}
	big := delivery(strings.Repeat("x", 1<<20))
	if r := s.Deliver(t.Context(), queue, big); r.Outcome != Permanent || !strings.Contains(r.Message, "SQS takes at most 1048576") {
		t.Fatalf("1 MiB body with attributes: %+v", r)
	}
	if r := s.Deliver(t.Context(), queue, delivery("")); r.Outcome != Permanent || !strings.Contains(r.Message, "empty") {
		t.Fatalf("empty body: %+v", r)
	}
	if n := len(svc.recorded()); n != 0 {
		t.Fatalf("%d calls reached SQS", n)
	}
	unset := New(Config{}, Deps{})
	if r := unset.Deliver(t.Context(), queue, delivery(`{}`)); r.Outcome != Retry || !strings.Contains(r.Message, "no SQS client") {
		t.Fatalf("no client: %+v", r)
	}
}

func eventsOK(w http.ResponseWriter, _ map[string]any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	io.WriteString(w, `{"FailedEntryCount":0,"Entries":[{"EventId":"e-1"}]}`)
}

func entry(t *testing.T, c awsCall) (map[string]any, map[string]any) {
	t.Helper()
	entries, _ := c.body["Entries"].([]any)
	if len(entries) != 1 {
		t.Fatalf("entries %v, want one", c.body["Entries"])
	}
	e := entries[0].(map[string]any)
	var detail map[string]any
	if err := json.Unmarshal([]byte(e["Detail"].(string)), &detail); err != nil {
		t.Fatalf("detail %q is not a JSON object: %v", e["Detail"], err)
	}
	return e, detail
}

func TestEventBridgePutsTheBodyAsDetail(t *testing.T) {
	t.Parallel()
	svc := newAWSService(t, eventsOK)
	s := awsSender(t, svc)
	bus := "arn:aws:events:eu-west-1:123456789012:event-bus/orders"
	r := s.Deliver(t.Context(), Target{EventBridge: &EventBridge{Bus: bus}}, delivery(` {"type":"invoice.paid","data":{"amount":1200}}`))
	if r.Outcome != Delivered {
		t.Fatalf("result %+v", r)
	}
	c := svc.recorded()[0]
	checkSigned(t, c, "events", "AWSEvents.PutEvents")
	e, detail := entry(t, c)
	if e["EventBusName"] != bus || e["Source"] != "webhook-inbox.billing" || e["DetailType"] != "invoice.paid" {
		t.Fatalf("entry %v", e)
	}
	if detail["type"] != "invoice.paid" || detail["data"].(map[string]any)["amount"] != 1200.0 {
		t.Fatalf("detail %v lost the body's members", detail)
	}
	inbox := detail["webhook_inbox"].(map[string]any)
	if inbox["message_id"] != MessageID("billing", "evt_1") || inbox["source"] != "billing" || inbox["event_id"] != "evt_1" || inbox["received_at"] != "2026-05-04T11:59:00Z" {
		t.Fatalf("detail's webhook_inbox %v", inbox)
	}
}

func TestEventBridgeWrapsWhatIsNotAJSONObject(t *testing.T) {
	t.Parallel()
	svc := newAWSService(t, eventsOK)
	s := awsSender(t, svc)
	target := Target{EventBridge: &EventBridge{Bus: "default", Source: "acme.hooks"}}
	for _, body := range []string{"a=1&b=\xff", `[1,2]`, `{}`, `{"webhook_inbox":1}`} {
		d := delivery(body)
		d.Type = ""
		if r := s.Deliver(t.Context(), target, d); r.Outcome != Delivered {
			t.Fatalf("%q: %+v", body, r)
		}
	}
	calls := svc.recorded()
	e, form := entry(t, calls[0])
	if e["Source"] != "acme.hooks" || e["DetailType"] != "webhook" {
		t.Fatalf("entry %v", e)
	}
	if form["body_base64"] != base64.StdEncoding.EncodeToString([]byte("a=1&b=\xff")) || form["webhook_inbox"] == nil {
		t.Fatalf("form body's detail %v", form)
	}
	if _, array := entry(t, calls[1]); array["body"].([]any)[1] != 2.0 {
		t.Fatalf("array body's detail %v", array)
	}
	if _, empty := entry(t, calls[2]); len(empty) != 1 || empty["webhook_inbox"] == nil {
		t.Fatalf("empty object's detail %v", empty)
	}
	if _, clash := entry(t, calls[3]); clash["body"].(map[string]any)["webhook_inbox"] != 1.0 {
		t.Fatalf("a body with its own webhook_inbox member: detail %v", clash)
	}
}

func TestEventBridgeClassifiesFailures(t *testing.T) {
	t.Parallel()
	failedEntry := func(code string) func(http.ResponseWriter, map[string]any) {
		return func(w http.ResponseWriter, _ map[string]any) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			json.NewEncoder(w).Encode(map[string]any{"FailedEntryCount": 1, "Entries": []any{map[string]string{"ErrorCode": code, "ErrorMessage": "entry went wrong"}}})
		}
	}
	cases := []struct {
		name     string
		answer   func(http.ResponseWriter, map[string]any)
		want     Outcome
		wantCode string
	}{
		{"entry throttled", failedEntry("ThrottlingException"), Retry, "ThrottlingException"},
		{"entry internal", failedEntry("InternalException"), Retry, "InternalException"},
		{"entry invalid", failedEntry("InvalidArgument"), Permanent, "InvalidArgument"},
		{"entry malformed", failedEntry("MalformedDetail"), Permanent, "MalformedDetail"},
		{"call throttled", func(w http.ResponseWriter, _ map[string]any) {
			jsonError(w, 400, "ThrottlingException", "")
		}, Retry, "ThrottlingException"},
		{"call denied", func(w http.ResponseWriter, _ map[string]any) {
			jsonError(w, 400, "AccessDeniedException", "")
		}, Retry, "AccessDeniedException"},
		{"no bus", func(w http.ResponseWriter, _ map[string]any) {
			jsonError(w, 400, "ResourceNotFoundException", "")
		}, Retry, "ResourceNotFoundException"},
		{"call invalid", func(w http.ResponseWriter, _ map[string]any) {
			jsonError(w, 400, "ValidationException", "")
		}, Permanent, "ValidationException"},
		{"unavailable", func(w http.ResponseWriter, _ map[string]any) {
			jsonError(w, 503, "ServiceUnavailable", "")
		}, Retry, "ServiceUnavailable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := newAWSService(t, tc.answer)
			r := awsSender(t, svc).Deliver(t.Context(), Target{EventBridge: &EventBridge{Bus: "default"}}, delivery(`{}`))
			if r.Outcome != tc.want || r.Code != tc.wantCode || !strings.Contains(r.Message, tc.wantCode) {
				t.Fatalf("result %+v, want %s with code %s", r, tc.want, tc.wantCode)
			}
		})
	}
}

func TestEventBridgeRefusesAnOversizedEntryBeforeSending(t *testing.T) {
	t.Parallel()
	svc := newAWSService(t, eventsOK)
	s := awsSender(t, svc)
	r := s.Deliver(t.Context(), Target{EventBridge: &EventBridge{Bus: "default"}}, delivery(`{"a":"`+strings.Repeat("x", 1<<20)+`"}`))
	if r.Outcome != Permanent || !strings.Contains(r.Message, "PutEvents takes at most") {
		t.Fatalf("result %+v", r)
	}
	d := delivery(`{}`)
	d.Type = strings.Repeat("t", 129)
	if r := s.Deliver(t.Context(), Target{EventBridge: &EventBridge{Bus: "default"}}, d); r.Outcome != Permanent || !strings.Contains(r.Message, "detail-type") {
		t.Fatalf("long type: %+v", r)
	}
	if n := len(svc.recorded()); n != 0 {
		t.Fatalf("%d calls reached EventBridge", n)
	}
}
