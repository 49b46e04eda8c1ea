package archive_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/emftest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The bloat gauges on the run's line: the archiver clears the bodies of
// the events it archives, which is what leaves webhook_events' pages half
// empty; the next run's line gauges it. webhook_events' autovacuum is off,
// so the estimate changes only when the test analyzes.

// runLine runs a and returns its summary line, decoded and checked to be
// valid EMF carrying the run's usual metrics.
func (f *fixture) runLine(ctx context.Context, a *archive.Archiver, msg string) map[string]any {
	f.t.Helper()
	f.logs.mu.Lock()
	f.logs.buf.Reset()
	f.logs.mu.Unlock()
	_, _ = a.RunOnce(ctx)
	if err := emftest.Validate(f.logs.line(f.t, msg)); err != nil {
		f.t.Fatalf("%s is not EMF: %v", msg, err)
	}
	recs := f.logs.records(f.t, msg)
	rec := recs[len(recs)-1]
	for _, m := range []string{archive.MetricEvents, archive.MetricObjects, archive.MetricObjectBytes, archive.MetricBodyBytes,
		archive.MetricOrphansSwept, archive.MetricStoreUnavailable, archive.MetricRunFailed} {
		if _, ok := rec[m].(float64); !ok {
			f.t.Fatalf("%s lacks %s: %v", msg, m, rec)
		}
	}
	return rec
}

func TestRunGaugesBloat(t *testing.T) {
	tier.Heavy(t, "processes and archives 2 000 events")
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.exec(`ALTER TABLE webhook_events SET (autovacuum_enabled = off, toast.autovacuum_enabled = off)`)
	f.bulkInsert("stripe", 2000, 1000)
	f.process(2 * time.Hour)
	a := f.archiver(func(c *archive.Config, d *archive.Deps) { c.BatchSize = 500 })
	archive.SetBloatMinBytes(a, 0) // the test's table is a few megabytes

	// Never analyzed: no estimate of webhook_events, named, and not
	// counted as 0 in a gauge either.
	rec := f.runLine(ctx, a, "archive: run done")
	if rec[archive.MetricEvents] != 2000.0 {
		t.Fatalf("run archived %v", rec[archive.MetricEvents])
	}
	unknown, _ := rec["bloat_unknown"].([]any)
	if !slices.Contains(unknown, any("webhook_events (not_analyzed)")) || rec["bloat_table"] == "webhook_events" {
		t.Fatalf("webhook_events never analyzed: bloat_unknown %v, bloat_table %v", rec["bloat_unknown"], rec["bloat_table"])
	}

	// Every body is gone from the table's pages: after a VACUUM ANALYZE,
	// as autovacuum would do, most of the table and the emptied partial
	// indexes are bloat.
	f.exec(`VACUUM ANALYZE webhook_events`)
	rec = f.runLine(ctx, a, "archive: run done")
	tbl, idx := rec[archive.MetricTableBloat].(float64), rec[archive.MetricIndexBloat].(float64)
	t.Logf("after archiving 2000 events of 1 KB: table %.1f%% (%v), index %.1f%% (%v)", tbl, rec["bloat_table"], idx, rec["bloat_index"])
	unknown, _ = rec["bloat_unknown"].([]any)
	if tbl < 50 {
		t.Errorf("after archiving: %s = %v, want 50 or more", archive.MetricTableBloat, tbl)
	}
	if rec["bloat_table"] != "webhook_events" {
		t.Errorf("after archiving: bloat_table = %v, want webhook_events", rec["bloat_table"])
	}
	if idx < 50 {
		t.Errorf("after archiving: %s = %v, want 50 or more", archive.MetricIndexBloat, idx)
	}
	if rec["bloat_index"] == nil {
		t.Error("after archiving: no bloat_index")
	}
	if slices.Contains(unknown, any("webhook_events (not_analyzed)")) {
		t.Errorf("after archiving: webhook_events unknown: %v", unknown)
	}

	// With the default threshold's 16 MiB, a table this small is not
	// counted: 0, and nothing named.
	rec = f.runLine(ctx, f.archiver(nil), "archive: run done")
	for _, k := range []string{archive.MetricTableBloat, archive.MetricIndexBloat} {
		if rec[k] != 0.0 {
			t.Errorf("small tables gauged: %s = %v, want 0", k, rec[k])
		}
	}
	for _, k := range []string{"bloat_table", "bloat_index"} {
		if rec[k] != nil {
			t.Errorf("small tables named: %s = %v", k, rec[k])
		}
	}
	// VACUUM FULL gives the space back, and the gauges say so.
	f.exec(`VACUUM FULL webhook_events`)
	f.exec(`VACUUM ANALYZE webhook_events`)
	rec = f.runLine(ctx, a, "archive: run done")
	if rec[archive.MetricTableBloat].(float64) >= 25 || rec[archive.MetricIndexBloat].(float64) >= 25 {
		t.Fatalf("gauges after VACUUM FULL: %v", rec)
	}
}

// TestBloatGaugesAbsentWhenNotMeasured: a run whose estimate fails (the
// database is gone) or that cannot afford it (stopped, or its deadline too
// near) carries no bloat gauge at all rather than a 0 an alarm would read
// as healthy, and says why; the run's other metrics are there.
func TestBloatGaugesAbsentWhenNotMeasured(t *testing.T) {
	t.Parallel()
	f := setup(t)
	absent := func(rec map[string]any, key, want string) {
		t.Helper()
		if _, ok := rec[archive.MetricTableBloat]; ok {
			t.Errorf("%s present: %v", archive.MetricTableBloat, rec)
		}
		if _, ok := rec[archive.MetricIndexBloat]; ok {
			t.Errorf("%s present: %v", archive.MetricIndexBloat, rec)
		}
		if v, _ := rec[key].(string); v == "" || (want != "" && v != want) {
			t.Errorf("%s = %v, want %q", key, rec[key], want)
		}
	}

	gone, err := pgxpool.New(context.Background(), f.url)
	if err != nil {
		t.Fatal(err)
	}
	gone.Close()
	rec := f.runLine(context.Background(), f.archiver(func(c *archive.Config, d *archive.Deps) { d.Store = storage.New(gone) }), "archive: run failed")
	absent(rec, "bloat_err", "")
	if rec[archive.MetricRunFailed] != 1.0 {
		t.Errorf("run on a closed pool: %v", rec)
	}

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	absent(f.runLine(canceled, f.archiver(nil), "archive: run canceled"), "bloat_skipped", "stopped")

	near, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	absent(f.runLine(near, f.archiver(nil), "archive: run done"), "bloat_skipped", "deadline")
}
