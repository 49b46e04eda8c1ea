package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// realtimePoll is how long the real-time loop waits after a drain that
// found nothing more to do.
const realtimePoll = 200 * time.Millisecond

// latencyReceiverConns is the receiver's pool in the latency stage.
const latencyReceiverConns = 8

// LatencyFigure is one line of the latency table: events offered to the
// receiver at a fixed rate while one processor runs in real time beside
// it, and how long each event waited from its receipt to its processing.
type LatencyFigure struct {
	Cluster       string  `json:"cluster"`
	OfferedPerSec float64 `json:"offered_per_sec"`
	// Seconds is the measured window (after the warm-up).
	Seconds float64 `json:"seconds"`
	// Sent is how many events the window sent, AchievedPerSec the rate
	// they were sent at, and SendLagP99Ms how late the generator itself
	// was on its schedule (p99): a late generator would hide queueing.
	Sent           int     `json:"sent"`
	AchievedPerSec float64 `json:"achieved_per_sec"`
	SendLagP99Ms   float64 `json:"send_lag_p99_ms"`
	// Errors are answers other than accepted; FirstError the first one.
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// AnswerP50Ms and AnswerP99Ms are the receiver's answers, timed from
	// each event's scheduled send time (so a queue before the receiver
	// counts).
	AnswerP50Ms float64 `json:"answer_p50_ms"`
	AnswerP99Ms float64 `json:"answer_p99_ms"`
	// Stored is how many of the sent events the table holds; Processed of
	// them were processed before the processor stopped (GraceSeconds
	// after the window at most).
	Stored       int     `json:"stored"`
	Processed    int     `json:"processed"`
	GraceSeconds float64 `json:"grace_seconds"`
	// Receipt to processed (processed_at - created_at, both written on
	// this machine), over every stored event of the window; an event not
	// processed when the processor stopped counts with the time it had
	// waited by then, and a figure it decides is a lower bound (AtLeast).
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	P50AtLeast bool    `json:"p50_at_least,omitempty"`
	P99AtLeast bool    `json:"p99_at_least,omitempty"`
	MaxAtLeast bool    `json:"max_at_least,omitempty"`
	// CatchUpMs is from the window's last send to the processing of its
	// last event (when every event was processed): about a poll interval
	// for a processor that keeps up, more when a queue built up.
	CatchUpMs float64 `json:"catch_up_ms"`
	// HandledTotal is every event the processor handled, warm-up included.
	HandledTotal int `json:"handled_total"`
}

// latency runs the open-loop latency measurement at each offered rate, on
// the fast cluster and, unless told not to, on the durable one.
func (b *bench) latency(ctx context.Context) error {
	src, set, err := benchSource()
	if err != nil {
		return err
	}
	envs := []*Env{b.env}
	if b.durable != nil && b.s.LatencyDurable {
		envs = append(envs, b.durable)
	}
	for _, e := range envs {
		for _, rate := range b.s.LatencyRates {
			fig, err := b.latencyFigure(ctx, target{e, dbLatency}, src, set, float64(rate))
			if err != nil {
				return fmt.Errorf("latency at %d/s (%s): %w", rate, e.Kind, err)
			}
			b.rep.Latency = append(b.rep.Latency, fig)
			b.log.Info("latency", "cluster", e.Kind, "offered", rate, "achieved", int(fig.AchievedPerSec),
				"p50_ms", fmt.Sprintf("%.1f", fig.P50Ms), "p99_ms", fmt.Sprintf("%.1f", fig.P99Ms),
				"processed", fig.Processed, "stored", fig.Stored)
		}
	}
	return nil
}

// latencyFigure offers events at rate for the warm-up and the measured
// window, on schedule whatever the answers (an open loop), to the real
// receiver, while one processor with the Lambda's pool and the default
// configuration runs its real-time loop on the same database; then it
// reads each measured event's receipt-to-processed time from the table.
func (b *bench) latencyFigure(ctx context.Context, t target, src *source.Source, set *source.Set, rate float64) (LatencyFigure, error) {
	fig := LatencyFigure{Cluster: t.env.Kind, OfferedPerSec: rate, Seconds: b.s.LatencyDuration.Seconds(), GraceSeconds: b.s.LatencyGrace.Seconds()}
	if err := b.emptyEvents(ctx, t); err != nil {
		return fig, err
	}
	srv, err := b.startReceiver(ctx, t, latencyReceiverConns, set, nil)
	if err != nil {
		return fig, err
	}
	defer srv.Close()
	// An open loop: no cap on connections, so no request waits for
	// another's answer in the client.
	srv.client.CloseIdleConnections()
	srv.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true,
	}}

	pool, err := b.processorPool(ctx, t, nil)
	if err != nil {
		return fig, err
	}
	defer pool.Close()
	reg := processor.NewRegistry()
	reg.Fallback(processor.HandlerFunc(noop))
	p, err := processor.New(processor.Config{Pool: pool, Registry: reg, Name: "bench-latency", PollInterval: realtimePoll})
	if err != nil {
		return fig, err
	}

	sendEnd := time.Now().Add(b.s.LatencyWarmup + b.s.LatencyDuration)
	runCtx, stopProcessor := context.WithCancel(ctx)
	defer stopProcessor()
	var st processor.Stats
	var runErr error
	var running sync.WaitGroup
	// The Lambda's real-time loop; the stage cancels it once every
	// event is processed.
	running.Go(func() {
		st, runErr = p.Run(runCtx, sendEnd.Add(b.s.LatencyGrace))
		if errors.Is(runErr, context.Canceled) {
			runErr = nil
		}
	})

	tag := "evt_lat_" + t.env.Kind + strconv.Itoa(int(rate)) + "_"
	sent, err := b.openLoop(ctx, srv, src, rate, tag)
	if err != nil {
		stopProcessor()
		running.Wait()
		return fig, err
	}
	// Let the processor work off what is left, until every measured event
	// is processed or the grace period ends.
	conn, err := pgx.Connect(ctx, t.URL())
	if err != nil {
		stopProcessor()
		running.Wait()
		return fig, err
	}
	defer conn.Close(ctx)
	graceEnd := time.Now().Add(b.s.LatencyGrace)
	for time.Now().Before(graceEnd) {
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE processed_at IS NULL AND dead_at IS NULL`).Scan(&left); err != nil {
			stopProcessor()
			running.Wait()
			return fig, fmt.Errorf("count unprocessed: %w", err)
		}
		if left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopProcessor()
	running.Wait()
	stopped := time.Now()
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return fig, fmt.Errorf("processor: %w", runErr)
	}
	fig.HandledTotal = st.Handled

	fig.Sent, fig.AchievedPerSec, fig.Errors, fig.FirstError = len(sent.answers), sent.achieved, sent.errors, sent.firstError
	fig.SendLagP99Ms = percentile(sent.lags, 99)
	fig.AnswerP50Ms, fig.AnswerP99Ms = percentile(sent.answers, 50), percentile(sent.answers, 99)

	rows, err := conn.Query(ctx, `SELECT coalesce(processed_at, $2) - created_at, processed_at IS NOT NULL
  FROM webhook_events WHERE starts_with(event_id, $1)`, tag+"m", stopped)
	if err != nil {
		return fig, fmt.Errorf("read latencies: %w", err)
	}
	var waits []waited
	for rows.Next() {
		var w waited
		if err := rows.Scan(&w.d, &w.done); err != nil {
			return fig, fmt.Errorf("read latencies: %w", err)
		}
		waits = append(waits, w)
	}
	if err := rows.Err(); err != nil {
		return fig, fmt.Errorf("read latencies: %w", err)
	}
	fig.Stored = len(waits)
	for _, w := range waits {
		if w.done {
			fig.Processed++
		}
	}
	if fig.Processed == fig.Stored && fig.Stored > 0 {
		var last time.Time
		if err := conn.QueryRow(ctx, `SELECT max(processed_at) FROM webhook_events WHERE starts_with(event_id, $1)`, tag+"m").Scan(&last); err != nil {
			return fig, fmt.Errorf("read the last processing: %w", err)
		}
		fig.CatchUpMs = float64(last.Sub(sent.lastSend)) / float64(time.Millisecond)
	}
	fig.P50Ms, fig.P50AtLeast = waitPercentile(waits, 50)
	fig.P99Ms, fig.P99AtLeast = waitPercentile(waits, 99)
	fig.MaxMs, fig.MaxAtLeast = waitPercentile(waits, 100)
	return fig, nil
}

// waited is one event's receipt-to-processed time; an event not processed
// yet has the time it had waited so far, a lower bound.
type waited struct {
	d    time.Duration
	done bool
}

// waitPercentile returns the p-th percentile (nearest rank) of ws in
// milliseconds, and whether it is only a lower bound: an unprocessed event,
// whose real time can only be longer, sorts at or below it.
func waitPercentile(ws []waited, p float64) (float64, bool) {
	if len(ws) == 0 {
		return 0, false
	}
	s := slices.Clone(ws)
	slices.SortFunc(s, func(a, b waited) int { return cmp.Compare(a.d, b.d) })
	d := make([]time.Duration, len(s))
	for i := range s {
		d[i] = s[i].d
	}
	v := percentile(d, p)
	atLeast := false
	for _, w := range s {
		if float64(w.d)/float64(time.Millisecond) > v {
			break
		}
		atLeast = atLeast || !w.done
	}
	return v, atLeast
}

// sendResult is what the open loop saw: per measured event, how late it
// was sent and when its answer came (from its scheduled time), sorted.
type sendResult struct {
	lags, answers []time.Duration
	lastSend      time.Time
	achieved      float64
	errors        int
	firstError    string
}

// openLoop sends signed events at rate for the warm-up and then the
// measured window, each at its scheduled time in a goroutine of its own,
// whether or not earlier ones were answered. Event ids start with tag and
// "w" (warm-up) or "m" (measured).
func (b *bench) openLoop(ctx context.Context, srv *receiverServer, src *source.Source, rate float64, tag string) (sendResult, error) {
	want := []byte(`"status":"accepted"`)
	url := srv.URL + "/webhooks/" + sourceName
	interval := time.Duration(float64(time.Second) / rate)
	nWarm := int(b.s.LatencyWarmup.Seconds() * rate)
	total := nWarm + int(b.s.LatencyDuration.Seconds()*rate)
	res := sendResult{lags: make([]time.Duration, 0, total-nWarm), answers: make([]time.Duration, total-nWarm)}
	var errs atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now().Add(10 * time.Millisecond)
	var first, last time.Time
	for i := range total {
		at := start.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				wg.Wait()
				return res, ctx.Err()
			}
		}
		now := time.Now()
		phase, n := "w", i
		if i >= nWarm {
			phase, n = "m", i-nWarm
			res.lags = append(res.lags, now.Sub(at))
			if n == 0 {
				first = now
			}
			last = now
		}
		wg.Go(func() {
			id := tag + phase + "_" + strconv.Itoa(n)
			body := stripeBody(id, newRand(b.s.Seed, streamLatency+uint64(i)))
			err := post(ctx, srv.client, url, src, id, body, want)
			if phase != "m" {
				return
			}
			res.answers[n] = time.Since(at)
			if err != nil && errs.Add(1) == 1 {
				mu.Lock()
				res.firstError = err.Error()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.errors = int(errs.Load())
	if res.errors == len(res.answers) {
		return res, fmt.Errorf("every request failed: %s", res.firstError)
	}
	if m := len(res.lags); m > 1 {
		res.achieved = float64(m-1) / last.Sub(first).Seconds()
	}
	res.lastSend = last
	slices.Sort(res.lags)
	slices.Sort(res.answers)
	return res, nil
}
