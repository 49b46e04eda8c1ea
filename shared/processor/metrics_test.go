package processor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/emftest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
)

// metricLines returns the "processor: drain metrics" lines, each checked
// with emftest.Validate, and decoded.
func (f *fixture) metricLines(t *testing.T) []map[string]any {
	t.Helper()
	return f.metricLinesOf(t, "processor: drain metrics")
}

// runMetricLines returns the "processor: run metrics" lines, checked and
// decoded.
func (f *fixture) runMetricLines(t *testing.T) []map[string]any {
	t.Helper()
	return f.metricLinesOf(t, "processor: run metrics")
}

func (f *fixture) metricLinesOf(t *testing.T, msg string) []map[string]any {
	t.Helper()
	f.logs.mu.Lock()
	defer f.logs.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(f.logs.buf.Bytes(), []byte("\n")) {
		if !bytes.Contains(l, []byte(`"msg":"`+msg+`"`)) {
			continue
		}
		if err := emftest.Validate(l); err != nil {
			t.Fatalf("invalid EMF: %v\n%s", err, l)
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// declared returns the metric names the line's EMF directive declares.
func declared(line map[string]any) map[string]string {
	out := map[string]string{}
	d := line["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	for _, m := range d["Metrics"].([]any) {
		mm := m.(map[string]any)
		out[mm["Name"].(string)], _ = mm["Unit"].(string)
	}
	return out
}

// TestDrainMetricsLine: a drain with Config.Metrics logs one valid EMF
// line with its counts, duration, batch size and the backlog it leaves,
// in the configured namespace and without dimensions.
func TestDrainMetricsLine(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), "ok", writeLedger)
	f.reg.HandleFunc(processor.Source("ledger"), "fail", func(context.Context, pgx.Tx, *processor.Event) error {
		return errors.New("downstream is down")
	})
	f.reg.HandleFunc(processor.Source("ledger"), "poison", func(context.Context, pgx.Tx, *processor.Event) error {
		return processor.Permanent(errors.New("cannot decode"))
	})
	f.insert("ledger", "ok", "ok_", 3)
	f.insert("ledger", "fail", "fail_", 2)
	f.insert("ledger", "poison", "poison_", 1)
	f.insert("ledger", "other", "other_", 1)
	p := f.processor(processor.Config{BatchSize: 4, Metrics: metrics.Emitter{Namespace: "TestInbox"}})
	st := f.drain(p)
	if st.Claimed != 7 || st.Batches != 2 {
		t.Fatalf("stats = %+v", st)
	}

	lines := f.metricLines(t)
	if len(lines) != 1 {
		t.Fatalf("%d metrics lines, want 1", len(lines))
	}
	l := lines[0]
	want := map[string]float64{
		processor.MetricProcessed: 3, processor.MetricFailed: 2, processor.MetricDeadLettered: 1,
		processor.MetricUnhandled: 1, processor.MetricReleased: 0, processor.MetricLeaseLost: 0,
		processor.MetricBatchSize: 3.5, processor.MetricDrainFailed: 0,
		// The two failed events wait for their retry: backlog, not due.
		processor.MetricBacklogCount: 2, processor.MetricBacklogDue: 0, processor.MetricBacklogOldestAge: 0,
		processor.MetricBacklogPaused: 0,
		// The poison event is open in the dead letters, dead just now.
		processor.MetricDeadLettersOpen: 1, processor.MetricDeadLetterOldestAge: 0,
		// No source has a silent_after setting.
		processor.MetricSourcesSilent: 0,
	}
	for name, v := range want {
		if l[name] != v {
			t.Errorf("%s = %v, want %v", name, l[name], v)
		}
	}
	if d, ok := l[processor.MetricDrainDuration].(float64); !ok || d < 0 {
		t.Errorf("%s = %v", processor.MetricDrainDuration, l[processor.MetricDrainDuration])
	}
	// Receipt to processed: the events were stored at the server's now(),
	// and the fixture's clock runs a minute ahead of it.
	for _, m := range []string{processor.MetricLatencyP50, processor.MetricLatencyP99} {
		if ms, ok := l[m].(float64); !ok || ms < 55_000 || ms > 120_000 {
			t.Errorf("%s = %v ms, want about 60000", m, l[m])
		}
	}
	units := declared(l)
	if len(units) != len(want)+3 {
		t.Fatalf("%d declared metrics, want %d: %v", len(units), len(want)+3, units)
	}
	check(t, "declared units", units, map[string]any{
		processor.MetricDrainDuration: "Milliseconds", processor.MetricBacklogOldestAge: "Seconds", processor.MetricProcessed: "Count",
		processor.MetricLatencyP50: "Milliseconds", processor.MetricLatencyP99: "Milliseconds",
		processor.MetricDeadLettersOpen: "Count", processor.MetricDeadLetterOldestAge: "Seconds",
	})
	d := l["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if d["Namespace"] != "TestInbox" || len(d["Dimensions"].([]any)[0].([]any)) != 0 {
		t.Fatalf("directive = %v", d)
	}
}

// TestBacklogGaugeAtTheDeadline: a drain that stops for lack of time
// reports the due backlog it leaves and the age of its oldest event.
func TestBacklogGaugeAtTheDeadline(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	f.insert("ledger", "t", "evt_", 5)
	p := f.processor(processor.Config{HandlerTimeout: 5 * time.Second, SafetyMargin: 10 * time.Second})
	ctx, cancel := context.WithTimeout(f.ctx, 9*time.Second)
	defer cancel()
	if st, err := p.Drain(ctx); err != nil || st.Stopped != processor.StopDeadline {
		t.Fatalf("drain = %+v, %v", st, err)
	}
	l := f.metricLines(t)[0]
	if l[processor.MetricBacklogCount] != 5.0 || l[processor.MetricBacklogDue] != 5.0 || l[processor.MetricProcessed] != 0.0 {
		t.Fatalf("line = %v", l)
	}
	// The events became due at the server's now() on insert; the
	// fixture's clock runs a minute ahead of the wall clock.
	if age := l[processor.MetricBacklogOldestAge].(float64); age < 55 || age > 120 {
		t.Fatalf("oldest due age = %v s, want about 60", age)
	}
	d := l["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if d["Namespace"] != metrics.DefaultNamespace {
		t.Fatalf("namespace = %v", d["Namespace"])
	}
}

// TestDrainFailureMetrics: a drain the database fails still logs its
// line, DrainFailed = 1, without a backlog it could not read.
func TestDrainFailureMetrics(t *testing.T) {
	t.Parallel()
	f := setup(t)
	pool := newPool(t, pgtest.URL(t))
	pool.Close()
	if _, err := f.processorOn(processor.Config{}, processor.Deps{Pool: pool}).Drain(f.ctx); err == nil {
		t.Fatal("drain on a closed pool succeeded")
	}
	l := f.metricLines(t)[0]
	check(t, "line", l, map[string]any{processor.MetricDrainFailed: 1, "backlog_err": set, "dead_letters_err": set, "sources_err": set, "err": set,
		"cause": "database_unavailable"})
	for _, m := range []string{processor.MetricBacklogCount, processor.MetricDeadLettersOpen, processor.MetricLatencyP50, processor.MetricSourcesSilent} {
		if _, ok := l[m]; ok {
			t.Fatalf("%s reported without a database: %v", m, l)
		}
	}
}

// TestMetricsOff: with Metrics.Off (the dev stack) no line carries an
// EMF record; the run's line is a plain one at debug level, and each
// drain that claimed events says so at info.
func TestMetricsOff(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.insert("ledger", "t", "evt_", 1)
	if _, err := f.processor(processor.Config{Metrics: metrics.Emitter{Off: true}}).Run(f.ctx, time.Time{}); err != nil {
		t.Fatal(err)
	}
	f.logs.mu.Lock()
	emf := strings.Contains(f.logs.buf.String(), `"_aws"`)
	f.logs.mu.Unlock()
	if emf {
		t.Error("an EMF record was logged")
	}
	if l := f.logs.lines(t, "processor: run metrics"); len(l) != 1 {
		t.Errorf("%d run metrics lines, want 1", len(l))
	} else if l[0]["level"] != "DEBUG" {
		t.Errorf("run metrics line at %v, want DEBUG", l[0]["level"])
	}
	if l := f.logs.lines(t, "processor: drained"); len(l) != 1 {
		t.Errorf("%d drained lines, want 1", len(l))
	} else if l[0]["level"] != "INFO" || l[0]["unhandled"] != 1.0 {
		t.Errorf("drained line = %v, want INFO with unhandled 1", l[0])
	}
}
