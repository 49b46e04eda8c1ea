package processor

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// Waking and lingering: the deployed processor runs only when something
// wakes it (shared/wake: a receipt, an armed retry, the sweep). Each
// invocation drains, then keeps polling for RunFor after it started, so
// that a receiver, which wakes it at most once per debounce, never leaves
// an event behind (docs/processor.md, "Waking the processor").
const (
	// DefaultPollInterval is Config.PollInterval's default: an event waits
	// half of it on average (plus a claim's round trip) before its handler
	// starts, well within a second, for five claims a second per polling
	// processor, each an index scan of the due events that finds nothing
	// when idle.
	DefaultPollInterval = 200 * time.Millisecond
	// MinPollInterval and MaxPollInterval bound PollInterval: below the
	// minimum the polls would be most of the database's work for no
	// latency one could notice behind a sender's own; above the maximum a
	// lingering invocation would pay for minutes of waiting to look once
	// more, which the next wake-up does anyway.
	MinPollInterval = 10 * time.Millisecond
	MaxPollInterval = time.Minute
	// DefaultRunFor is Config.RunFor's default: twice the receiver's
	// default debounce (wake.DefaultDebounce), so an event committed just
	// after a wake-up is still found by the invocation that wake-up
	// started, and short enough that an invocation with nothing to do
	// costs about a second of Lambda time.
	DefaultRunFor = time.Second
	// maxRetryWait caps the wait after consecutive failed drains (the
	// database is down): PollInterval doubled per failure up to it, so an
	// outage costs a log line every few seconds, not five a second.
	maxRetryWait = 5 * time.Second
)

// Run drains (Drain's loop, without its metrics line) and, whenever a
// drain finds nothing due, waits PollInterval and drains again. It stops
// when until passes (on the processor's clock, Deps.Clock), when less than
// SafetyMargin is left before ctx's deadline, or when ctx is cancelled; it
// drains at least once, so a past until makes it one drain. until ends the
// polling, not the work: a drain that still finds events due goes on until
// none is or the deadline's margin, as Drain does, so a backlog keeps every
// running processor busy.
//
// A drain the database fails is logged and tried again at the next poll,
// after a wait that doubles with each consecutive failure up to a few
// seconds; Run returns the error only when the last drain before it
// stopped failed (Stats.Stopped is then StopError). Cancelled, it returns
// ctx's error, as Drain does. Its Stats add up its drains'. It logs one
// metrics line when it returns ("processor: run metrics", Config.Metrics),
// however long it ran: one line per poll would be millions of lines a
// month.
func (p *Processor) Run(ctx context.Context, until time.Time) (Stats, error) {
	start := time.Now()
	st, rep, err := p.run(ctx, until)
	p.emitLine(ctx, runMetricsMsg, st, err, time.Since(start), rep)
	return st, err
}

// Invocation is what one invocation of the processor runs: Run until
// RunFor from now, or, with RunFor 0, one Drain; then, with Deps.Wake,
// it arms the wake-ups the work left behind (armNext). An arming that
// failed is returned, so that Lambda retries the invocation, which drains
// (finding nothing new) and arms again.
func (p *Processor) Invocation(ctx context.Context) (Stats, error) {
	var (
		st  Stats
		err error
	)
	if p.cfg.RunFor <= 0 {
		st, err = p.Drain(ctx)
	} else {
		st, err = p.Run(ctx, p.clock.Now().Add(p.cfg.RunFor))
	}
	if p.wake == nil || st.Stopped == StopCancelled {
		return st, err
	}
	return st, errors.Join(err, p.armNext(context.WithoutCancel(ctx), st))
}

// runReport is what a run's metrics line says besides its Stats.
type runReport struct {
	// Drains is how many drains the run made (one per poll).
	Drains int
	// Failed is how many of them the database failed.
	Failed int
}

func (p *Processor) run(ctx context.Context, until time.Time) (Stats, runReport, error) {
	var (
		total    Stats
		rep      runReport
		failures int // consecutive
	)
	interval := p.pollInterval()
	for {
		st, err := p.drain(ctx)
		rep.Drains++
		total.add(st)
		total.Stopped = st.Stopped
		switch {
		case st.Stopped == StopCancelled || ctx.Err() != nil:
			total.Stopped = StopCancelled
			return total, rep, cmp.Or(ctx.Err(), err)
		case st.Stopped == StopDeadline:
			return total, rep, nil
		case err != nil:
			rep.Failed++
			failures++
		default:
			failures = 0
		}
		if st.Claimed > 0 {
			// The counts, not the struct: a readable line would print
			// every latency.
			p.log.Log(ctx, p.drainedLevel(), "processor: drained", "claimed", st.Claimed, "handled", st.Handled,
				"unhandled", st.Unhandled, "retried", st.Retried, "dead_lettered", st.DeadLettered)
		}

		wait := interval
		if failures > 0 {
			wait = retryWait(interval, failures)
		}
		// No wait past until, nor into the deadline's margin.
		left := until.Sub(p.clock.Now())
		if left <= 0 {
			return total, rep, err
		}
		wait = min(wait, left)
		if d, ok := ctx.Deadline(); ok {
			left := time.Until(d) - p.cfg.SafetyMargin
			if left <= 0 {
				if err == nil {
					total.Stopped = StopDeadline
				}
				return total, rep, err
			}
			wait = min(wait, left)
		}
		if failures > 0 {
			p.log.Warn("processor: drain failed; polling again", "cause", inbox.CauseDatabaseUnavailable,
				"err", err, "retry_in", wait.String(), "failures", failures)
		}
		select {
		case <-ctx.Done():
			total.Stopped = StopCancelled
			return total, rep, ctx.Err()
		case <-p.clock.After(wait):
		}
	}
}

func (p *Processor) pollInterval() time.Duration {
	if p.cfg.PollInterval <= 0 {
		return DefaultPollInterval
	}
	return p.cfg.PollInterval
}

// drainedLevel is the level of the line each drain that claimed events
// logs: info with metrics off (the dev stack, whose reader wants to see
// events handled, not a summary per run), debug with them on (the Lambda,
// whose metrics line already counts them). The run's or drain's metrics
// line takes the other level.
func (p *Processor) drainedLevel() slog.Level {
	if p.cfg.Metrics.Off {
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// metricsLevel is the level of the metrics line: see drainedLevel.
func (p *Processor) metricsLevel() slog.Level {
	if p.cfg.Metrics.Off {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// retryWait is the wait after the nth consecutive failed drain: interval
// doubled per failure, capped at maxRetryWait (or interval, if longer).
func retryWait(interval time.Duration, n int) time.Duration {
	ceiling := max(maxRetryWait, interval)
	wait := interval
	for i := 1; i < n && wait < ceiling; i++ {
		wait *= 2
	}
	return min(wait, ceiling)
}
