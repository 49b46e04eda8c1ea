package archive

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Metrics of a run, on its summary log line ("archive: run done" or
// "archive: run failed") in CloudWatch embedded metric format: CloudWatch
// Logs turns the line into metrics, with no API call. Every metric is on
// every run, zeros included, so alarms see data rather than gaps (the
// bloat gauges apart: see bloatGauges). Alarm on ArchiveStoreUnavailable >
// 0 (S3 failing the archiver) and ArchiveRunFailed > 0 (runs failing for
// any reason).
const (
	MetricEvents           = "ArchivedEvents"
	MetricObjects          = "ArchiveObjects"
	MetricObjectBytes      = "ArchiveObjectBytes"
	MetricBodyBytes        = "ArchivedBodyBytes"
	MetricOrphansSwept     = "ArchiveOrphansSwept"
	MetricStoreUnavailable = "ArchiveStoreUnavailable"
	MetricRunFailed        = "ArchiveRunFailed"
	// MetricTableBloat and MetricIndexBloat: the largest estimated bloat,
	// in percent, of the inbox's tables (with their TOAST) and of their
	// indexes, counting only relations of storage.DefaultBloatThreshold's
	// size or more (0 when none that large has an estimate). Alarm at its
	// ratio (50%); docs/operations.md says what to do.
	MetricTableBloat = "TableBloatPercent"
	MetricIndexBloat = "IndexBloatPercent"
)

// metricAttrs returns the EMF attributes of a run: its counts, then
// gauges (the bloat gauges, when measured). No dimension: one archiver per
// deployment, and each dimension value is a billed metric.
func (a *Archiver) metricAttrs(res Result, runErr error, gauges ...metrics.Metric) []any {
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	ms := []metrics.Metric{
		metrics.C(MetricEvents, float64(res.Events)),
		metrics.C(MetricObjects, float64(res.Batches)),
		{Name: MetricObjectBytes, Unit: metrics.Bytes, Value: float64(res.ObjectBytes)},
		{Name: MetricBodyBytes, Unit: metrics.Bytes, Value: float64(res.BodyBytes)},
		metrics.C(MetricOrphansSwept, float64(res.Swept)),
		metrics.C(MetricStoreUnavailable, b2f(res.StoreUnavailable)),
		metrics.C(MetricRunFailed, b2f(runErr != nil)),
	}
	return a.cfg.Metrics.Attrs(nil, append(ms, gauges...)...)
}

// bloatTimeout bounds the bloat estimate at the end of a run: a catalogue
// query that takes milliseconds whatever the size of the tables. Past it
// the line goes out without the gauges rather than late.
const bloatTimeout = 5 * time.Second

// bloatGauges estimates the bloat of the inbox's tables and indexes
// (storage.PGBloatEstimate, from the catalogue alone) for the run's line:
// the worst ratio of each kind among the relations large enough to
// matter, and log attributes naming them. The gauges are absent, never 0,
// when the estimate could not be made: the run was stopped or its deadline
// is too near to afford even this (bloat_skipped), or the query failed
// (bloat_err; the database is likely gone). A large relation whose
// estimate is unknown (never analyzed, or statistics this role may not
// read) is left out of the gauges and named in bloat_unknown.
func (a *Archiver) bloatGauges(ctx context.Context) ([]metrics.Metric, []any) {
	if ctx.Err() != nil {
		return nil, []any{"bloat_skipped", "stopped"}
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < bloatTimeout {
		return nil, []any{"bloat_skipped", "deadline"}
	}
	bctx, cancel := context.WithTimeout(ctx, bloatTimeout)
	defer cancel()
	rels, err := a.store.PGBloatEstimate(bctx, storage.InboxTables)
	if err != nil {
		return nil, []any{"bloat_err", err.Error()}
	}
	var attrs []any
	var unknown []string
	worst := map[bool]storage.RelationBloat{} // by "is an index"
	for _, r := range rels {
		if r.Size < a.bloatThreshold.MinBytes {
			continue
		}
		if !r.Known() {
			unknown = append(unknown, fmt.Sprintf("%s (%s)", r.Name, r.Unknown))
			continue
		}
		idx := r.Kind == storage.BloatIndex
		if w, ok := worst[idx]; !ok || r.Ratio() > w.Ratio() {
			worst[idx] = r
		}
	}
	for _, k := range []struct {
		idx  bool
		attr string
	}{{false, "bloat_table"}, {true, "bloat_index"}} {
		if w, ok := worst[k.idx]; ok && w.Ratio() > 0 {
			attrs = append(attrs, k.attr, w.Name)
		}
	}
	if len(unknown) > 0 {
		attrs = append(attrs, "bloat_unknown", unknown)
	}
	pct := func(idx bool) float64 { return 100 * worst[idx].Ratio() }
	return []metrics.Metric{
		{Name: MetricTableBloat, Unit: metrics.Percent, Value: pct(false)},
		{Name: MetricIndexBloat, Unit: metrics.Percent, Value: pct(true)},
	}, attrs
}

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}
