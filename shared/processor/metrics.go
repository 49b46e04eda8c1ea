package processor

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
)

// Metrics of a drain or a run, on its summary log line ("processor: drain
// metrics" for a Drain, "processor: run metrics" for a Run) in CloudWatch
// embedded metric format unless Config.Metrics.Off: the Logs service
// turns the line into metrics, with no API call. No dimension on that
// line (one processor function per deployment; every dimension value is a
// billed metric), and every metric is on every line, zeros included, so
// alarms see data rather than gaps; the latency percentiles alone are left
// out of a line that processed nothing, where a zero would be a lie. The
// names are stable: alarms and dashboards refer to them
// (docs/operations.md lists them).
//
// Beside it, one line per source the drain or run attempted events of
// ("processor: source metrics"): the same counts and latencies with a
// source dimension, recorded under it alone (the total is the summary
// line's). The dimension is bounded: a name the receivers do not record
// as configured (webhook_source_activity) nor the processor's own sources
// document names goes under unknownSource, so the metrics a deployment
// pays for are its sources'.
const (
	// MetricProcessed: events committed with their handler.
	MetricProcessed = "Processed"
	// MetricUnhandled: events marked processed without a handler
	// (PROCESSOR_UNHANDLED=mark).
	MetricUnhandled = "Unhandled"
	// MetricFailed: failed attempts that will be retried.
	MetricFailed = "Failed"
	// MetricDeadLettered: events moved to the dead letters.
	MetricDeadLettered = "DeadLettered"
	// MetricReleased: claimed events given back unstarted (no time left).
	MetricReleased = "Released"
	// MetricLeaseLost: events another processor took over after this
	// one's lease passed (a processor frozen or slower than its lease).
	MetricLeaseLost = "LeaseLost"
	// MetricDrainDuration: the drain's (or the whole run's) wall time, in
	// milliseconds.
	MetricDrainDuration = "DrainDurationMs"
	// MetricBatchSize: events per claimed batch, on average over the
	// drain (0 when it claimed none); PROCESSOR_BATCH_SIZE when the
	// backlog is deep.
	MetricBatchSize = "BatchSize"
	// MetricDrainFailed: drains that stopped on a database failure: 1 or
	// 0 for a Drain; for a Run, each failed poll (it polls on, and fails
	// only if its last drain did).
	MetricDrainFailed = "DrainFailed"
	// MetricBacklogCount: unprocessed live events when the drain ended
	// (due, waiting for a retry, in flight, or held by a pause).
	MetricBacklogCount = "BacklogCount"
	// MetricBacklogDue: the part of the backlog due when the drain ended.
	MetricBacklogDue = "BacklogDue"
	// MetricBacklogOldestAge: how long the oldest due event had been due
	// when the drain ended, in seconds (0 when none). Alarm on it: it
	// grows when processors stop keeping up or stop running.
	MetricBacklogOldestAge = "BacklogOldestAgeSeconds"
	// MetricBacklogPaused: the part of the backlog a pause of its source
	// or handler holds when the drain ended. Held events are never due,
	// so they never age BacklogOldestAgeSeconds: a pause raises no
	// alarm, and this says how much waits for the resume.
	MetricBacklogPaused = "BacklogPaused"
	// MetricDeadLettersOpen: open dead letters (neither requeued nor
	// resolved) when the line was written, a gauge: it stays above zero
	// until an operator requeues or resolves them, which is what its
	// alarm watches.
	MetricDeadLettersOpen = "DeadLettersOpen"
	// MetricDeadLetterOldestAge: how long the oldest open dead letter has
	// been dead, in seconds (0 when none).
	MetricDeadLetterOldestAge = "DeadLetterOldestAgeSeconds"
	// MetricLatencyP50 and MetricLatencyP99: the median and 99th
	// percentile of the receipt-to-processed times (processed_at minus
	// created_at) of the events the drain or run processed, handled or
	// unhandled, in milliseconds. Computed here from Stats.Latencies
	// (nearest rank), not sent as an EMF distribution: one value each per
	// line keeps the line small however many events a run processes.
	// Over a period, read them with the Maximum statistic (the worst
	// run's) or Average; a percentile of percentiles means nothing.
	MetricLatencyP50 = "ReceiptToProcessedP50Ms"
	MetricLatencyP99 = "ReceiptToProcessedP99Ms"
	// MetricSourcesSilent: the configured sources with a silent_after
	// setting that have not delivered for longer than it, when the line
	// was written, a gauge (webhook_source_activity, as the receivers
	// record it). Its alarm keeps its state while no line comes (a stack
	// where nothing at all arrives runs the processor only when a check
	// is due: armNext).
	MetricSourcesSilent = "SourcesSilent"
)

// The lines' messages.
const (
	drainMetricsMsg  = "processor: drain metrics"
	runMetricsMsg    = "processor: run metrics"
	sourceMetricsMsg = "processor: source metrics"
	sourcesSilentMsg = "processor: sources silent"
)

// unknownSource is the one dimension value of every source name that is
// not known to be configured: the receiver's name for the same.
const unknownSource = "(unknown)"

// gaugeTimeout bounds the gauges' queries at the end of a drain or run,
// detached from its context so that one that stopped at its deadline or
// was cancelled still reports what it leaves.
const gaugeTimeout = 5 * time.Second

// emitMetrics logs a Drain's metrics line.
func (p *Processor) emitMetrics(ctx context.Context, st Stats, drainErr error, took time.Duration) {
	rep := runReport{Drains: 1}
	if st.Stopped == StopError {
		rep.Failed = 1
	}
	p.emitLine(ctx, drainMetricsMsg, st, drainErr, took, rep)
}

// emitLine logs a metrics line. The gauges come from two index-only
// queries: the backlog (storage.Store.EventGetBacklog) and the open dead
// letters (DeadLetterGetOpenStats); when one fails (the database is
// gone) the line carries the rest.
func (p *Processor) emitLine(ctx context.Context, msg string, st Stats, runErr error, took time.Duration, rep runReport) {
	level := p.metricsLevel()
	if !p.log.Enabled(ctx, level) {
		return // nor the gauges' queries
	}
	batch := 0.0
	if st.Batches > 0 {
		batch = float64(st.Claimed) / float64(st.Batches)
	}
	ms := []metrics.Metric{
		metrics.C(MetricProcessed, float64(st.Handled)),
		metrics.C(MetricUnhandled, float64(st.Unhandled)),
		metrics.C(MetricFailed, float64(st.Retried)),
		metrics.C(MetricDeadLettered, float64(st.DeadLettered)),
		metrics.C(MetricReleased, float64(st.Released)),
		metrics.C(MetricLeaseLost, float64(st.LeaseLost)),
		{Name: MetricDrainDuration, Unit: metrics.Milliseconds, Value: float64(took.Milliseconds())},
		metrics.C(MetricBatchSize, batch),
		metrics.C(MetricDrainFailed, float64(rep.Failed)),
	}
	attrs := []any{"stats", st, "duration_ms", took.Milliseconds()}
	if msg == runMetricsMsg {
		attrs = append(attrs, "drains", rep.Drains)
	}
	if p50, p99, ok := latencyPercentiles(st.Latencies); ok {
		ms = append(ms,
			metrics.Metric{Name: MetricLatencyP50, Unit: metrics.Milliseconds, Value: float64(p50.Milliseconds())},
			metrics.Metric{Name: MetricLatencyP99, Unit: metrics.Milliseconds, Value: float64(p99.Milliseconds())},
		)
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), gaugeTimeout)
	defer cancel()
	now := p.clock.Now()
	gaugeFailed := false
	if b, err := p.store.EventGetBacklog(bctx, now); err != nil {
		attrs = append(attrs, "backlog_err", err.Error())
		gaugeFailed = true
	} else {
		ms = append(ms,
			metrics.C(MetricBacklogCount, float64(b.Count)),
			metrics.C(MetricBacklogDue, float64(b.Due)),
			metrics.Metric{Name: MetricBacklogOldestAge, Unit: metrics.Seconds, Value: b.OldestDueAge(now).Seconds()},
			metrics.C(MetricBacklogPaused, float64(b.Paused)),
		)
	}
	if d, err := p.store.DeadLetterGetOpenStats(bctx); err != nil {
		attrs = append(attrs, "dead_letters_err", err.Error())
		gaugeFailed = true
	} else {
		ms = append(ms,
			metrics.C(MetricDeadLettersOpen, float64(d.Open)),
			metrics.Metric{Name: MetricDeadLetterOldestAge, Unit: metrics.Seconds, Value: d.OldestAge(now).Seconds()},
		)
	}
	acts, err := p.store.SourceActivityList(bctx)
	if err != nil {
		attrs = append(attrs, "sources_err", err.Error())
		gaugeFailed = true
	} else {
		silent := p.reportSilent(ctx, acts, now)
		ms = append(ms, metrics.C(MetricSourcesSilent, float64(silent)))
	}
	if gaugeFailed {
		attrs = append(attrs, "cause", inbox.CauseDatabaseUnavailable)
	}
	if runErr != nil {
		attrs = append(attrs, "err", runErr.Error())
	}
	p.log.Log(ctx, level, msg, append(attrs, p.cfg.Metrics.Attrs(nil, ms...)...)...)
	p.emitSources(ctx, level, st, acts)
}

// reportSilent logs one warning naming the sources silent at now (cause
// source_silent), with when each last delivered, and returns how many.
func (p *Processor) reportSilent(ctx context.Context, acts []inbox.SourceActivity, now time.Time) int {
	type silentSource struct {
		Source      string    `json:"source"`
		QuietSince  time.Time `json:"quiet_since"`
		Delivered   bool      `json:"delivered"`
		SilentAfter string    `json:"silent_after"`
	}
	var silent []silentSource
	for _, a := range acts {
		if a.Silent(now) {
			silent = append(silent, silentSource{a.Source, a.QuietSince(), a.LastReceivedAt != nil, a.SilentAfter.String()})
		}
	}
	if len(silent) > 0 {
		names := make([]string, len(silent))
		for i, s := range silent {
			names[i] = s.Source
		}
		p.log.WarnContext(ctx, sourcesSilentMsg, "cause", inbox.CauseSourceSilent, "sources", names, "silent", silent)
	}
	return len(silent)
}

// emitSources logs a drain's or run's per-source metrics lines: one per
// source it attempted events of, those not known to be configured
// together under unknownSource. acts are the receivers' record of the
// configured sources (nil when it could not be read: only the processor's
// own sources document then says which are).
func (p *Processor) emitSources(ctx context.Context, level slog.Level, st Stats, acts []inbox.SourceActivity) {
	if len(st.Sources) == 0 {
		return
	}
	configured := make(map[string]bool, len(acts)+len(p.cfg.SourceKinds))
	for _, a := range acts {
		configured[a.Source] = a.Configured
	}
	for name := range p.cfg.SourceKinds {
		configured[name] = true
	}
	by := make(map[string]*SourceStats, len(st.Sources))
	for name, ss := range st.Sources {
		if !configured[name] {
			name = unknownSource
		}
		if by[name] == nil {
			by[name] = &SourceStats{}
		}
		by[name].add(ss)
	}
	for _, name := range slices.Sorted(maps.Keys(by)) {
		ss := by[name]
		ms := []metrics.Metric{
			metrics.C(MetricProcessed, float64(ss.Handled)),
			metrics.C(MetricUnhandled, float64(ss.Unhandled)),
			metrics.C(MetricFailed, float64(ss.Retried)),
			metrics.C(MetricDeadLettered, float64(ss.DeadLettered)),
		}
		if p50, p99, ok := latencyPercentiles(ss.Latencies); ok {
			ms = append(ms,
				metrics.Metric{Name: MetricLatencyP50, Unit: metrics.Milliseconds, Value: float64(p50.Milliseconds())},
				metrics.Metric{Name: MetricLatencyP99, Unit: metrics.Milliseconds, Value: float64(p99.Milliseconds())},
			)
		}
		attrs := []any{"source", name, "handled", ss.Handled, "unhandled", ss.Unhandled, "retried", ss.Retried, "dead_lettered", ss.DeadLettered}
		p.log.Log(ctx, level, sourceMetricsMsg, append(attrs, p.cfg.Metrics.AttrsBy([]string{"source"}, ms...)...)...)
	}
}

// latencyPercentiles returns the median and the 99th percentile of ds by
// nearest rank (the smallest sample with at least that share of the
// samples at or below it); ok is false when there is none.
func latencyPercentiles(ds []time.Duration) (p50, p99 time.Duration, ok bool) {
	if len(ds) == 0 {
		return 0, 0, false
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	rank := func(pct int) time.Duration {
		i := (len(sorted)*pct + 99) / 100 // ceil(n * pct / 100), 1-based
		return sorted[max(i, 1)-1]
	}
	return rank(50), rank(99), true
}
