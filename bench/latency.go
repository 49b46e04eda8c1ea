package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localinvoke"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// latencyReceiverConns is the receiver's pool in the latency stage.
const latencyReceiverConns = 8

// latencyFunction is the processor's function name: the receiver's
// WAKE_FUNCTION, under which the stage registers the processor with the
// Invoke stand-in.
const latencyFunction = "processor"

// LatencyFigure is one line of the latency table: events offered to the
// receiver at a fixed rate, each receipt waking the processor through the
// deployed path (the receiver's debounced asynchronous lambda:Invoke, here
// answered by the Invoke stand-in, which runs each invocation in a
// container of its own), and how long each event waited from its receipt
// to its processing.
type LatencyFigure struct {
	Cluster       string  `json:"cluster"`
	OfferedPerSec float64 `json:"offered_per_sec"`
	// Seconds is the measured window (after the warm-up): -latency-duration,
	// or longer at a low rate, so that it holds -latency-min-events.
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
	// counts); they include the wake-up the receiver sends before it
	// answers.
	AnswerP50Ms float64 `json:"answer_p50_ms"`
	AnswerP99Ms float64 `json:"answer_p99_ms"`
	// Stored is how many of the sent events the table holds; Processed of
	// them were processed before the stage stopped the processor's
	// invocations (GraceSeconds after the window at most).
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
	// last event (when every event was processed): about one wake-up (or
	// at most a poll interval of a lingering invocation) when the
	// invocations keep up, more when a queue built up.
	CatchUpMs float64 `json:"catch_up_ms"`
	// HandledTotal is every event the processor's invocations handled,
	// warm-up included.
	HandledTotal int `json:"handled_total"`
	// Invocations is how many invocations of the processor started from
	// the window's first send until the stage stopped them, and
	// PeakConcurrency the most that ran at once over that time, each in a
	// container of its own.
	Invocations     int `json:"invocations"`
	PeakConcurrency int `json:"peak_concurrency"`
	// InvocationErrors counts the invocations that failed (the stand-in
	// retries them, as Lambda does), FirstInvocationError is the first;
	// WakeErrors counts the receiver's wake-ups that failed (their events
	// wait for the next wake-up), FirstWakeError is the first.
	InvocationErrors     int    `json:"invocation_errors,omitempty"`
	FirstInvocationError string `json:"first_invocation_error,omitempty"`
	WakeErrors           int    `json:"wake_errors,omitempty"`
	FirstWakeError       string `json:"first_wake_error,omitempty"`
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
			b.log.Info("latency", "cluster", e.Kind, "offered", rate, "achieved", fmt.Sprintf("%.1f", fig.AchievedPerSec),
				"seconds", fig.Seconds, "p50_ms", fmt.Sprintf("%.1f", fig.P50Ms), "p99_ms", fmt.Sprintf("%.1f", fig.P99Ms),
				"max_ms", fmt.Sprintf("%.1f", fig.MaxMs), "processed", fig.Processed, "stored", fig.Stored,
				"invocations", fig.Invocations, "peak_concurrency", fig.PeakConcurrency)
		}
	}
	return nil
}

// latencyWindow is the measured window at rate: -latency-duration, or
// long enough to send -latency-min-events, in whole seconds.
func latencyWindow(s Settings, rate float64) time.Duration {
	need := time.Duration(math.Ceil(float64(s.LatencyMinEvents)/rate)) * time.Second
	return max(s.LatencyDuration, need)
}

// stackEnv is the part of a deployed function's environment the latency
// stage reads, so that the receiver's waker and the processor get their
// configuration, defaults included, through the functions' own readers:
// the database, and the standard profile's wake-up (an asynchronous invoke
// of the processor, WAKE_DEBOUNCE and PROCESSOR_RUN_FOR at their
// defaults).
func stackEnv(t target) func(string) string {
	env := map[string]string{
		storage.EnvDatabaseURL: t.URL(),
		wake.EnvMode:           string(wake.ModeInvoke),
		wake.EnvFunction:       latencyFunction,
	}
	return func(k string) string { return env[k] }
}

// latencyFigure offers events at rate for the warm-up and the measured
// window, on schedule whatever the answers (an open loop), to the real
// receiver, which wakes the processor after each stored event as deployed:
// a real wake.Waker whose SDK client sends the asynchronous lambda:Invoke
// to the Invoke stand-in, which runs each invocation as the processor
// Lambda does (processorFunction). Nothing else runs the processor: an
// event a wake-up missed waits, and shows. Then it reads each measured
// event's receipt-to-processed time from the table.
func (b *bench) latencyFigure(ctx context.Context, t target, src *source.Source, set *source.Set, rate float64) (LatencyFigure, error) {
	window := latencyWindow(b.s, rate)
	fig := LatencyFigure{Cluster: t.env.Kind, OfferedPerSec: rate, Seconds: window.Seconds(), GraceSeconds: b.s.LatencyGrace.Seconds()}
	if err := b.emptyEvents(ctx, t); err != nil {
		return fig, err
	}
	getenv := stackEnv(t)
	pcfg, err := processor.ConfigFromEnv(getenv)
	if err != nil {
		return fig, fmt.Errorf("processor configuration: %w", err)
	}
	wcfg, err := wake.ConfigFromEnv(getenv)
	if err != nil {
		return fig, fmt.Errorf("wake-up configuration: %w", err)
	}

	inv, err := localinvoke.Start(localinvoke.Options{})
	if err != nil {
		return fig, err
	}
	fn := newProcessorFunction(b, t, pcfg)
	// Closing the stand-in cancels the invocations still lingering and
	// waits for them; their containers' pools close after.
	stopFunction := sync.OnceFunc(func() {
		_ = inv.Close()
		fn.close()
	})
	defer stopFunction()
	inv.Register(latencyFunction, fn.invoke)
	// The SDK reads its endpoint and keys from the environment when the
	// waker is opened, as in a Lambda.
	if err := useLocalInvoke(inv); err != nil {
		return fig, err
	}
	w, err := wake.Open(ctx, wcfg)
	if err != nil {
		return fig, err
	}
	waker := &envWaker{w: w}

	srv, err := b.startReceiver(ctx, t, latencyReceiverConns, set, nil, waker)
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

	tag := "evt_lat_" + t.env.Kind + strconv.Itoa(int(rate)) + "_"
	sent, err := b.openLoop(ctx, srv, src, rate, window, tag)
	if err != nil {
		return fig, err
	}
	// Let the invocations work off what is left, until every measured
	// event is processed or the grace period ends.
	conn, err := pgx.Connect(ctx, t.URL())
	if err != nil {
		return fig, err
	}
	defer conn.Close(ctx)
	graceEnd := time.Now().Add(b.s.LatencyGrace)
	for time.Now().Before(graceEnd) {
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE processed_at IS NULL AND dead_at IS NULL`).Scan(&left); err != nil {
			return fig, fmt.Errorf("count unprocessed: %w", err)
		}
		if left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopFunction()
	stopped := time.Now()
	fig.HandledTotal = int(fn.handled.Load())
	fig.Invocations, fig.PeakConcurrency = fn.since(sent.firstSend)
	fig.InvocationErrors, fig.FirstInvocationError = fn.failures()
	fig.WakeErrors, fig.FirstWakeError = waker.failures()

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

// useLocalInvoke points this process's AWS SDK at the Invoke stand-in, as
// internal/testkit/invoketest does for tests (which only tests may
// import): its endpoint, its fixed keys, a region, and none of the
// machine's AWS configuration, so that nothing reaches AWS.
func useLocalInvoke(srv *localinvoke.Server) error {
	set := map[string]string{
		"AWS_ENDPOINT_URL_LAMBDA":     srv.Endpoint(),
		"AWS_ACCESS_KEY_ID":           localinvoke.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY":       localinvoke.SecretAccessKey,
		"AWS_REGION":                  "us-east-1",
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_CONFIG_FILE":             filepath.Join(os.TempDir(), "bench-no-such-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(os.TempDir(), "bench-no-such-aws-credentials"),
	}
	for k, v := range set {
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("set %s: %w", k, err)
		}
	}
	for _, k := range []string{"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"} {
		if err := os.Unsetenv(k); err != nil {
			return fmt.Errorf("unset %s: %w", k, err)
		}
	}
	return nil
}

// envWaker is the waker of one receiver environment. Lambda sends an
// execution environment one request at a time, so its wake-ups never
// overlap: the first receipt after the debounce sends one, and the next
// receipt already finds it sent. The bench's receiver serves requests
// concurrently, so their wake-ups are taken one at a time here; otherwise
// every receipt arriving while an invoke is in flight would pass the
// debounce too (wake.Waker records a wake-up once its invoke returns) and
// send one of its own: at 1 000 events/s that made dozens of invocations
// at once. It also counts the wake-ups that failed, which the receiver
// only logs, to a log the bench discards.
type envWaker struct {
	mu sync.Mutex
	w  *wake.Waker
	// failed counts the failed wake-ups, first is the first one's error.
	failed int
	first  string
}

func (e *envWaker) Wake(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	err := e.w.Wake(ctx)
	if err != nil {
		e.failed++
		if e.first == "" {
			e.first = err.Error()
		}
	}
	return err
}

// failures returns how many wake-ups failed and the first one's error.
func (e *envWaker) failures() (int, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failed, e.first
}

// processorFunction is the processor Lambda as the Invoke stand-in runs
// it. Lambda runs each concurrent invocation in an execution environment
// of its own, reusing an idle one when it can and starting a new one
// otherwise (https://docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html):
// here a container is a processor.Processor with the Lambda's pool and a
// name of its own (claims are recorded per name), made on first use and
// kept for the next invocation when its own ends.
type processorFunction struct {
	b   *bench
	t   target
	cfg processor.Config
	reg *processor.Registry
	log *slog.Logger
	// handled is every event the invocations handled.
	handled atomic.Int64

	mu    sync.Mutex
	idle  []*processor.Processor
	pools []*pgxpool.Pool
	made  int
	spans []span
	// errs counts the failed invocations, first is the first one's error.
	errs  int
	first string
}

// span is when one invocation ran.
type span struct{ start, end time.Time }

// newProcessorFunction returns the function running cfg, the processor's
// configuration as the Lambda reads it, with a no-op handler for every
// event and the Lambda's JSON log lines (metrics included) formatted and
// discarded.
func newProcessorFunction(b *bench, t target, cfg processor.Config) *processorFunction {
	reg := processor.NewRegistry()
	reg.Fallback(processor.HandlerFunc(noop))
	return &processorFunction{
		b: b, t: t, cfg: cfg, reg: reg,
		log: slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

// invoke is one invocation: the processor's handler (Invocation) in an
// idle container, or a new one.
func (f *processorFunction) invoke(ctx context.Context, _ []byte) ([]byte, error) {
	start := time.Now()
	p, err := f.container(ctx)
	if err == nil {
		var st processor.Stats
		st, err = p.Invocation(ctx)
		f.handled.Add(int64(st.Handled))
	}
	end := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if p != nil {
		f.idle = append(f.idle, p)
	}
	f.spans = append(f.spans, span{start, end})
	if err != nil {
		// The stage's own stop cancels the lingering invocations: no
		// failure.
		if ctx.Err() == nil {
			f.errs++
			if f.first == "" {
				f.first = err.Error()
			}
		}
		return nil, err
	}
	return []byte(`{}`), nil
}

// container takes the most recently idle container, or makes a new one
// when every container is busy.
func (f *processorFunction) container(ctx context.Context) (*processor.Processor, error) {
	f.mu.Lock()
	if n := len(f.idle); n > 0 {
		p := f.idle[n-1]
		f.idle = f.idle[:n-1]
		f.mu.Unlock()
		return p, nil
	}
	f.made++
	name := "bench-latency-" + strconv.Itoa(f.made)
	f.mu.Unlock()
	pool, err := f.b.processorPool(ctx, f.t, nil)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", name, err)
	}
	f.mu.Lock()
	f.pools = append(f.pools, pool)
	f.mu.Unlock()
	p, err := processor.New(f.cfg, processor.Deps{Pool: pool, Registry: f.reg, Logger: f.log})
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", name, err)
	}
	return p, nil
}

// since returns how many invocations started at or after from, and the
// most that ran at once from then on.
func (f *processorFunction) since(from time.Time) (invocations, peak int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return countSince(f.spans, from)
}

// countSince counts the spans that start at or after from, and the most of
// all spans that overlap at one time at or after from.
func countSince(spans []span, from time.Time) (started, peak int) {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, s := range spans {
		if !s.start.Before(from) {
			started++
		}
		if s.end.After(from) {
			// One that started before from counts as running at from.
			start := s.start
			if start.Before(from) {
				start = from
			}
			edges = append(edges, edge{start, 1}, edge{s.end, -1})
		}
	}
	// At equal times an end comes first: a container freed and taken
	// again at once is one container.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.delta, b.delta)
	})
	n := 0
	for _, e := range edges {
		n += e.delta
		peak = max(peak, n)
	}
	return started, peak
}

// failures returns how many invocations failed and the first one's error.
func (f *processorFunction) failures() (int, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.errs, f.first
}

// close closes the containers' pools; the invocations have ended.
func (f *processorFunction) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pools {
		p.Close()
	}
	f.pools = nil
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
	lags, answers       []time.Duration
	firstSend, lastSend time.Time
	achieved            float64
	errors              int
	firstError          string
}

// openLoop sends signed events at rate for the warm-up and then the
// measured window of length window, each at its scheduled time in a goroutine of its own,
// whether or not earlier ones were answered. Event ids start with tag and
// "w" (warm-up) or "m" (measured).
func (b *bench) openLoop(ctx context.Context, srv *receiverServer, src *source.Source, rate float64, window time.Duration, tag string) (sendResult, error) {
	want := []byte(`"status":"accepted"`)
	url := srv.URL + "/webhooks/" + sourceName
	interval := time.Duration(float64(time.Second) / rate)
	nWarm := int(b.s.LatencyWarmup.Seconds() * rate)
	total := nWarm + int(window.Seconds()*rate)
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
	res.firstSend, res.lastSend = first, last
	slices.Sort(res.lags)
	slices.Sort(res.answers)
	return res, nil
}

// InvocationsPerEvent is the window's invocations per event sent: about
// one where nearly every event woke an invocation of its own.
func (l *LatencyFigure) InvocationsPerEvent() float64 {
	return ratio(float64(l.Invocations), float64(l.Sent))
}
