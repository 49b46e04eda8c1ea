package main

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
)

// TestSetupReportsEveryProblemAtOnce: a configuration problem fails setup,
// naming every variable; main then answers with failing.
func TestSetupReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	env := map[string]string{"LOG_LEVEL": "loud", "RELAY_PROCESSOR_ARN": "processor"}
	_, err := setup(t.Context(), func(k string) string { return env[k] })
	for _, want := range []string{"LOG_LEVEL", "RELAY_CONTROL_BUCKET", "RELAY_SOURCES_SECRET_ARN", "RELAY_SCHEDULE_GROUP", "RELAY_PROCESSOR_ARN must be an ARN"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}

// TestStartUpFailureStillAnswers: a relay whose start-up failed answers
// CloudFormation (Create FAILED with the cause, Delete SUCCESS) and fails
// every other event.
func TestStartUpFailureStillAnswers(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var last map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		last = nil
		_ = json.Unmarshal(b, &last)
	}))
	defer srv.Close()
	h := failing(errors.New("RELAY_CONTROL_BUCKET is not set"), slog.New(slog.DiscardHandler))
	for typ, want := range map[cfn.RequestType]string{
		cfn.RequestCreate: "FAILED Create failed: the relay did not start: RELAY_CONTROL_BUCKET is not set",
		cfn.RequestDelete: "SUCCESS the relay did not start, so the control bucket was not emptied: RELAY_CONTROL_BUCKET is not set",
	} {
		raw, _ := json.Marshal(cfn.Event{RequestType: typ, RequestID: "r", ResponseURL: srv.URL + "/x?X-Amz-Signature=s", ResourceType: "Custom::SourcesCopy",
			LogicalResourceID: "SourcesCopy", StackID: "arn:aws:cloudformation:us-east-1:123456789012:stack/inbox/x", PhysicalResourceID: "webhook-inbox-sources-copy"})
		if _, err := h(t.Context(), raw); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := last["Status"].(string) + " " + last["Reason"].(string)
		mu.Unlock()
		if got != want {
			t.Errorf("%s answered %q, want %q", typ, got, want)
		}
	}
	if _, err := h(t.Context(), json.RawMessage(`{"source":"aws.s3","detail-type":"Object Created"}`)); err == nil || !strings.Contains(err.Error(), "RELAY_CONTROL_BUCKET is not set") {
		t.Fatalf("an S3 event: %v", err)
	}
}
