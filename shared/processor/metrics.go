package processor

import (
	"context"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
)

// Metrics of a drain, on its summary log line ("processor: drain metrics")
// in CloudWatch embedded metric format when Config.Metrics is set: the
// Logs service turns the line into metrics, with no API call. No dimension
// (one processor function per deployment; every dimension value is a
// billed metric), and every metric is on every line, zeros included, so
// alarms see data rather than gaps. The names are stable: alarms and
// dashboards refer to them (docs/operations.md lists them).
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
	// MetricDrainDuration: the drain's wall time, in milliseconds.
	MetricDrainDuration = "DrainDurationMs"
	// MetricBatchSize: events per claimed batch, on average over the
	// drain (0 when it claimed none); PROCESSOR_BATCH_SIZE when the
	// backlog is deep.
	MetricBatchSize = "BatchSize"
	// MetricDrainFailed: 1 when the drain stopped on a database failure.
	MetricDrainFailed = "DrainFailed"
	// MetricBacklogCount: unprocessed live events when the drain ended
	// (due, waiting for a retry, or in flight).
	MetricBacklogCount = "BacklogCount"
	// MetricBacklogDue: the part of the backlog due when the drain ended.
	MetricBacklogDue = "BacklogDue"
	// MetricBacklogOldestAge: how long the oldest due event had been due
	// when the drain ended, in seconds (0 when none). Alarm on it: it
	// grows when processors stop keeping up or stop running.
	MetricBacklogOldestAge = "BacklogOldestAgeSeconds"
)

// backlogTimeout bounds the backlog query at the end of a drain, detached
// from the drain's context so that a drain that stopped at its deadline
// or was cancelled still reports the backlog it leaves.
const backlogTimeout = 5 * time.Second

// emitMetrics logs the drain's metrics line. The backlog gauge comes from
// one index-only query (storage.Store.EventGetBacklog); when it fails (the
// database is gone) the line carries the drain's counts alone.
func (p *Processor) emitMetrics(ctx context.Context, st Stats, drainErr error, took time.Duration) {
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
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
		metrics.C(MetricDrainFailed, b2f(st.Stopped == StopError)),
	}
	attrs := []any{"stats", st, "duration_ms", took.Milliseconds()}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backlogTimeout)
	defer cancel()
	now := p.cfg.Now()
	if b, err := p.store.EventGetBacklog(bctx, now); err != nil {
		attrs = append(attrs, "backlog_err", err.Error(), "cause", inbox.CauseDatabaseUnavailable)
	} else {
		ms = append(ms,
			metrics.C(MetricBacklogCount, float64(b.Count)),
			metrics.C(MetricBacklogDue, float64(b.Due)),
			metrics.Metric{Name: MetricBacklogOldestAge, Unit: metrics.Seconds, Value: b.OldestDueAge(now).Seconds()},
		)
	}
	if drainErr != nil {
		attrs = append(attrs, "err", drainErr.Error())
	}
	p.log.Info("processor: drain metrics", append(attrs, p.cfg.Metrics.Attrs(nil, ms...)...)...)
}
