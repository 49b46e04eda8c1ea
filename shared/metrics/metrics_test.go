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

// TestAttrsByRecordsNoTotal: a breakdown line's metrics are recorded
// under its dimensions alone, so that the total another line records is
// not counted twice; without dimensions it is the total.
func TestAttrsByRecordsNoTotal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		dims []string
		want string
	}{{[]string{"source"}, `[["source"]]`}, {nil, `[[]]`}} {
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		em := metrics.Emitter{}
		log.Info("processor: source metrics", append([]any{"source", "stripe"}, em.AttrsBy(c.dims, metrics.C("Processed", 3))...)...)
		doc := validate(t, buf.Bytes())
		d := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
		if dims, _ := json.Marshal(d["Dimensions"]); string(dims) != c.want || doc["Processed"] != 3.0 {
			t.Errorf("dims %v: dimensions %s, line %v; want %s", c.dims, dims, doc, c.want)
		}
	}
	if attrs := (metrics.Emitter{Off: true}).AttrsBy([]string{"source"}, metrics.C("Processed", 1)); len(attrs) != 0 {
		t.Fatalf("AttrsBy of an emitter that is off = %v", attrs)
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
