package metrics_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/emftest"
	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
)

// validate parses a line and checks it is valid EMF.
func validate(t *testing.T, line []byte) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatalf("not JSON: %s", line)
	}
	if err := emftest.Validate(line); err != nil {
		t.Fatalf("invalid EMF: %v\n%s", err, line)
	}
	return doc
}

func TestAttrsMakeValidEMF(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	em := metrics.Emitter{Now: func() time.Time { return time.UnixMilli(1_700_000_000_123) }}
	log.Info("webhook rejected", append([]any{"source", "stripe", "cause", "signature_mismatch"},
		em.Attrs([]string{"source", "cause"}, metrics.C("Rejected", 1))...)...)
	doc := validate(t, buf.Bytes())
	if doc["Rejected"] != 1.0 || doc["source"] != "stripe" {
		t.Fatalf("line = %v", doc)
	}
	aws := doc["_aws"].(map[string]any)
	if aws["Timestamp"] != 1_700_000_000_123.0 {
		t.Fatalf("timestamp = %v", aws["Timestamp"])
	}
	d := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if d["Namespace"] != metrics.DefaultNamespace {
		t.Fatalf("namespace = %v", d["Namespace"])
	}
	// Per source and cause, and the total the alarms watch.
	if dims, _ := json.Marshal(d["Dimensions"]); string(dims) != `[["source","cause"],[]]` {
		t.Fatalf("dimensions = %s", dims)
	}
}

// TestOffLeavesPlainLines: an emitter turned off adds nothing to a line,
// namespace or not.
func TestOffLeavesPlainLines(t *testing.T) {
	t.Parallel()
	em := metrics.Emitter{Namespace: "Acme", Off: true}
	if attrs := em.Attrs([]string{"source"}, metrics.C("Accepted", 1)); len(attrs) != 0 {
		t.Fatalf("Attrs of an emitter that is off = %v", attrs)
	}
}
