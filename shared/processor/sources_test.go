package processor_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// sourceLines returns the per-source metrics lines by source, each a
// valid EMF record dimensioned by source alone (the summary line has the
// totals).
func (f *fixture) sourceLines(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, l := range f.metricLinesOf(t, "processor: source metrics") {
		name, _ := l["source"].(string)
		if _, dup := out[name]; dup {
			t.Fatalf("two lines for source %q", name)
		}
		d := l["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
		if dims, _ := json.Marshal(d["Dimensions"]); string(dims) != `[["source"]]` {
			t.Fatalf("source %q: dimensions %s, want [[\"source\"]]", name, dims)
		}
		out[name] = l
	}
	return out
}

// TestSourceMetricsLines: a run over two configured sources, one whose
// events fail (retried, and one dead-lettered), logs a line per source
// with its counts and, where it processed events, its latencies; the
// events of a name the receivers never recorded as configured, and of one
// taken out of the document, are counted under one "(unknown)" value, so
// the dimension stays the configured sources.
func TestSourceMetricsLines(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := f.clock.Now()
	factory.SourceActivity(f.ctx, t, f.store, now, storage.SourceRecord{Source: "gone"})
	factory.SourceActivity(f.ctx, t, f.store, now, storage.SourceRecord{Source: "stripe"}, storage.SourceRecord{Source: "billing"})
	f.reg.HandleFunc(processor.Source("stripe"), processor.AnyType, writeLedger)
	f.reg.HandleFunc(processor.Source("billing"), "fail", func(context.Context, pgx.Tx, *processor.Event) error {
		return errors.New("downstream is down")
	})
	f.reg.HandleFunc(processor.Source("billing"), "poison", func(context.Context, pgx.Tx, *processor.Event) error {
		return processor.Permanent(errors.New("cannot decode"))
	})
	f.reg.HandleFunc(processor.Source("rogue"), processor.AnyType, writeLedger)
	f.reg.HandleFunc(processor.Source("gone"), processor.AnyType, writeLedger)
	f.insert("stripe", "invoice.paid", "st_", 3)
	f.insert("billing", "fail", "fail_", 2)
	f.insert("billing", "poison", "poison_", 1)
	f.insert("rogue", "x", "rogue_", 1)
	f.insert("gone", "x", "gone_", 1)
	// No sources document: the receivers' record alone says which
	// sources are configured.
	p := f.processor(processor.Config{BatchSize: 3, SourceKinds: map[string]string{}, Metrics: metrics.Emitter{Namespace: "TestInbox"}})
	if st, err := p.Run(f.ctx, time.Time{}); err != nil || st.Claimed != 8 {
		t.Fatalf("run: %+v, %v", st, err)
	}

	lines := f.sourceLines(t)
	if names := slices.Sorted(maps.Keys(lines)); !slices.Equal(names, []string{"(unknown)", "billing", "stripe"}) {
		t.Fatalf("source lines for %v, want (unknown), billing and stripe", names)
	}
	want := map[string]map[string]float64{
		"stripe":    {processor.MetricProcessed: 3, processor.MetricFailed: 0, processor.MetricDeadLettered: 0, processor.MetricUnhandled: 0},
		"billing":   {processor.MetricProcessed: 0, processor.MetricFailed: 2, processor.MetricDeadLettered: 1, processor.MetricUnhandled: 0},
		"(unknown)": {processor.MetricProcessed: 2, processor.MetricFailed: 0, processor.MetricDeadLettered: 0, processor.MetricUnhandled: 0},
	}
	for name, ms := range want {
		l := lines[name]
		for m, v := range ms {
			if l[m] != v {
				t.Errorf("%s: %s = %v, want %v", name, m, l[m], v)
			}
		}
		units := declared(l)
		_, hasLatency := units[processor.MetricLatencyP99]
		if processed := ms[processor.MetricProcessed] > 0; hasLatency != processed {
			t.Errorf("%s: latency declared %v, processed %v", name, hasLatency, processed)
		}
		if hasLatency {
			// Stored at the server's now(); the fixture's clock runs a
			// minute ahead.
			for _, m := range []string{processor.MetricLatencyP50, processor.MetricLatencyP99} {
				if ms, ok := l[m].(float64); !ok || ms < 55_000 || ms > 120_000 || units[m] != "Milliseconds" {
					t.Errorf("%s: %s = %v %s, want about 60000 ms", name, m, l[m], units[m])
				}
			}
		}
	}
	// The totals are the summary line's, as before.
	run := f.runMetricLines(t)
	if len(run) != 1 || run[0][processor.MetricProcessed] != 5.0 || run[0][processor.MetricFailed] != 2.0 {
		t.Fatalf("run line: %v", run)
	}
	for _, l := range f.metricLinesOf(t, "processor: source metrics") {
		if s := l["source"]; s == "rogue" || s == "gone" {
			t.Errorf("a name not configured became a dimension value: %v", l)
		}
	}
}

// TestSourcesSilent: a source with silent_after and no delivery for
// longer is reported (and one that never delivered, counted from when it
// was first recorded); one with a recent delivery is not, nor one without
// the setting however long it has been quiet, nor one no longer
// configured. The run line's SourcesSilent counts them; one warning
// names them.
func TestSourcesSilent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := f.clock.Now()
	factory.SourceActivity(f.ctx, t, f.store, now.Add(-2*time.Hour),
		storage.SourceRecord{Source: "fresh", SilentAfter: time.Hour},
		storage.SourceRecord{Source: "removed", SilentAfter: time.Hour, ReceivedAt: now.Add(-30 * 24 * time.Hour)},
	)
	factory.SourceActivity(f.ctx, t, f.store, now,
		storage.SourceRecord{Source: "fresh", SilentAfter: time.Hour},
		storage.SourceRecord{Source: "quiet", SilentAfter: 6 * time.Hour, ReceivedAt: now.Add(-7 * time.Hour)},
		storage.SourceRecord{Source: "recent", SilentAfter: 6 * time.Hour, ReceivedAt: now.Add(-time.Hour)},
		storage.SourceRecord{Source: "unset", ReceivedAt: now.Add(-30 * 24 * time.Hour)},
	)
	p := f.processor(processor.Config{Metrics: metrics.Emitter{Namespace: "TestInbox"}})
	f.drain(p)
	l := f.metricLines(t)[0]
	if l[processor.MetricSourcesSilent] != 2.0 || declared(l)[processor.MetricSourcesSilent] != "Count" {
		t.Fatalf("SourcesSilent = %v (%v), want 2", l[processor.MetricSourcesSilent], declared(l)[processor.MetricSourcesSilent])
	}
	warn := f.logs.lines(t, "processor: sources silent")
	if len(warn) != 1 {
		t.Fatalf("%d silence lines, want 1", len(warn))
	}
	w := warn[0]
	if w["level"] != "WARN" || w["cause"] != string(inbox.CauseSourceSilent) {
		t.Fatalf("silence line: %v", w)
	}
	names, _ := json.Marshal(w["sources"])
	if string(names) != `["fresh","quiet"]` {
		t.Fatalf("silent sources %s, want fresh and quiet", names)
	}
	if b, _ := json.Marshal(w["silent"]); !strings.Contains(string(b), `"delivered":false`) || !strings.Contains(string(b), `"silent_after":"6h0m0s"`) {
		t.Fatalf("silence details: %s", b)
	}

	// Once quiet delivers again (a receiver's record), it is no longer
	// silent.
	f.clock.Advance(time.Minute)
	factory.SourceActivity(f.ctx, t, f.store, f.clock.Now(),
		storage.SourceRecord{Source: "fresh", SilentAfter: time.Hour, ReceivedAt: f.clock.Now()},
		storage.SourceRecord{Source: "quiet", SilentAfter: 6 * time.Hour, ReceivedAt: f.clock.Now()},
		storage.SourceRecord{Source: "recent", SilentAfter: 6 * time.Hour},
		storage.SourceRecord{Source: "unset"},
	)
	f.drain(p)
	if l := f.metricLines(t)[1]; l[processor.MetricSourcesSilent] != 0.0 {
		t.Fatalf("SourcesSilent after the deliveries = %v, want 0", l[processor.MetricSourcesSilent])
	}
	if n := len(f.logs.lines(t, "processor: sources silent")); n != 1 {
		t.Fatalf("%d silence lines after the deliveries, want still 1", n)
	}
}

// TestInvocationArmsTheSilenceCheck: with nothing else to do, an
// invocation arms the processor just after the next source would become
// silent (to the hour for long settings, to a quarter of a short one), so
// that silence is reported in a stack where nothing
// arrives to run a processor; a source already silent, or without the
// setting, arms nothing, so a silent stack is not woken again and again.
func TestInvocationArmsTheSilenceCheck(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := f.clock.Now()
	factory.SourceActivity(f.ctx, t, f.store, now,
		storage.SourceRecord{Source: "daily", SilentAfter: 24 * time.Hour, ReceivedAt: now.Add(-time.Hour)},
		storage.SourceRecord{Source: "hourly", SilentAfter: 6 * time.Hour, ReceivedAt: now.Add(-2 * time.Hour)},
		storage.SourceRecord{Source: "gone-quiet", SilentAfter: time.Hour, ReceivedAt: now.Add(-3 * time.Hour)},
		storage.SourceRecord{Source: "unset", ReceivedAt: now.Add(-2 * time.Hour)},
	)
	rec := &armed{}
	p := f.processorOn(processor.Config{RunFor: 0}, processor.Deps{Wake: rec})
	if _, err := p.Invocation(f.ctx); err != nil {
		t.Fatal(err)
	}
	silentAt := now.Add(4 * time.Hour) // hourly's
	want := silentAt.Truncate(time.Hour).Add(time.Hour).Add(time.Second)
	got := rec.of(wake.TargetProcessor)
	if len(got) != 1 || !got[0].Equal(want) {
		t.Fatalf("processor armed at %v, want %s (hourly becomes silent at %s)", got, want, silentAt)
	}

	// At that wake-up hourly is reported, and the next check armed is
	// daily's.
	f.clock.Advance(want.Sub(now))
	if _, err := p.Invocation(f.ctx); err != nil {
		t.Fatal(err)
	}
	daily := now.Add(23 * time.Hour)
	want = daily.Truncate(time.Hour).Add(time.Hour).Add(time.Second)
	if got := rec.of(wake.TargetProcessor); len(got) != 2 || !got[1].Equal(want) {
		t.Fatalf("processor armed at %v, want then %s", got, want)
	}
	if w := f.logs.lines(t, "processor: sources silent"); len(w) != 2 {
		t.Fatalf("%d silence lines, want 2 (gone-quiet, then gone-quiet and hourly)", len(w))
	} else if b, _ := json.Marshal(w[1]["sources"]); string(b) != `["gone-quiet","hourly"]` {
		t.Fatalf("second check's silent sources %s", b)
	}

	// A source with a short setting is checked on a finer step: a
	// quarter of its silent_after, so reported at most that late.
	f.clock.Advance(time.Hour)
	at := f.clock.Now()
	factory.SourceActivity(f.ctx, t, f.store, at,
		storage.SourceRecord{Source: "daily", SilentAfter: 24 * time.Hour},
		storage.SourceRecord{Source: "hourly", SilentAfter: 6 * time.Hour},
		storage.SourceRecord{Source: "gone-quiet", SilentAfter: time.Hour},
		storage.SourceRecord{Source: "unset"},
		storage.SourceRecord{Source: "busy", SilentAfter: 15 * time.Minute, ReceivedAt: at.Add(-time.Minute)})
	if _, err := p.Invocation(f.ctx); err != nil {
		t.Fatal(err)
	}
	busy := at.Add(14 * time.Minute)
	want = busy.Truncate(3 * time.Minute).Add(3 * time.Minute).Add(time.Second)
	if busy.Truncate(3 * time.Minute).Equal(busy) {
		want = busy.Add(time.Second)
	}
	if got := rec.of(wake.TargetProcessor); len(got) != 3 || !got[2].Equal(want) {
		t.Fatalf("processor armed at %v, want then %s (busy becomes silent at %s)", got, want, busy)
	} else if late := want.Sub(busy); late <= 0 || late > 3*time.Minute+time.Second {
		t.Fatalf("busy's check %s after it becomes silent", late)
	}
	f.clock.Advance(want.Sub(f.clock.Now()))
	if _, err := p.Invocation(f.ctx); err != nil {
		t.Fatal(err)
	}
	if w := f.logs.lines(t, "processor: sources silent"); len(w) != 4 {
		t.Fatalf("%d silence lines, want 4", len(w))
	} else if b, _ := json.Marshal(w[3]["sources"]); string(b) != `["busy","gone-quiet","hourly"]` {
		t.Fatalf("silent sources at busy's check %s", b)
	}
	if got := rec.of(wake.TargetProcessor); len(got) != 4 || !got[3].Equal(got[1]) {
		t.Fatalf("processor armed at %v, want then daily's check again", got)
	}

	// Past every deadline, nothing more is armed.
	f.clock.Advance(daily.Sub(f.clock.Now()) + time.Hour)
	if _, err := p.Invocation(f.ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.of(wake.TargetProcessor); len(got) != 4 {
		t.Fatalf("processor armed at %v once every source is silent, want nothing more", got)
	}
}
