// Command bench measures webhook-inbox against yardsticks run on the same
// machine in the same run: the database itself (pgbench executing the very
// statements the project runs) and a respected peer doing the same job
// (River, the Go + Postgres job queue). Absolute times drift on a shared
// machine; the ratios between figures taken side by side do not, so the
// ratios are the headline.
//
// It starts its own throwaway PostgreSQL cluster (localpg, as the tests do)
// and versitygw (locals3), runs each stage, prints a table and writes
// docs/benchmarks.md and docs/benchmarks.json:
//
//   - ingest: the real receiver http.Handler over net/http on loopback,
//     driven by a Go load generator with signed ~1 KB Stripe-style events,
//     beside pgbench running the receiver's EventInsert statement, for new events and for
//     redeliveries;
//   - drain: the processor with a no-op handler over 100 000 stored events,
//     beside River working 100 000 no-op jobs and the bare limit, a pgbench
//     FOR UPDATE SKIP LOCKED claim-and-mark batch UPDATE, on the fast
//     cluster (fsync off, in memory) and on a durable one (fsync and
//     full-page writes on, on disk: the production case), in turns;
//   - latency: the receiver offered events at fixed rates by an open-loop
//     generator, waking the processor after each stored event through the
//     deployed path (its debounced asynchronous lambda:Invoke, answered by
//     the Invoke stand-in, which runs each invocation in a container of
//     its own); each event's receipt-to-processed time read from the table;
//   - history: ten million processed, archived events loaded, then ingest
//     and drain again over them, beside the empty-table figures;
//   - console: a million stored events (and dead letters, operator
//     actions), then each page of the operator console timed server-side,
//     its handler called in process, against the console's 100 ms bound,
//     the events list's search by content last;
//   - archive: the archiver moving the drained events' payloads to versitygw;
//   - lambda: the bootstrap binaries' sizes and init durations under the
//     Lambda Runtime Interface Emulator.
//
// Run it with `make bench` (which installs what is missing first) or, from
// this folder, `go run . -out ../docs`.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// Settings are the knobs of a run; every one is printed on the page.
type Settings struct {
	Seed           uint64        `json:"seed"`
	Runs           int           `json:"runs"`
	Duration       time.Duration `json:"-"`
	Warmup         time.Duration `json:"-"`
	DurationS      float64       `json:"run_seconds"`
	WarmupS        float64       `json:"warmup_seconds"`
	Concurrency    []int         `json:"concurrency"`
	BodyBytes      int           `json:"body_bytes"`
	DuplicateSet   int           `json:"duplicate_set"`
	DrainEvents    int           `json:"drain_events"`
	DrainRuns      int           `json:"drain_runs"`
	BatchSize      int           `json:"processor_batch_size"`
	Processors     int           `json:"processors"`
	LimitClients   int           `json:"limit_clients"`
	RiverWorkers   int           `json:"river_max_workers"`
	RiverPoolConns int32         `json:"river_pool_conns"`
	ArchiveBatch   int           `json:"archive_batch_size"`
	PgbenchThreads int           `json:"pgbench_threads"`
	// Durable runs a second, durable cluster for the drain and latency
	// stages.
	Durable bool `json:"durable"`
	// The latency stage: offered rates (events per second), the measured
	// window (longer at a rate too low to send LatencyMinEvents in it),
	// the warm-up before it, the longest the processor's invocations may
	// take after it, and whether the durable cluster is measured too. The
	// wake-up path runs with the deployed defaults: the receiver's
	// debounce (WAKE_DEBOUNCE), how long each processor invocation keeps
	// polling after it starts (PROCESSOR_RUN_FOR), and its poll interval
	// meanwhile (PROCESSOR_POLL_INTERVAL; the JSON name is from when one
	// processor polled for the whole stage).
	LatencyRates     []int         `json:"latency_rates"`
	LatencyDuration  time.Duration `json:"-"`
	LatencyWarmup    time.Duration `json:"-"`
	LatencyGrace     time.Duration `json:"-"`
	LatencyS         float64       `json:"latency_seconds"`
	LatencyMinEvents int           `json:"latency_min_events"`
	LatencyWarmupS   float64       `json:"latency_warmup_seconds"`
	LatencyGraceS    float64       `json:"latency_grace_seconds"`
	LatencyDurable   bool          `json:"latency_durable"`
	PollMs           float64       `json:"realtime_poll_ms"`
	DebounceMs       float64       `json:"wake_debounce_ms"`
	RunForMs         float64       `json:"processor_run_for_ms"`
	ReceiverConns    int           `json:"latency_receiver_conns"`
	// HistoryEvents is the history stage's preloaded events; HistoryRiver
	// loads as many completed jobs for River.
	HistoryEvents int  `json:"history_events"`
	HistoryRiver  bool `json:"history_river"`
	// ConsoleEvents is the console stage's stored events, ConsoleRequests
	// how many times it times each page.
	ConsoleEvents   int      `json:"console_events"`
	ConsoleRequests int      `json:"console_requests"`
	Stages          []string `json:"stages"`
	// PauseEvents is what the pause stage drains, PauseHeld what the
	// paused source holds beside them.
	PauseEvents int `json:"pause_events"`
	PauseHeld   int `json:"pause_held"`
}

// allStages is every stage, in the order they run.
var allStages = []string{"ingest", "drain", "latency", "history", "console", "archive", "lambda", "pause"}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run parses the flags in args and runs the bench.
func run(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var (
		out         = fs.String("out", "../docs", "folder receiving benchmarks.md and benchmarks.json")
		seed        = fs.Uint64("seed", 1, "seed of every generated event id and body")
		runs        = fs.Int("runs", 3, "measured runs per ingest figure (the median is reported)")
		duration    = fs.Duration("duration", 3*time.Second, "length of one measured ingest run")
		warmup      = fs.Duration("warmup", time.Second, "warm-up before the measured runs of each ingest figure")
		conc        = fs.String("concurrency", "8,32", "ingest concurrencies (comma-separated)")
		dupSet      = fs.Int("duplicates", 20000, "stored events that the duplicate runs redeliver")
		drainEvents = fs.Int("drain-events", 100000, "events (jobs) each drain run works")
		drainRuns   = fs.Int("drain-runs", 3, "measured runs per drain figure")
		processors  = fs.Int("processors", 8, "concurrent processors in the drain (as concurrent Lambda invocations)")
		durable     = fs.Bool("durable", true, "also run the drain (and the latency) on a durable cluster: fsync and full-page writes on, on disk")
		latRates    = fs.String("latency-rates", "1,100,1000", "events per second offered in the latency stage (comma-separated); "+
			"at 1/s, slower than the receiver's wake-up debounce, every event wakes an invocation of its own, as at a low-volume stack")
		latDur      = fs.Duration("latency-duration", 30*time.Second, "measured window of each latency figure (at least; see -latency-min-events)")
		latMin      = fs.Int("latency-min-events", 200, "events each latency window sends at least: a rate too low for -latency-duration gets a longer window")
		latWarm     = fs.Duration("latency-warmup", 5*time.Second, "warm-up at the same rate before each latency window")
		latGrace    = fs.Duration("latency-grace", 30*time.Second, "longest the processor's invocations may take after a latency window to finish its events")
		latDurable  = fs.Bool("latency-durable", true, "measure the latency on the durable cluster too (with -durable)")
		histEvents  = fs.Int("history", 10_000_000, "processed, archived events loaded before the history stage's ingest and drain")
		histRiver   = fs.Bool("history-river", true, "give River as many completed jobs in the history stage")
		conEvents   = fs.Int("console-events", 1_000_000, "events stored before the console stage times its pages")
		conRequests = fs.Int("console-requests", 200, "timed requests per console page")
		pauseEvents = fs.Int("pause-events", 20000, "events the pause stage drains, with a paused source beside them and without")
		pauseHeld   = fs.Int("pause-held", 200000, "events the paused source holds in the pause stage")
		stages      = fs.String("stages", strings.Join(allStages, ","), "stages to run (comma-separated): "+strings.Join(allStages, ", "))
		profileDir  = fs.String("profiles", "", "folder for the CPU profiles (default: a temporary folder, printed at the end)")
		render      = fs.String("render", "", "only write the page and the JSON again from this benchmarks.json (after editing the templates); "+
			"with -profiles, the CPU profiles found there are summed up again too")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *render != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", *out, err)
		}
		return rerender(*render, *profileDir, *out)
	}

	s := Settings{
		Seed: *seed, Runs: *runs, Duration: *duration, Warmup: *warmup,
		DurationS: duration.Seconds(), WarmupS: warmup.Seconds(),
		BodyBytes: bodySize, DuplicateSet: *dupSet,
		DrainEvents: *drainEvents, DrainRuns: *drainRuns, BatchSize: processor.DefaultBatchSize, Processors: *processors,
		LimitClients: *processors, RiverWorkers: riverMaxWorkers, ArchiveBatch: 1000, PgbenchThreads: 2,
		Durable:         *durable,
		LatencyDuration: *latDur, LatencyWarmup: *latWarm, LatencyGrace: *latGrace,
		LatencyS: latDur.Seconds(), LatencyMinEvents: *latMin, LatencyWarmupS: latWarm.Seconds(), LatencyGraceS: latGrace.Seconds(),
		LatencyDurable: *latDurable && *durable,
		PollMs:         ms(processor.DefaultPollInterval), DebounceMs: ms(wake.DefaultDebounce), RunForMs: ms(processor.DefaultRunFor),
		ReceiverConns: latencyReceiverConns,
		HistoryEvents: *histEvents, HistoryRiver: *histRiver,
		ConsoleEvents: *conEvents, ConsoleRequests: *conRequests,
		PauseEvents: *pauseEvents, PauseHeld: *pauseHeld,
	}
	for _, f := range strings.Split(*latRates, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-latency-rates: %q is not a positive number", f)
		}
		s.LatencyRates = append(s.LatencyRates, n)
	}
	if s.LatencyDuration < time.Second || s.LatencyMinEvents < 0 || s.LatencyWarmup < 0 || s.LatencyGrace < 0 || s.HistoryEvents < 0 {
		return errors.New("-latency-duration must be at least 1s, -latency-min-events, -latency-warmup, -latency-grace and -history not negative")
	}
	if s.PauseEvents < processor.DefaultBatchSize || s.PauseHeld < 1 {
		return errors.New("-pause-events must be at least one batch, -pause-held positive")
	}
	if s.ConsoleEvents < 1000 || s.ConsoleRequests < 1 {
		return errors.New("-console-events must be at least 1000 (one dead event in a thousand), -console-requests positive")
	}
	for _, f := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-concurrency: %q is not a positive number", f)
		}
		s.Concurrency = append(s.Concurrency, n)
	}
	for _, st := range strings.Split(*stages, ",") {
		st = strings.TrimSpace(st)
		if !slices.Contains(allStages, st) {
			return fmt.Errorf("-stages: unknown stage %q (want %s)", st, strings.Join(allStages, ", "))
		}
		s.Stages = append(s.Stages, st)
	}
	if s.Runs < 1 || s.DrainRuns < 1 || s.Processors < 1 || s.DrainEvents < s.BatchSize {
		return errors.New("-runs, -drain-runs and -processors must be positive, -drain-events at least one batch")
	}
	// pgbench's -T counts whole seconds, and both sides must run as long.
	for _, d := range []time.Duration{s.Duration, s.Warmup} {
		if d < time.Second || d%time.Second != 0 {
			return fmt.Errorf("-duration and -warmup must be whole seconds (pgbench -T), got %s", d)
		}
	}
	outDir, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", outDir, err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	tmp, err := os.MkdirTemp("", "webhook-inbox-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	profiles := *profileDir
	if profiles == "" {
		if profiles, err = os.MkdirTemp("", "webhook-inbox-profiles-"); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(profiles, 0o755); err != nil {
		return err
	}

	started := time.Now()
	fastDBs, durableDBs := stageDatabases(s)
	env, err := startEnv(ctx, log, envOptions{DBs: fastDBs, S3: slices.Contains(s.Stages, "archive") || slices.Contains(s.Stages, "lambda")})
	if err != nil {
		return err
	}
	defer env.Close()
	var durableEnv *Env
	if len(durableDBs) > 0 {
		if durableEnv, err = startEnv(ctx, log, envOptions{Durable: true, DBs: durableDBs}); err != nil {
			return err
		}
		defer durableEnv.Close()
	}

	rep := &Report{Settings: s, Started: started.UTC()}
	if rep.Machine, err = describeMachine(ctx, env, durableEnv); err != nil {
		return err
	}
	b := &bench{env: env, durable: durableEnv, s: s, log: log, rep: rep, tmp: tmp, profiles: profiles}
	for _, st := range s.Stages {
		stageStart := time.Now()
		load := loadAvg()
		log.Info("stage start", "stage", st, "loadavg1", load)
		var err error
		switch st {
		case "ingest":
			err = b.ingest(ctx)
		case "drain":
			err = b.drain(ctx)
		case "latency":
			err = b.latency(ctx)
		case "history":
			err = b.history(ctx)
		case "console":
			err = b.console(ctx)
		case "archive":
			err = b.archive(ctx)
		case "lambda":
			err = b.lambda(ctx)
		case "pause":
			err = b.pause(ctx)
		}
		if err != nil {
			return fmt.Errorf("stage %s: %w", st, err)
		}
		rep.Stages = append(rep.Stages, StageTime{Name: st, Seconds: time.Since(stageStart).Seconds(), LoadAvgBefore: load, LoadAvgAfter: loadAvg()})
		log.Info("stage done", "stage", st, "seconds", fmt.Sprintf("%.1f", time.Since(stageStart).Seconds()))
	}
	rep.TotalSeconds = time.Since(started).Seconds()
	rep.finish()
	log.Info("stage timings", "stages", rep.stageTimes(), "total_seconds", fmt.Sprintf("%.0f", rep.TotalSeconds))

	if err := writeReport(rep, outDir); err != nil {
		return err
	}
	fmt.Println(rep.Summary())
	fmt.Printf("wrote %s and %s; CPU profiles in %s\n",
		filepath.Join(outDir, "benchmarks.md"), filepath.Join(outDir, "benchmarks.json"), profiles)
	return nil
}

// stageDatabases returns the databases the stages need on the fast and on
// the durable cluster (none there: no durable cluster).
func stageDatabases(s Settings) (fast, durable []string) {
	for _, st := range s.Stages {
		switch st {
		case "ingest":
			fast = append(fast, dbIngestNew, dbIngestDup)
		case "drain":
			fast = append(fast, dbDrain, dbRiver)
			if s.Durable {
				durable = append(durable, dbDrain, dbRiver)
			}
		case "latency":
			fast = append(fast, dbLatency)
			if s.LatencyDurable {
				durable = append(durable, dbLatency)
			}
		case "history":
			fast = append(fast, dbHistory, dbHistoryEmpty)
			if s.HistoryRiver {
				fast = append(fast, dbRiverHist, dbRiver)
			}
		case "console":
			fast = append(fast, dbConsole)
		case "archive":
			fast = append(fast, dbDrain)
		case "lambda":
			fast = append(fast, dbLambda)
		case "pause":
			fast = append(fast, dbPause)
		}
	}
	slices.Sort(fast)
	slices.Sort(durable)
	return slices.Compact(fast), slices.Compact(durable)
}

// bench carries what every stage needs.
type bench struct {
	env *Env // the fast cluster, and S3
	// durable is the durable cluster, nil when it does not run.
	durable  *Env
	s        Settings
	log      *slog.Logger
	rep      *Report
	tmp      string
	profiles string
}

// clusters returns the clusters of the run: the fast one, then the
// durable one when it runs.
func (b *bench) clusters() []*Env {
	if b.durable == nil {
		return []*Env{b.env}
	}
	return []*Env{b.env, b.durable}
}

// writeReport writes benchmarks.json, then benchmarks.md, to dir.
func writeReport(rep *Report, dir string) error {
	js, err := rep.JSON()
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "benchmarks.json"), js); err != nil {
		return err
	}
	md, err := rep.Markdown()
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, "benchmarks.md"), []byte(md))
}

// rerender writes the page and the JSON of a run's benchmarks.json into
// dir again, its derived figures computed anew and, when profiles names
// the run's profiles folder, its CPU profiles summed up anew.
func rerender(path, profiles, dir string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if profiles != "" {
		var sums []*CPUProfile
		if rep.ReceiverProfile != nil {
			sums = append(sums, &rep.ReceiverProfile.Profile)
		}
		if rep.DrainProfile != nil {
			sums = append(sums, &rep.DrainProfile.Profile)
		}
		for _, p := range sums {
			again, err := summarizeProfile(filepath.Join(profiles, p.File))
			if err != nil {
				return err
			}
			again.Seconds = p.Seconds
			*p = again
		}
	}
	rep.finish()
	return writeReport(&rep, dir)
}

// writeFile writes data through a temporary file and a rename, so an
// interrupted run never leaves half a page.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ms returns d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
