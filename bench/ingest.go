package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/sqltext"
	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Workloads of the ingest stage.
const (
	workloadNew       = "new"
	workloadDuplicate = "duplicate"
)

// IngestFigure is one line of the ingest table: one workload at one
// concurrency, the receiver beside pgbench.
type IngestFigure struct {
	Workload    string  `json:"workload"`
	Concurrency int     `json:"concurrency"`
	Receiver    Measure `json:"receiver"`
	Pgbench     Measure `json:"pgbench"`
	// Ratio is receiver/pgbench of the median events per second;
	// RatioMin and RatioMax are over the pairs of runs taken side by side.
	Ratio    float64 `json:"ratio"`
	RatioMin float64 `json:"ratio_min"`
	RatioMax float64 `json:"ratio_max"`
	// CPURatio is pgbench's CPU per event over the receiver's (each side
	// with its client and Postgres): the ratio the two would reach on the
	// same cores, which other processes' load barely moves.
	CPURatio float64 `json:"cpu_ratio"`
}

// insertScript returns the pgbench script of a workload: the receiver's
// EventInsert statement exactly as sqlc generated it (sqltext), its parameters replaced by pgbench variables (sent as parameters
// of the prepared statement, as the receiver sends them) and, for the
// metadata a Stripe event does not have, the NULL the receiver sends, and
// the body guard, false for a Stripe source as the receiver sends it.
// A parameter it does not know (the statement changed) is an error, not a
// silently different statement.
func insertScript(idFrom, idTo int64) (string, error) {
	vars := map[string]string{
		"1": ":provider", "2": ":id", "3": ":etype", "4": ":body", "5": ":body",
		"6": ":sha", "7": ":size", "8": "NULL", "9": ":kind", "10": "false",
	}
	stmt, err := sqltext.Storage("EventInsert")
	if err != nil {
		return "", fmt.Errorf("pgbench script: %w", err)
	}
	var unknown []string
	sql := regexp.MustCompile(`\$([0-9]+)`).ReplaceAllStringFunc(stmt, func(p string) string {
		v, ok := vars[p[1:]]
		if !ok {
			unknown = append(unknown, p)
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("EventInsert has parameters the pgbench script does not map: %v", unknown)
	}
	return fmt.Sprintf("\\set id random(%d, %d)\n%s;\n", idFrom, idTo, sql), nil
}

// pgbench id ranges. New events draw from 19-digit numbers (pgbench's \set
// makes numbers only); duplicates from the stored duplicate set.
const (
	pgbenchNewFrom = 2_000_000_000_000_000_000
	pgbenchNewTo   = 9_000_000_000_000_000_000
)

// pgbenchSample is the one body pgbench sends.
func pgbenchSample(seed uint64) []byte {
	return stripeBody("evt_pgbench_constant_body00", newRand(seed, 0))
}

// ingest measures both workloads at every concurrency.
func (b *bench) ingest(ctx context.Context) error {
	src, set, err := benchSource()
	if err != nil {
		return err
	}
	if err := b.storeDuplicateSet(ctx); err != nil {
		return err
	}
	sample := pgbenchSample(b.s.Seed)
	for _, workload := range []string{workloadNew, workloadDuplicate} {
		db, from, to := dbIngestNew, int64(pgbenchNewFrom), int64(pgbenchNewTo)
		if workload == workloadDuplicate {
			db, from, to = dbIngestDup, dupIDBase, int64(dupIDBase+b.s.DuplicateSet-1)
		}
		script, err := insertScript(from, to)
		if err != nil {
			return err
		}
		for _, conc := range b.s.Concurrency {
			fig, err := b.ingestFigure(ctx, ingestJob{
				Workload: workload, T: target{b.env, db}, Conc: conc, Empty: workload == workloadNew,
				Src: src, Set: set, Script: script, Vars: pgbenchVars(sample),
			})
			if err != nil {
				return err
			}
			b.rep.Ingest = append(b.rep.Ingest, fig)
			b.log.Info("ingest", "workload", workload, "concurrency", conc,
				"receiver_eps", int(fig.Receiver.Median), "pgbench_eps", int(fig.Pgbench.Median), "ratio", fmt.Sprintf("%.2f", fig.Ratio))
		}
	}
	return b.profileReceiver(ctx, src, set)
}

// pgbenchVars are the pgbench variables of the insert script: one
// constant body and its metadata.
func pgbenchVars(sample []byte) map[string]string {
	return map[string]string{
		"provider": sourceName, "etype": eventType, "kind": source.KindStripe,
		"body": string(sample), "sha": sha256Hex(sample), "size": strconv.Itoa(len(sample)),
	}
}

// ingestJob is one ingest figure to measure.
type ingestJob struct {
	Workload string
	T        target
	Conc     int
	// Empty empties the events table before every run (new events on an
	// empty table); otherwise the runs add to what it holds.
	Empty bool
	// RunBase numbers the runs' random streams (RunBase for the warm-up,
	// RunBase+1... for the runs), so that runs that keep their events
	// never send the same ids again.
	RunBase int
	Src     *source.Source
	Set     *source.Set
	Script  string
	Vars    map[string]string
}

// ingestFigure measures one workload at one concurrency: a warm-up of
// each, then the measured runs of the receiver and of pgbench taken in
// turns, so that a change of the machine's load hits both alike.
func (b *bench) ingestFigure(ctx context.Context, j ingestJob) (IngestFigure, error) {
	figs, err := b.ingestFigures(ctx, []ingestJob{j})
	if err != nil {
		return IngestFigure{}, err
	}
	return figs[0], nil
}

// ingestFigures measures jobs of the same workload and concurrency on
// different targets, all in turns: a warm-up of each side on each target,
// then for each run the receiver on each target, then pgbench on each.
func (b *bench) ingestFigures(ctx context.Context, jobs []ingestJob) ([]IngestFigure, error) {
	type side struct {
		srv       *receiverServer
		job       pgbenchJob
		recv, pgb []Run
	}
	sides := make([]*side, len(jobs))
	for k, j := range jobs {
		srv, err := b.startReceiver(ctx, j.T, j.Conc, j.Set, nil, nil)
		if err != nil {
			return nil, err
		}
		defer srv.Close()
		sides[k] = &side{srv: srv, job: pgbenchJob{
			Name: "insert-" + j.Workload, Script: j.Script, Env: j.T.env, DB: j.T.db,
			Clients: j.Conc, Threads: b.s.PgbenchThreads, Vars: j.Vars,
		}}
		// Warm-up: connections, prepared statements, caches.
		if _, err := b.load(ctx, srv, j.Workload, j.Conc, b.s.Warmup, j.RunBase, j.Src); err != nil {
			return nil, fmt.Errorf("receiver warm-up: %w", err)
		}
		sides[k].job.Duration = b.s.Warmup
		if _, err := b.pgbench(ctx, sides[k].job); err != nil {
			return nil, fmt.Errorf("pgbench warm-up: %w", err)
		}
	}
	for i := range b.s.Runs {
		for k, j := range jobs {
			if j.Empty {
				if err := b.emptyEvents(ctx, j.T); err != nil {
					return nil, err
				}
			}
			r, err := b.load(ctx, sides[k].srv, j.Workload, j.Conc, b.s.Duration, j.RunBase+i+1, j.Src)
			if err != nil {
				return nil, fmt.Errorf("receiver run %d: %w", i+1, err)
			}
			sides[k].recv = append(sides[k].recv, r)
		}
		for k, j := range jobs {
			if j.Empty {
				if err := b.emptyEvents(ctx, j.T); err != nil {
					return nil, err
				}
			}
			job := sides[k].job
			job.Duration, job.Latencies = b.s.Duration, true
			before := j.T.snapshot(ctx)
			res, err := b.pgbench(ctx, job)
			if err != nil {
				return nil, err
			}
			after := j.T.snapshot(ctx)
			pr := Run{Events: res.Transactions, Seconds: res.Seconds, EventsPerSec: res.TPS,
				P50Ms: percentile(res.Latencies, 50), P99Ms: percentile(res.Latencies, 99)}
			pr.costs(before, after, res.CPU)
			sides[k].pgb = append(sides[k].pgb, pr)
		}
	}
	figs := make([]IngestFigure, len(jobs))
	for k, j := range jobs {
		recv, pgb := sides[k].recv, sides[k].pgb
		fig := IngestFigure{Workload: j.Workload, Concurrency: j.Conc, Receiver: summarize(recv), Pgbench: summarize(pgb)}
		fig.Ratio = ratio(fig.Receiver.Median, fig.Pgbench.Median)
		for i := range recv {
			r := ratio(recv[i].EventsPerSec, pgb[i].EventsPerSec)
			if i == 0 || r < fig.RatioMin {
				fig.RatioMin = r
			}
			fig.RatioMax = max(fig.RatioMax, r)
		}
		figs[k] = fig
	}
	return figs, nil
}

// emptyEvents empties webhook_events, so that every new-event run, of
// either side, starts from the same empty table.
func (b *bench) emptyEvents(ctx context.Context, t target) error {
	pool, err := pgxpool.New(ctx, t.URL())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", t.db, err)
	}
	defer pool.Close()
	if err := emptyEventTables(ctx, pool); err != nil {
		return fmt.Errorf("empty %s: %w", t.db, err)
	}
	return nil
}

// storeDuplicateSet stores the events the duplicate runs redeliver, with
// the very bodies the load generator sends again (so that no redelivery is
// a payload mismatch).
func (b *bench) storeDuplicateSet(ctx context.Context) error {
	pool, err := pgxpool.New(ctx, target{b.env, dbIngestDup}.URL())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", dbIngestDup, err)
	}
	defer pool.Close()
	store := storage.New(pool)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for w := range errs {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.s.DuplicateSet {
					return
				}
				_, err := store.EventInsert(ctx, storage.EventInsertParams{
					Source: sourceName, SourceKind: source.KindStripe, EventID: dupID(i), EventType: eventType, Body: dupBody(b.s.Seed, i),
				})
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store the duplicate set: %w", err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE webhook_events`); err != nil {
		return fmt.Errorf("vacuum %s: %w", dbIngestDup, err)
	}
	return nil
}

// receiverServer is the real receiver handler served by net/http on a
// loopback port, with its own pool of as many connections as clients.
type receiverServer struct {
	URL    string
	t      target
	srv    *http.Server
	pool   *pgxpool.Pool
	client *http.Client
}

// startReceiver serves the receiver as `make dev` and the Lambda build it:
// JSON log lines with their EMF metrics (written to io.Discard: formatting
// them is part of the cost, writing them to CloudWatch is not), the default
// store timeout and body limit, cache_statement query mode. timing, when
// set, receives the time of each insert. waker, when set, wakes the
// processor after each stored event, as the deployed receiver's does.
func (b *bench) startReceiver(ctx context.Context, t target, conc int, set *source.Set, timing *storeTiming, waker receiver.Waker) (*receiverServer, error) {
	pool, err := storage.PoolConfig{
		URL: t.URL(), ApplicationName: "bench-receiver", MaxConns: int32(conc), ConnectTimeout: 3 * time.Second,
	}.Open(ctx)
	if err != nil {
		return nil, err
	}
	var store receiver.EventStore = storage.New(pool)
	if timing != nil {
		timing.EventStore = store
		store = timing
	}
	h, err := receiver.New(receiver.Config{Metrics: metrics.Emitter{}}, receiver.Deps{
		Sources: set,
		Store:   store,
		Logger:  slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Wake:    waker,
	})
	if err != nil {
		pool.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	labelled := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pprof.Do(r.Context(), pprof.Labels("side", "receiver"), func(ctx context.Context) {
			h.ServeHTTP(w, r.WithContext(ctx))
		})
	})
	s := &receiverServer{
		URL:  "http://" + ln.Addr().String(),
		t:    t,
		srv:  &http.Server{Handler: labelled, ReadHeaderTimeout: 10 * time.Second},
		pool: pool,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			MaxIdleConns: conc, MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc, DisableCompression: true,
		}},
	}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server and closes its pool.
func (s *receiverServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	s.client.CloseIdleConnections()
	s.pool.Close()
}

// load drives the receiver with conc closed-loop clients for d: each sends
// a signed event, waits for the answer and sends the next. run numbers the
// random stream of new events (0 for the warm-up). Every answer must be the
// one expected (accepted, or duplicate), or the run fails.
func (b *bench) load(ctx context.Context, srv *receiverServer, workload string, conc int, d time.Duration, run int, src *source.Source) (Run, error) {
	want := []byte(`"status":"accepted"`)
	if workload == workloadDuplicate {
		want = []byte(`"status":"duplicate"`)
	}
	url := srv.URL + "/webhooks/" + sourceName
	lat := make([][]time.Duration, conc)
	errs := make([]error, conc)
	before := srv.t.snapshot(ctx)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range conc {
		wg.Go(func() {
			pprof.Do(ctx, pprof.Labels("side", "loadgen"), func(ctx context.Context) {
				rnd := newRand(b.s.Seed, streamNew+uint64(run)<<16+uint64(w))
				pick := newRand(b.s.Seed, streamPick+uint64(run)<<16+uint64(w))
				for time.Now().Before(deadline) {
					var id string
					var body []byte
					if workload == workloadNew {
						id = stripeID(rnd)
						body = stripeBody(id, rnd)
					} else {
						i := pick.IntN(b.s.DuplicateSet)
						id, body = dupID(i), dupBody(b.s.Seed, i)
					}
					t0 := time.Now()
					if err := post(ctx, srv.client, url, src, id, body, want); err != nil {
						errs[w] = err
						return
					}
					lat[w] = append(lat[w], time.Since(t0))
				}
			})
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	after := srv.t.snapshot(ctx)
	if err := errors.Join(errs...); err != nil {
		return Run{}, err
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	r := Run{Events: len(all), Seconds: elapsed.Seconds(), EventsPerSec: float64(len(all)) / elapsed.Seconds(),
		P50Ms: percentile(all, 50), P99Ms: percentile(all, 99)}
	r.costs(before, after, 0)
	return r, nil
}

// post signs body as Stripe does, posts it and checks the answer.
func post(ctx context.Context, client *http.Client, url string, src *source.Source, id string, body, want []byte) error {
	signed, err := sender.Sign(src, body, id, time.Now())
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = signed.Header
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("post %s: %w", id, err)
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("read answer for %s: %w", id, err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(answer, want) {
		return fmt.Errorf("event %s: answer %d %s, want 200 with %s", id, resp.StatusCode, bytes.TrimSpace(answer), want)
	}
	return nil
}

// storeTiming wraps the receiver's store and times its inserts: the
// database's share (round trip, server work, pgx) of each request.
type storeTiming struct {
	receiver.EventStore
	n     atomic.Int64
	total atomic.Int64 // nanoseconds
}

// EventInsert times the wrapped insert.
func (s *storeTiming) EventInsert(ctx context.Context, p storage.EventInsertParams) (storage.EventInsertResult, error) {
	t0 := time.Now()
	res, err := s.EventStore.EventInsert(ctx, p)
	s.total.Add(int64(time.Since(t0)))
	s.n.Add(1)
	return res, err
}

// mean returns the mean insert time.
func (s *storeTiming) mean() time.Duration {
	n := s.n.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(s.total.Load() / n)
}

// ReceiverProfile is the profiled receiver run: where its CPU and its
// time went.
type ReceiverProfile struct {
	Concurrency  int     `json:"concurrency"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	P50Ms        float64 `json:"p50_ms"`
	// InsertMeanMs is the mean time of the handler's EventInsert (round
	// trip and server work) against the request latency.
	InsertMeanMs float64    `json:"insert_mean_ms"`
	MeanMs       float64    `json:"request_mean_ms"`
	Profile      CPUProfile `json:"profile"`
	Run          Run        `json:"run"`
	// StoreOnly is storage.Store.EventInsert called directly, at the same
	// concurrency, without HTTP, signatures or logs.
	StoreOnly Run `json:"store_only"`
}

// profileReceiver runs the new-event workload once more at the highest
// concurrency under the CPU profiler, with the inserts timed. It is not one
// of the measured runs.
func (b *bench) profileReceiver(ctx context.Context, src *source.Source, set *source.Set) error {
	conc := slices.Max(b.s.Concurrency)
	t := target{b.env, dbIngestNew}
	if err := b.emptyEvents(ctx, t); err != nil {
		return err
	}
	timing := &storeTiming{}
	srv, err := b.startReceiver(ctx, t, conc, set, timing, nil)
	if err != nil {
		return err
	}
	defer srv.Close()
	if _, err := b.load(ctx, srv, workloadNew, conc, b.s.Warmup, 0, src); err != nil {
		return fmt.Errorf("profile warm-up: %w", err)
	}
	timing.n.Store(0)
	timing.total.Store(0)
	var r Run
	prof, err := b.cpuProfile("receiver", func() error {
		var err error
		// Twice a measured run, for enough samples at 100 Hz.
		r, err = b.load(ctx, srv, workloadNew, conc, 2*b.s.Duration, b.s.Runs+1, src)
		return err
	})
	if err != nil {
		return fmt.Errorf("profiled receiver run: %w", err)
	}
	b.rep.ReceiverProfile = &ReceiverProfile{
		Concurrency: conc, Seconds: r.Seconds, EventsPerSec: r.EventsPerSec, P50Ms: r.P50Ms,
		InsertMeanMs: float64(timing.mean()) / float64(time.Millisecond),
		MeanMs:       r.Seconds * float64(conc) / float64(max(r.Events, 1)) * 1000,
		Profile:      prof, Run: r,
	}
	if err := b.emptyEvents(ctx, t); err != nil {
		return err
	}
	direct, err := b.storeDirect(ctx, t, conc)
	if err != nil {
		return fmt.Errorf("store-only run: %w", err)
	}
	b.rep.ReceiverProfile.StoreOnly = direct
	return nil
}

// storeDirect calls the receiver's storage.Store.EventInsert from conc
// goroutines for one run, with the same new events and pool but no HTTP,
// no signature and no log line: the receiver minus its HTTP front, which
// splits the gap to pgbench into what pgx and the Go side cost and what
// the rest does.
func (b *bench) storeDirect(ctx context.Context, t target, conc int) (Run, error) {
	pool, err := storage.PoolConfig{
		URL: t.URL(), ApplicationName: "bench-store", MaxConns: int32(conc), ConnectTimeout: 3 * time.Second,
	}.Open(ctx)
	if err != nil {
		return Run{}, err
	}
	defer pool.Close()
	store := storage.New(pool)
	work := func(d time.Duration, run int) (Run, error) {
		counts := make([]int, conc)
		errs := make([]error, conc)
		before := t.snapshot(ctx)
		start := time.Now()
		deadline := start.Add(d)
		var wg sync.WaitGroup
		for w := range conc {
			wg.Go(func() {
				rnd := newRand(b.s.Seed, streamNew+uint64(run)<<16+uint64(w))
				for time.Now().Before(deadline) {
					id := stripeID(rnd)
					res, err := store.EventInsert(ctx, storage.EventInsertParams{
						Source: sourceName, SourceKind: source.KindStripe, EventID: id, EventType: eventType, Body: stripeBody(id, rnd),
					})
					if err == nil && !res.Inserted {
						err = fmt.Errorf("event %s: stored as a duplicate", id)
					}
					if err != nil {
						errs[w] = err
						return
					}
					counts[w]++
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		after := t.snapshot(ctx)
		if err := errors.Join(errs...); err != nil {
			return Run{}, err
		}
		n := 0
		for _, c := range counts {
			n += c
		}
		r := Run{Events: n, Seconds: elapsed.Seconds(), EventsPerSec: float64(n) / elapsed.Seconds()}
		r.costs(before, after, 0)
		return r, nil
	}
	if _, err := work(b.s.Warmup, b.s.Runs+2); err != nil {
		return Run{}, err
	}
	return work(b.s.Duration, b.s.Runs+3)
}
