package processor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Defaults of Config. The retry window they give (the sum of the delay
// ceilings between the attempts) is 14h31m30s: docs/processor.md.
const (
	// DefaultBatchSize is MaxBatchSize: the more events a transaction
	// runs, the fewer commits and round trips each costs (docs/processor.md
	// has the measurements).
	DefaultBatchSize      = MaxBatchSize
	DefaultBodyBudget     = 16 << 20
	DefaultMaxAttempts    = 12
	DefaultBackoffBase    = 30 * time.Second
	DefaultBackoffCap     = 6 * time.Hour
	DefaultLease          = 2 * time.Minute
	DefaultHandlerTimeout = 30 * time.Second
	DefaultSafetyMargin   = 40 * time.Second
)

// MaxBatchSize bounds Config.BatchSize. A batch runs in one transaction
// with a savepoint per handler that writes, and PostgreSQL keeps the
// subtransactions of a transaction in a per-backend cache of 64 entries:
// past it, every other session's visibility checks must look them up in
// pg_subtrans, which slows the whole server (the "subtransaction
// overflow" of many post-mortems). 64 handlers' savepoints fit it.
const MaxBatchSize = 64

// UnhandledPolicy says what happens to an event no handler matches.
type UnhandledPolicy string

// Unhandled policies.
const (
	// UnhandledMark marks the event processed with outcome "unhandled"
	// without running anything (the default): most senders deliver many
	// event types an application does not care about, and retrying them
	// would only fill the dead letters.
	UnhandledMark UnhandledPolicy = "mark"
	// UnhandledRetry treats the event as a failed attempt (cause
	// no_handler): it is retried with backoff and dead-lettered after
	// MaxAttempts, so a handler deployed within the retry window still gets
	// it, and a requeue afterwards.
	UnhandledRetry UnhandledPolicy = "retry"
	// UnhandledDeadLetter moves the event to the dead letters at once, for
	// applications that must see every event handled.
	UnhandledDeadLetter UnhandledPolicy = "dead_letter"
)

// ParseUnhandledPolicy reads a policy name.
func ParseUnhandledPolicy(s string) (UnhandledPolicy, error) {
	switch p := UnhandledPolicy(s); p {
	case UnhandledMark, UnhandledRetry, UnhandledDeadLetter:
		return p, nil
	}
	return "", fmt.Errorf("unknown unhandled policy %q (want mark, retry or dead_letter)", s)
}

// Config is a Processor's settings: plain values, read from the
// environment by ConfigFromEnv or set by hand. Zero durations and sizes
// take the defaults. What it runs on (the pool, the handlers, the logger,
// the clock...) is in Deps, given to New beside it.
type Config struct {
	// SourceKinds maps source names to kinds, for routes by Kind of events
	// stored before the receiver recorded each event's source_kind; newer
	// events carry their kind and need no map. Optional.
	SourceKinds map[string]string

	// BatchSize is how many events one claim takes and runs in one
	// transaction (1..MaxBatchSize).
	BatchSize int
	// BodyBudget bounds the bytes of bodies a claim holds in memory at
	// once: the claim reads the bodies that fit, and the rest a budget at
	// a time as their turn comes. An event whose body alone exceeds it can
	// never be handled within it and goes to the dead letters (cause
	// body_over_budget); it must therefore be at least the receiver's
	// largest body (WEBHOOK_MAX_BODY_BYTES).
	BodyBudget int64
	// MaxAttempts is how many attempts an event gets before it is
	// dead-lettered (1 means no retry).
	MaxAttempts int
	// BackoffBase and BackoffCap shape the delay between attempts: see
	// Backoff.
	BackoffBase time.Duration
	BackoffCap  time.Duration
	// Lease is how long a claim holds its events. The rows of a processor
	// that dies are claimable again once it passes, so it bounds how late
	// they run; it must exceed SafetyMargin, which every event needs.
	Lease time.Duration
	// HandlerTimeout bounds one event: handler and commit.
	HandlerTimeout time.Duration
	// SafetyMargin is the time an event needs to be started: the processor
	// claims a batch, and starts each event, only while at least this much
	// is left before the context's deadline (the Lambda's end) and before
	// the lease's end. It must exceed HandlerTimeout; the difference is the
	// time left for the bookkeeping after a handler that used all of its.
	SafetyMargin time.Duration
	// Unhandled is the policy for events no handler matches.
	Unhandled UnhandledPolicy

	// Metrics makes each Drain and each Run end with one log line that is
	// a CloudWatch EMF record of its counts, duration and the backlog it
	// leaves (see metrics.go). With Metrics.Off the line is a plain log
	// line at debug level, and each drain that claimed events logs its
	// counts at info instead (the dev stack, read by a person). Its clock
	// is the processor's (Deps.Clock).
	Metrics metrics.Emitter

	// PollInterval is how long Run waits, after a drain that found nothing
	// due, before it claims again: it bounds how long an event committed
	// while an invocation lingers waits for it, and sets what the linger
	// costs (a look for due events per interval per running processor).
	// Zero means DefaultPollInterval.
	PollInterval time.Duration
	// RunFor is how long each invocation keeps polling after it starts
	// (Invocation runs Run until start + RunFor): the linger that lets a
	// receiver debounce its wake-ups (shared/wake), which must stay below
	// it; 0 makes each invocation one drain. ConfigFromEnv defaults it to
	// DefaultRunFor.
	RunFor time.Duration
	// ArchiveAfter is how long after processing an event becomes
	// archivable (the archiver's ARCHIVE_MIN_AGE); 0 arms no archiver.
	ArchiveAfter time.Duration
}

// Deps is what a Processor runs on, given to New with its Config.
type Deps struct {
	// Pool is the database, with at least 2 connections (a claim's
	// transaction holds one while the claim is recorded on the other).
	// Open it from Config.Pool, which gives it
	// SessionParams(HandlerTimeout), so the server ends what a frozen or
	// dead processor left open, and storage.PoolConfig.CancelOnContext, so
	// that a handler's timeout cancels its statement rather than its
	// connection. Required.
	Pool *pgxpool.Pool
	// Registry routes events to handlers; nil routes none.
	Registry *Registry
	// Logger receives one line per failure, dead letter and lost lease,
	// and the metrics lines; nil discards.
	Logger *slog.Logger
	// Bodies reads the bodies of archived events, which a replay sends
	// through the processor again (archive.OpenBodies: a ranged read of
	// the event's gzip member, verified against its SHA-256). Nil: such an
	// event fails its attempt (cause archive_store_unavailable) and is
	// retried.
	Bodies BodyReader
	// Wake, when set, arms the wake-ups an invocation leaves behind
	// (Invocation, see wake.go): the processor's own at its next retry or
	// lease end, and the archiver's once what it processed is old enough
	// to archive (wake.Open). Nil arms nothing (the dev stack polls
	// instead).
	Wake Armer
	// Clock is the processor's time; nil means the system clock.
	Clock Clock
	// Rand is the retries' jitter source, in [0, 1); nil means
	// math/rand/v2.
	Rand func() float64
}

// Clock is where a Processor reads the time and waits. Every time it
// writes or compares (lease ends, due times, processed_at) is Now, and
// Run's waits between drains are After; the deadline of the context it
// is given (Lambda's) is on the wall clock, whatever the Clock.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// systemClock is the wall clock.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// WithDefaults returns c with its zero fields set to the defaults, as New
// applies them: a configuration reader can check the values that will run.
func (c Config) WithDefaults() Config {
	c.defaults()
	return c
}

func (c *Config) defaults() {
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BodyBudget == 0 {
		c.BodyBudget = DefaultBodyBudget
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffCap == 0 {
		c.BackoffCap = max(DefaultBackoffCap, c.BackoffBase)
	}
	if c.HandlerTimeout == 0 {
		c.HandlerTimeout = DefaultHandlerTimeout
	}
	if c.SafetyMargin == 0 {
		c.SafetyMargin = max(DefaultSafetyMargin, c.HandlerTimeout+10*time.Second)
	}
	if c.Lease == 0 {
		c.Lease = max(DefaultLease, 2*c.SafetyMargin)
	}
	if c.Unhandled == "" {
		c.Unhandled = UnhandledMark
	}
}

// validate reports every invalid setting at once, after defaults.
func (c Config) validate() error {
	var errs []error
	if c.BatchSize < 1 || c.BatchSize > MaxBatchSize {
		errs = append(errs, fmt.Errorf("processor: BatchSize must be 1 to %d, got %d", MaxBatchSize, c.BatchSize))
	}
	if c.BodyBudget < 0 {
		errs = append(errs, fmt.Errorf("processor: BodyBudget must be positive, got %d", c.BodyBudget))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("processor: MaxAttempts must be at least 1, got %d", c.MaxAttempts))
	}
	if c.BackoffBase <= 0 || c.BackoffCap < c.BackoffBase {
		errs = append(errs, fmt.Errorf("processor: want 0 < BackoffBase <= BackoffCap, got %s and %s", c.BackoffBase, c.BackoffCap))
	}
	if c.HandlerTimeout <= 0 || c.SafetyMargin <= c.HandlerTimeout || c.Lease <= c.SafetyMargin {
		errs = append(errs, fmt.Errorf("processor: want 0 < HandlerTimeout < SafetyMargin < Lease, got %s, %s and %s", c.HandlerTimeout, c.SafetyMargin, c.Lease))
	}
	if _, err := ParseUnhandledPolicy(string(c.Unhandled)); err != nil {
		errs = append(errs, fmt.Errorf("processor: Unhandled: %w", err))
	}
	return errors.Join(errs...)
}

// SessionParams returns the session settings a processor's connections
// should have (pgx RuntimeParams), so that the server itself ends what a
// frozen or killed processor left behind, without waiting for TCP to notice:
//
//   - statement_timeout: no statement of the processor, a handler's
//     included, may outlive the handler's own time limit;
//   - idle_in_transaction_session_timeout: a transaction left open by a
//     processor that stopped talking (a Lambda frozen after its timeout)
//     is rolled back, its row locks released, and vacuum no longer held
//     back by it.
//
// Both are HandlerTimeout plus a few seconds, so that in the normal case
// the processor's own deadline fires first, with a clear cause.
func SessionParams(handlerTimeout time.Duration) map[string]string {
	if handlerTimeout <= 0 {
		handlerTimeout = DefaultHandlerTimeout
	}
	ms := strconv.FormatInt((handlerTimeout + 5*time.Second).Milliseconds(), 10)
	return map[string]string{
		"statement_timeout":                   ms,
		"idle_in_transaction_session_timeout": ms,
	}
}

// Processor drains webhook_events. It is safe to run any number of them
// at once, in one process or many, and to call Drain concurrently.
type Processor struct {
	cfg     Config
	pool    *pgxpool.Pool
	store   *storage.Store
	reg     *Registry
	log     *slog.Logger
	bodies  BodyReader
	wake    Armer
	clock   Clock
	backoff Backoff
	name    string
	seq     atomic.Uint64

	// workers are the names a concurrent Drain takes, one each: a name
	// owns one row of webhook_claims, so two drains must not share one.
	mu      sync.Mutex
	workers []string
	nworker int
	// lastSweep is when the processor last deleted idle claims, and
	// lateSince when it last found an expired claim whose events were
	// still locked.
	lastSweep, lateSince time.Time
}

// New validates cfg, applies its defaults and returns a Processor running
// on deps.
func New(cfg Config, deps Deps) (*Processor, error) {
	cfg.defaults()
	errs := []error{cfg.validate()}
	if deps.Pool == nil {
		errs = append(errs, errors.New("processor: no pool (Deps.Pool)"))
	}
	if deps.Registry == nil {
		deps.Registry = NewRegistry()
	}
	// A route registered twice (or not at all, for an empty match) is the
	// handlers' mistake: refuse to start rather than guess which one runs.
	errs = append(errs, deps.Registry.Err())
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Clock == nil {
		deps.Clock = systemClock{}
	}
	cfg.Metrics.Now = deps.Clock.Now
	logShadows(deps.Logger, deps.Registry, cfg.SourceKinds)
	// The processor's name, in its claims (webhook_claims) and its
	// attempts' history, for operators: host:pid, with a random suffix
	// that keeps every processor distinct even when Lambda sandboxes
	// share host names and pids.
	host, _ := os.Hostname()
	name := host + ":" + strconv.Itoa(os.Getpid())
	suffix := make([]byte, 6)
	rand.Read(suffix) // never fails; see crypto/rand.Read
	return &Processor{
		cfg:     cfg,
		pool:    deps.Pool,
		store:   storage.New(deps.Pool),
		reg:     deps.Registry,
		log:     deps.Logger,
		bodies:  deps.Bodies,
		wake:    deps.Wake,
		clock:   deps.Clock,
		backoff: Backoff{Base: cfg.BackoffBase, Cap: cfg.BackoffCap, Rand: deps.Rand},
		name:    name + "/" + hex.EncodeToString(suffix),
	}, nil
}

// logShadows says, one line each, which routes by source name take the
// events of a kind route, so that an override is never silent. It needs
// the sources' kinds: the deployed processor, given no sources document,
// has none and says nothing (webhookctl handlers shows them).
func logShadows(log *slog.Logger, reg *Registry, sourceKinds map[string]string) {
	for _, s := range reg.Shadows(sourceKinds) {
		log.Warn("processor: a route by source name shadows a route by kind",
			"source", s.Source, "route", s.By.String(), "route_site", s.By.Site,
			"shadows", s.Kind.String(), "shadows_site", s.Kind.Site)
	}
}

// worker takes a name for one drain; done gives it back.
func (p *Processor) worker() (name string, done func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.workers); n > 0 {
		name = p.workers[n-1]
		p.workers = p.workers[:n-1]
	} else {
		p.nworker++
		name = p.name + "/" + strconv.Itoa(p.nworker)
	}
	return name, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.workers = append(p.workers, name)
	}
}

// Stop reasons of a Drain.
const (
	// StopDrained: a claim found no due event.
	StopDrained = "drained"
	// StopDeadline: less than SafetyMargin was left before ctx's deadline.
	StopDeadline = "deadline"
	// StopCancelled: ctx was cancelled.
	StopCancelled = "cancelled"
	// StopError: the processor's own bookkeeping failed (the database).
	StopError = "error"
)

// Stats counts what one Drain did.
type Stats struct {
	// Batches is the claims made (each a transaction), Claimed the events
	// in them (those held by a pause included), and Solo the claims of one
	// event that had to run alone.
	Batches int `json:"batches"`
	Claimed int `json:"claimed"`
	Solo    int `json:"solo"`
	// Handled events committed with their handler; Unhandled were marked
	// processed without one (UnhandledMark).
	Handled   int `json:"handled"`
	Unhandled int `json:"unhandled"`
	// Retried events failed an attempt and are due again later.
	Retried int `json:"retried"`
	// DeadLettered events moved to webhook_dead_letters.
	DeadLettered int `json:"dead_lettered"`
	// Released events were claimed but not started (no time or lease
	// left); they are due again at once.
	Released int `json:"released"`
	// LeaseLost events were in a claim another processor recovered after
	// its lease passed; this one's work on them was rolled back.
	LeaseLost int `json:"lease_lost"`
	// Fallbacks counts the claims whose transaction failed, and whose
	// events then ran one transaction each.
	Fallbacks int `json:"fallbacks"`
	// Interrupted counts the attempts this drain found interrupted (the
	// claims of processors that died) and recorded.
	Interrupted int `json:"interrupted"`
	// Held events were claimed while their source or handler was paused,
	// and held (no attempt) until it is resumed.
	Held int `json:"held"`
	// Stopped says why the drain ended (Stop* constants).
	Stopped string `json:"stopped"`
	// Latencies are the receipt-to-processed times (processed_at minus
	// created_at) of the events the drain processed, handled or
	// unhandled, in no particular order: the latency metrics' samples.
	Latencies []time.Duration `json:"-"`
	// Sources are the same figures by source name (the events' provider),
	// for the per-source metrics lines (metrics.go); nil until an attempt
	// is recorded.
	Sources map[string]*SourceStats `json:"-"`
}

// SourceStats is what a drain or run did with one source's events.
type SourceStats struct {
	Handled, Unhandled, Retried, DeadLettered int
	// Latencies are the receipt-to-processed times of its processed
	// events (Stats.Latencies' share).
	Latencies []time.Duration
}

// source returns name's figures, made on first use: a map lookup per
// attempt, the only per-event cost of the per-source metrics.
func (s *Stats) source(name string) *SourceStats {
	ss := s.Sources[name]
	if ss == nil {
		if s.Sources == nil {
			s.Sources = make(map[string]*SourceStats)
		}
		ss = &SourceStats{}
		s.Sources[name] = ss
	}
	return ss
}

func (ss *SourceStats) add(o *SourceStats) {
	ss.Handled += o.Handled
	ss.Unhandled += o.Unhandled
	ss.Retried += o.Retried
	ss.DeadLettered += o.DeadLettered
	ss.Latencies = append(ss.Latencies, o.Latencies...)
}

func (s *Stats) add(o Stats) {
	s.Batches += o.Batches
	s.Claimed += o.Claimed
	s.Solo += o.Solo
	s.Handled += o.Handled
	s.Unhandled += o.Unhandled
	s.Retried += o.Retried
	s.DeadLettered += o.DeadLettered
	s.Released += o.Released
	s.LeaseLost += o.LeaseLost
	s.Fallbacks += o.Fallbacks
	s.Interrupted += o.Interrupted
	s.Held += o.Held
	s.Latencies = append(s.Latencies, o.Latencies...)
	for name, ss := range o.Sources {
		s.source(name).add(ss)
	}
}

// Drain claims and runs events while there are due events and time: it
// stops when no claim finds an event, when less than SafetyMargin is left
// before ctx's deadline, or when ctx is cancelled. It returns an error only
// when the processor's own bookkeeping failed (the database is unreachable)
// or ctx was cancelled; handler failures are recorded on their events and
// counted in Stats. Whatever the way it ends, it leaves no claim open but
// one its lease will end. It logs the drain's metrics line (Config.Metrics),
// whatever the way it ends.
func (p *Processor) Drain(ctx context.Context) (Stats, error) {
	start := time.Now()
	st, err := p.drain(ctx)
	p.emitMetrics(ctx, st, err, time.Since(start))
	return st, err
}

// recoverEvery is how long a processor waits before it tries again to
// recover a claim past its lease whose events were still locked: their
// processor is alive and late, and ends within its session timeouts.
const recoverEvery = 15 * time.Second

// lookEvery bounds how long a drain working through a backlog claims batch
// after batch without asking whether anything else is due (EventGetDue):
// the look costs a statement that, under a backlog, reads the due indexes
// past the rows other processors hold or just processed, about a tenth of
// the database's time per event in make bench's drain. Solo events and
// claims past their lease wait at most this long for their turn.
const lookEvery = time.Second

func (p *Processor) drain(ctx context.Context) (Stats, error) {
	var st Stats
	if n := p.pool.Config().MaxConns; n < 2 {
		// A claim's transaction holds one connection while the claim is
		// recorded on another: with one, the drain would wait for itself.
		st.Stopped = StopError
		return st, fmt.Errorf("processor: the pool must allow at least 2 connections, it allows %d", n)
	}
	worker, done := p.worker()
	defer done()
	// full: the last batch claim came back full, so more are likely due;
	// looked: when the drain last looked for due events.
	var full bool
	var looked time.Time
	for {
		if err := ctx.Err(); err != nil {
			st.Stopped = StopCancelled
			return st, err
		}
		if !p.timeLeft(ctx, time.Time{}) {
			st.Stopped = StopDeadline
			return st, nil
		}
		// Under a backlog (the last batch claim came back full, and the
		// last look is less than lookEvery old) the next batch is claimed
		// without looking: an empty claim ends the run of batches, and
		// solo events and claims past their lease wait at most lookEvery.
		due := storage.Due{Batch: true}
		if now := p.clock.Now(); !full || now.Sub(looked) >= lookEvery || now.Before(looked) {
			// One statement says whether there is anything to claim or to
			// recover: an idle poll costs that alone, no transaction.
			looked = now
			var err error
			if due, err = p.store.EventGetDue(ctx, now); err != nil {
				return p.stopped(ctx, st, p.bookkeepingFailed(err, p.log))
			}
			if due.Expired && p.recoveryDue() {
				if err := p.recoverClaims(ctx, &st); err != nil {
					return p.stopped(ctx, st, err)
				}
				// Recovered events are due now, to run alone.
				if due, err = p.store.EventGetDue(ctx, p.clock.Now()); err != nil {
					return p.stopped(ctx, st, p.bookkeepingFailed(err, p.log))
				}
			}
			if !due.Solo && !due.Batch {
				p.sweepClaims(ctx, p.clock.Now()) // at most hourly: housekeeping while idle
				st.Stopped = StopDrained
				return st, nil
			}
		}
		// An event that must run alone (it failed or was interrupted
		// before), then a batch: each claim is a transaction.
		for _, solo := range []bool{true, false} {
			if (solo && !due.Solo) || (!solo && !due.Batch) {
				continue
			}
			n, err := p.runClaim(ctx, worker, solo, &st)
			if err != nil {
				return p.stopped(ctx, st, err)
			}
			full = !solo && n >= p.cfg.BatchSize
			if st.Stopped != "" {
				return st, ctx.Err()
			}
		}
	}
}

// recoveryDue reports whether the processor may recover expired claims
// now: always, unless its last try found a claim whose events are still
// locked (its processor is late, not dead), in which case it waits
// recoverEvery before trying again rather than wait for those locks at
// every poll.
func (p *Processor) recoveryDue() bool {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lateSince.IsZero() || now.Sub(p.lateSince) >= recoverEvery || now.Before(p.lateSince)
}

// recoveryBlocked notes that a claim past its lease still holds its
// events (see recoveryDue); recoveryDone that recovery went through.
func (p *Processor) recoveryBlocked() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lateSince = p.clock.Now()
}

// stopped ends a drain on an error of the processor's own.
func (p *Processor) stopped(ctx context.Context, st Stats, err error) (Stats, error) {
	st.Stopped = StopError
	if ctx.Err() != nil {
		st.Stopped = StopCancelled
	}
	return st, err
}

// timeLeft reports whether an event may start now: SafetyMargin must fit
// before ctx's deadline (on the wall clock, as Lambda's deadline is) and, when
// leaseEnd is set, before the lease's end (the processor's clock, which set
// it).
func (p *Processor) timeLeft(ctx context.Context, leaseEnd time.Time) bool {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < p.cfg.SafetyMargin {
		return false
	}
	return leaseEnd.IsZero() || !p.clock.Now().Add(p.cfg.SafetyMargin).After(leaseEnd)
}

// bookkeepingContext gives the writes after a handler their own time,
// detached from a handler deadline or a cancellation that already fired:
// the outcome of an attempt must be recorded even if the attempt timed out.
// SafetyMargin - HandlerTimeout is exactly the time kept for it.
func (p *Processor) bookkeepingContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), p.cfg.SafetyMargin-p.cfg.HandlerTimeout)
}
