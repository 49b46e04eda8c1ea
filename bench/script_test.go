package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
)

// TestInsertScript checks that the pgbench script is the receiver's
// statement with every parameter mapped.
func TestInsertScript(t *testing.T) {
	s, err := insertScript(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s, "$") || !strings.HasPrefix(s, `\set id random(1, 2)`) || !strings.HasSuffix(s, ";\n") {
		t.Fatalf("script:\n%s", s)
	}
	t.Log("\n" + s)
}

// TestStripeBody checks the generated bodies' size and determinism.
func TestStripeBody(t *testing.T) {
	for i := range 100 {
		b := dupBody(1, i)
		if len(b) != bodySize {
			t.Fatalf("body %d is %d bytes", i, len(b))
		}
		if string(b) != string(dupBody(1, i)) {
			t.Fatal("dupBody is not deterministic")
		}
	}
}

// TestWaitPercentile checks that a percentile an unprocessed event decides
// is marked as a lower bound, and one it does not is not.
func TestWaitPercentile(t *testing.T) {
	var ws []waited
	for i := range 100 {
		ws = append(ws, waited{d: time.Duration(i+1) * time.Millisecond, done: true})
	}
	if v, atLeast := waitPercentile(ws, 99); v != 99 || atLeast {
		t.Fatalf("p99 of 1..100 ms: %v %v", v, atLeast)
	}
	ws[99].done = false // the slowest one never finished
	if v, atLeast := waitPercentile(ws, 99); v != 99 || atLeast {
		t.Fatalf("p99 with the max unfinished: %v %v", v, atLeast)
	}
	if v, atLeast := waitPercentile(ws, 100); v != 100 || !atLeast {
		t.Fatalf("max with the max unfinished: %v %v", v, atLeast)
	}
	ws[0].done = false // one that had waited 1 ms when the processor stopped
	if _, atLeast := waitPercentile(ws, 50); !atLeast {
		t.Fatal("p50 with an unfinished event below it is not marked as a lower bound")
	}
}

// TestCountSince checks the invocations counted from a time on and the
// most that ran at once then.
func TestCountSince(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	spans := []span{
		{at(0), at(1000)},    // a warm-up invocation, running at from
		{at(100), at(300)},   // over before from: not counted
		{at(600), at(1600)},  // started before from, overlaps the next two
		{at(1000), at(2000)}, // starts as the first ends: one container
		{at(1200), at(1300)},
		{at(3000), at(4000)},
	}
	started, peak := countSince(spans, at(500))
	if started != 4 || peak != 3 {
		t.Fatalf("countSince: %d started, %d at once; want 4 and 3", started, peak)
	}
	if started, peak := countSince(nil, at(0)); started != 0 || peak != 0 {
		t.Fatalf("no spans: %d, %d", started, peak)
	}
}

// TestLatencyWindow checks that a low rate gets a window long enough for
// the minimum of events, in whole seconds.
func TestLatencyWindow(t *testing.T) {
	s := Settings{LatencyDuration: 30 * time.Second, LatencyMinEvents: 200}
	for rate, want := range map[float64]time.Duration{1000: 30 * time.Second, 2: 100 * time.Second, 1: 200 * time.Second, 3: 67 * time.Second} {
		if got := latencyWindow(s, rate); got != want {
			t.Errorf("latencyWindow at %v/s = %s, want %s", rate, got, want)
		}
	}
}

// TestStatementName checks that the processor's statements are named by
// their sqlc names.
func TestStatementName(t *testing.T) {
	for sql, want := range map[string]string{
		"-- name: EventFinish :many\nWITH result AS": knownStatements["EventFinish"],
		"-- name: SomethingNew :exec\nUPDATE x":      "SomethingNew",
		"begin":                                      "BEGIN",
	} {
		if got := statementName(sql); got != want {
			t.Errorf("statementName(%q) = %q, want %q", sql, got, want)
		}
	}
}

// TestSmoke runs the stages that need only Postgres (ingest, drain on
// both clusters, latency, history) at toy sizes and checks the page and
// the JSON carry their figures. It starts two clusters: skipped with
// -short.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two Postgres clusters")
	}
	out := t.TempDir()
	err := run([]string{
		"-out", out, "-stages", "ingest,drain,latency,history",
		"-runs", "1", "-duration", "1s", "-warmup", "1s", "-concurrency", "4", "-duplicates", "500",
		"-drain-events", "1000", "-drain-runs", "1", "-processors", "2",
		"-latency-rates", "2,50", "-latency-duration", "2s", "-latency-min-events", "6", "-latency-warmup", "1s", "-latency-grace", "5s",
		"-history", "20000",
	})
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(filepath.Join(out, "benchmarks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	switch {
	case rep.Drain == nil || rep.DrainDurable == nil:
		t.Fatal("no drain figure for each cluster")
	case rep.Drain.Processor.HeapPeakBytes == 0:
		t.Fatal("no heap figure for the processor")
	case len(rep.Latency) != 4:
		t.Fatalf("latency figures: %+v", rep.Latency)
	case rep.History == nil || rep.History.Drain == nil || len(rep.History.Versus) == 0:
		t.Fatalf("history: %+v", rep.History)
	case rep.Machine.Durable == nil || rep.Machine.Durable.FileSystem == "":
		t.Fatal("the durable cluster's disk is not described")
	}
	// Only the wake-ups process the events: every one of them processed
	// means the receiver woke the processor's invocations through the
	// Invoke stand-in, and that none was left behind.
	for _, l := range rep.Latency {
		field.Check(t, fmt.Sprintf("latency figure at %v/s", l.OfferedPerSec),
			field.Is("Stored", l.Stored, l.Stored != 0, "some"),
			field.Eq("Processed", l.Processed, l.Stored),
			field.Is("Invocations", l.Invocations, l.Invocations != 0, "some"),
			field.Is("PeakConcurrency", l.PeakConcurrency, l.PeakConcurrency != 0, "some"),
			field.Eq("InvocationErrors", l.InvocationErrors, 0),
			field.Eq("WakeErrors", l.WakeErrors, 0),
		)
	}
	if l := rep.Latency[0]; l.OfferedPerSec != 2 || l.Seconds != 3 || l.Sent != 6 {
		t.Errorf("the 2/s window is not stretched to 6 events: %+v", l)
	}
	md, err := os.ReadFile(filepath.Join(out, "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### fsync on", "## Latency", "## History", "over 20 000 events of history", "**Latency.**", "**History.**",
		"through the wake-up path", "| invocations (most at once) |", "AsyncEventAge"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// TestConsoleSmoke runs the console stage at a toy size and checks that
// every page was timed and the page and the JSON carry the figures. It
// starts a Postgres cluster: skipped with -short.
func TestConsoleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Postgres cluster")
	}
	out := t.TempDir()
	if err := run([]string{"-out", out, "-stages", "console", "-console-events", "5000", "-console-requests", "3"}); err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(filepath.Join(out, "benchmarks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	c := rep.Console
	if c == nil {
		t.Fatal("no console figure")
	}
	if !field.Check(t, "console figure",
		field.Eq("Events", c.Events, 5000),
		field.Eq("DeadLetters", c.DeadLetters, 5),
		field.Eq("Actions", c.Actions, 10000),
		field.Is("Pages", len(c.Pages), len(c.Pages) >= 10, "at least 10"),
	) {
		t.FailNow()
	}
	for _, p := range c.Pages {
		if p.P50Ms <= 0 || p.P99Ms < p.P50Ms || p.Bytes == 0 {
			t.Errorf("page %s: %+v", p.Name, p)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Console", "over 5 000\nstored events", "| dead letters, a deep page |", "slowest console page over 5 000 events"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
