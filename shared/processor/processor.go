package processor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Defaults of Config. The retry window they give is in Backoff.RetryWindow.
const (
	DefaultBatchSize      = 25
	DefaultMaxAttempts    = 12
	DefaultBackoffBase    = 30 * time.Second
	DefaultBackoffCap     = 6 * time.Hour
	DefaultLease          = 2 * time.Minute
	DefaultHandlerTimeout = 30 * time.Second
	DefaultSafetyMargin   = 40 * time.Second
)

// MaxBatchSize bounds Config.BatchSize: a batch is claimed in one statement
// and its rows stay leased until handled, so it must stay small.
const MaxBatchSize = 1000

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

// Config configures a Processor. Zero durations and sizes take the defaults.
type Config struct {
	// Pool is the database. Give it SessionParams(HandlerTimeout) as
	// runtime parameters, so the server ends what a frozen or dead
	// processor left open.
	Pool *pgxpool.Pool
	// Registry routes events to handlers.
	Registry *Registry
	// SourceKinds maps source names to kinds, for routes by Kind of events
	// stored before the receiver recorded each event's source_kind; newer
	// events carry their kind and need no map. Optional.
	SourceKinds map[string]string
	// Logger receives one line per failure, dead letter and lost lease;
	// nil discards.
	Logger *slog.Logger

	// BatchSize is how many events one claim takes (1..MaxBatchSize).
	BatchSize int
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

	// Now is the clock; nil means time.Now. Every time the processor
	// writes or compares comes from it.
	Now func() time.Time
	// Rand is the jitter source, in [0, 1); nil means math/rand/v2.
	Rand func() float64
	// Name identifies the processor in claim tokens (locked_by), for
	// operators; "" means host:pid. A random suffix makes every processor
	// distinct even when Lambda sandboxes share host names and pids.
	Name string
	// Metrics, when set, makes each Drain and each Run end with one log
	// line that is a CloudWatch EMF record of its counts, duration and the
	// backlog it leaves (see metrics.go); nil logs no such line (the dev
	// stack).
	Metrics *metrics.Emitter

	// Database is how the processor's pool connects, SessionParams
	// included (ConfigFromEnv sets it); the caller opens it as Pool. New
	// ignores it.
	Database storage.PoolConfig
	// PollInterval is how long Run waits, after a drain that found nothing
	// due, before it claims again: the latency real time buys, and the
	// load it costs (a claim per interval per running processor). Zero
	// means DefaultPollInterval.
	PollInterval time.Duration
	// RunFor is how long each scheduled invocation keeps polling
	// (Invocation runs Run until start + RunFor); 0 turns real time off,
	// and each invocation drains once. ConfigFromEnv defaults it to
	// DefaultRunFor.
	RunFor time.Duration
	// After, when set, stands in for time.After in Run's waits between
	// drains, so that a test decides when a wait ends; nil means
	// time.After.
	After func(time.Duration) <-chan time.Time
}

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
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registry == nil {
		c.Registry = NewRegistry()
	}
}

// validate reports every invalid setting at once, after defaults.
func (c Config) validate() error {
	var errs []error
	if c.Pool == nil {
		errs = append(errs, errors.New("processor: Pool is required"))
	}
	if c.BatchSize < 1 || c.BatchSize > MaxBatchSize {
		errs = append(errs, fmt.Errorf("processor: BatchSize must be 1 to %d, got %d", MaxBatchSize, c.BatchSize))
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
// at once, in one process or many.
type Processor struct {
	cfg     Config
	store   *storage.Store
	log     *slog.Logger
	backoff Backoff
	name    string
	seq     atomic.Uint64
}

// New validates cfg, applies its defaults and returns a Processor.
func New(cfg Config) (*Processor, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	name := cfg.Name
	if name == "" {
		host, _ := os.Hostname()
		name = host + ":" + strconv.Itoa(os.Getpid())
	}
	suffix := make([]byte, 6)
	rand.Read(suffix) // never fails; see crypto/rand.Read
	return &Processor{
		cfg:     cfg,
		store:   storage.New(cfg.Pool),
		log:     cfg.Logger,
		backoff: Backoff{Base: cfg.BackoffBase, Cap: cfg.BackoffCap, Rand: cfg.Rand},
		name:    name + "/" + hex.EncodeToString(suffix),
	}, nil
}

// Config returns the processor's configuration, defaults applied.
func (p *Processor) Config() Config { return p.cfg }

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
	// Batches claimed, and events in them.
	Batches int `json:"batches"`
	Claimed int `json:"claimed"`
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
	// LeaseLost events had been claimed again by another processor after
	// this one's lease passed; this one left them alone.
	LeaseLost int `json:"lease_lost"`
	// Stopped says why the drain ended (Stop* constants).
	Stopped string `json:"stopped"`
	// Latencies are the receipt-to-processed times (processed_at minus
	// created_at) of the events the drain processed, handled or
	// unhandled, in no particular order: the latency metrics' samples.
	Latencies []time.Duration `json:"-"`
}

func (s *Stats) add(o Stats) {
	s.Batches += o.Batches
	s.Claimed += o.Claimed
	s.Handled += o.Handled
	s.Unhandled += o.Unhandled
	s.Retried += o.Retried
	s.DeadLettered += o.DeadLettered
	s.Released += o.Released
	s.LeaseLost += o.LeaseLost
	s.Latencies = append(s.Latencies, o.Latencies...)
}

// Drain claims and handles batches while there are due events and time:
// it stops when a claim finds nothing, when less than SafetyMargin is left
// before ctx's deadline, or when ctx is cancelled. It returns an error only
// when the processor's own bookkeeping failed (the database is unreachable)
// or ctx was cancelled; handler failures are recorded on their events and
// counted in Stats. Whatever the way it ends, no event stays claimed longer
// than its lease. With Config.Metrics set it logs the drain's metrics
// line, whatever the way it ends.
func (p *Processor) Drain(ctx context.Context) (Stats, error) {
	if p.cfg.Metrics == nil {
		return p.drain(ctx)
	}
	start := time.Now()
	st, err := p.drain(ctx)
	p.emitMetrics(ctx, st, err, time.Since(start))
	return st, err
}

func (p *Processor) drain(ctx context.Context) (Stats, error) {
	var st Stats
	for {
		if err := ctx.Err(); err != nil {
			st.Stopped = StopCancelled
			return st, err
		}
		if !p.timeLeft(ctx, time.Time{}) {
			st.Stopped = StopDeadline
			return st, nil
		}
		now := p.cfg.Now()
		claim := storage.EventClaimParams{
			Now: now, Limit: p.cfg.BatchSize, LockedUntil: now.Add(p.cfg.Lease),
			Token: p.name + "#" + strconv.FormatUint(p.seq.Add(1), 10),
		}
		batch, err := p.store.EventClaim(ctx, claim)
		if err != nil {
			st.Stopped = StopError
			p.log.Error("processor: claim failed", "cause", inbox.CauseDatabaseUnavailable, "err", err)
			return st, err
		}
		if len(batch) == 0 {
			st.Stopped = StopDrained
			return st, nil
		}
		st.Batches++
		st.Claimed += len(batch)
		bs, err := p.runBatch(ctx, claim.Token, claim.LockedUntil, batch)
		st.add(bs)
		if err != nil {
			st.Stopped = StopError
			if ctx.Err() != nil {
				st.Stopped = StopCancelled
			}
			return st, err
		}
		switch bs.Stopped {
		case StopCancelled:
			st.Stopped = StopCancelled
			return st, ctx.Err()
		case StopDeadline:
			st.Stopped = StopDeadline
			return st, nil
		}
	}
}

// timeLeft reports whether an event may start now: SafetyMargin must fit
// before ctx's deadline (real time, since Lambda's deadline is) and, when
// leaseEnd is set, before the lease's end (the processor's clock, which set
// it).
func (p *Processor) timeLeft(ctx context.Context, leaseEnd time.Time) bool {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < p.cfg.SafetyMargin {
		return false
	}
	return leaseEnd.IsZero() || !p.cfg.Now().Add(p.cfg.SafetyMargin).After(leaseEnd)
}

// runBatch handles a claimed batch, one event at a time, each in its own
// transaction. It releases the events it does not start, and sets
// Stats.Stopped when the drain must end (deadline, cancellation); running
// out of lease only ends the batch.
func (p *Processor) runBatch(ctx context.Context, token string, leaseEnd time.Time, batch []storage.ClaimedEvent) (Stats, error) {
	var st Stats
	for i := range batch {
		switch {
		case ctx.Err() != nil:
			st.Stopped = StopCancelled
		case !p.timeLeft(ctx, time.Time{}):
			st.Stopped = StopDeadline
		case !p.timeLeft(ctx, leaseEnd):
			// The drain goes on with a fresh claim and a fresh lease.
		default:
			if err := p.process(ctx, token, &batch[i], &st); err != nil {
				// The database failed under the processor's own
				// bookkeeping: give the rest back if it still answers.
				st.Released += p.release(ctx, token, batch[i+1:])
				return st, err
			}
			continue
		}
		st.Released += p.release(ctx, token, batch[i:])
		return st, nil
	}
	return st, nil
}

// process runs one claimed event. It returns an error only when the
// processor's bookkeeping failed; a handler's failure is recorded.
func (p *Processor) process(ctx context.Context, token string, row *storage.ClaimedEvent, st *Stats) error {
	ev := row.Event
	if ev.SourceKind == "" {
		// Stored before the receiver recorded kinds: the configured map,
		// when there is one, still routes it.
		ev.SourceKind = p.cfg.SourceKinds[ev.Source]
	}
	log := p.log.With("source", ev.Source, "event_id", ev.EventID, "event_type", ev.Type)

	if row.Interrupted {
		// The claim recorded it; the log is what tells an operator that a
		// processor died mid-event (a crash, an OOM, a Lambda timeout).
		log.Warn("processor: the previous attempt never finished; its processor stopped before its lease ended",
			"cause", inbox.CauseLeaseExpired, "attempt", row.Attempts)
	}
	if row.Attempts >= p.cfg.MaxAttempts {
		// Every attempt is spent. Either the last one never came back (a
		// poison event that kills its processor ends here, without running
		// again: the claim already recorded that attempt), or MaxAttempts
		// was lowered since.
		if row.Interrupted {
			return p.deadLetter(ctx, token, ev, "", errors.New(storage.LeaseExpiredError), log.With("attempt", row.Attempts), st)
		}
		return p.deadLetter(ctx, token, ev, inbox.CauseMaxAttempts,
			fmt.Errorf("%d attempts already made; the maximum is now %d", row.Attempts, p.cfg.MaxAttempts),
			log.With("attempt", row.Attempts), st)
	}

	h, found := p.cfg.Registry.Lookup(ev.Source, ev.SourceKind, ev.Type)
	if !found {
		switch p.cfg.Unhandled {
		case UnhandledDeadLetter:
			return p.deadLetter(ctx, token, ev, inbox.CauseNoHandler, errNoHandler, log, st)
		case UnhandledRetry:
			h = HandlerFunc(func(context.Context, pgx.Tx, *Event) error { return errNoHandler })
		default:
			// Nothing runs, so nothing needs an attempt or a transaction.
			ok, err := p.store.EventMarkProcessed(ctx, storage.EventMarkProcessedParams{
				ID: ev.ID, Token: token, Now: p.cfg.Now(), Outcome: inbox.OutcomeUnhandled,
			})
			switch {
			case err != nil:
				return p.bookkeepingFailed(err, log)
			case !ok:
				p.leaseLost(log, st)
			default:
				st.Unhandled++
				st.Latencies = append(st.Latencies, p.cfg.Now().Sub(ev.CreatedAt))
				log.Debug("processor: no handler; marked processed", "cause", inbox.CauseNoHandler)
			}
			return nil
		}
	}

	attempt, ok, err := p.store.EventStartAttempt(ctx, ev.ID, token, p.cfg.Now())
	if err != nil {
		return p.bookkeepingFailed(err, log)
	}
	if !ok {
		p.leaseLost(log, st)
		return nil
	}
	ev.Attempts = attempt
	log = log.With("attempt", attempt)

	hctx, cancel := context.WithTimeout(ctx, p.cfg.HandlerTimeout)
	defer cancel()
	lost, herr := p.apply(hctx, token, h, ev)
	switch {
	case lost:
		p.leaseLost(log, st)
		return nil
	case herr == nil:
		st.Handled++
		st.Latencies = append(st.Latencies, p.cfg.Now().Sub(ev.CreatedAt))
		return nil
	}

	cause := causeOf(herr, hctx)
	var pe *panicError
	if errors.As(herr, &pe) {
		log.Error("processor: handler panicked", "cause", cause, "err", herr, "stack", string(pe.stack))
	}
	if cause == inbox.CausePermanent || attempt >= p.cfg.MaxAttempts {
		return p.deadLetter(ctx, token, ev, cause, herr, log, st)
	}
	now := p.cfg.Now()
	delay := p.backoff.Delay(attempt)
	bctx, bcancel := p.bookkeepingContext(ctx)
	defer bcancel()
	ok, err = p.store.EventRecordFailure(bctx, storage.EventRecordFailureParams{
		ID: ev.ID, Token: token, Now: now, Cause: cause, Error: errorText(herr), NextAttemptAt: now.Add(delay),
	})
	switch {
	case err != nil:
		return p.bookkeepingFailed(err, log)
	case !ok:
		p.leaseLost(log, st)
	default:
		st.Retried++
		log.Warn("processor: attempt failed; will retry", "cause", cause, "err", herr,
			"retry_in", delay.String(), "next_attempt_at", now.Add(delay))
	}
	return nil
}

// apply runs h in the event's own transaction: mark processed first (it
// locks the row and checks the claim), then the handler, then commit, so
// the handler's changes and processed_at are one atomic unit. lost reports
// that the event was no longer this claim's to process.
func (p *Processor) apply(ctx context.Context, token string, h Handler, ev *Event) (lost bool, err error) {
	tx, err := p.store.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil || lost {
			p.rollback(ctx, tx)
		}
	}()
	ok, err := tx.EventMarkProcessed(ctx, storage.EventMarkProcessedParams{
		ID: ev.ID, Token: token, Now: p.cfg.Now(), Outcome: inbox.OutcomeHandled,
	})
	if err != nil {
		return false, err
	}
	if !ok {
		return true, nil
	}
	if err := callHandler(ctx, h, tx.Pgx(), ev); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		// A commit error can hide a commit that happened (the connection
		// broke after the server committed). Recording the failure is safe
		// either way: it only touches a row that is still unprocessed.
		return false, err
	}
	return false, nil
}

// callHandler runs h, turning a panic into an error of this event alone.
func callHandler(ctx context.Context, h Handler, tx pgx.Tx, ev *Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return h.Handle(ctx, handlerTx{tx}, ev)
}

// rollback ends a failed transaction even when ctx is done: a rollback that
// cannot be sent makes pgx close the connection, which ends it too.
func (p *Processor) rollback(ctx context.Context, tx *storage.Tx) {
	bctx, cancel := p.bookkeepingContext(ctx)
	defer cancel()
	_ = tx.Rollback(bctx)
}

// bookkeepingContext gives the writes after a handler their own time,
// detached from a handler deadline or a cancellation that already fired:
// the failure of an attempt must be recorded even if the attempt timed out.
// SafetyMargin - HandlerTimeout is exactly the time kept for it.
func (p *Processor) bookkeepingContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), p.cfg.SafetyMargin-p.cfg.HandlerTimeout)
}

// deadLetter moves the event to the dead letters. cause and herr are the
// last attempt's entry in the history; an empty cause means the claim
// already recorded it (an attempt that never finished).
func (p *Processor) deadLetter(ctx context.Context, token string, ev *Event, cause inbox.Cause, herr error, log *slog.Logger, st *Stats) error {
	params := storage.EventDeadLetterParams{ID: ev.ID, Token: token, Now: p.cfg.Now(), Cause: cause}
	if cause != "" {
		params.Error = errorText(herr)
	} else {
		cause = inbox.CauseLeaseExpired
	}
	bctx, cancel := p.bookkeepingContext(ctx)
	defer cancel()
	id, ok, err := p.store.EventDeadLetter(bctx, params)
	switch {
	case err != nil:
		return p.bookkeepingFailed(err, log)
	case !ok:
		p.leaseLost(log, st)
	default:
		st.DeadLettered++
		log.Error("processor: event moved to the dead letters", "cause", cause, "err", herr, "dead_letter_id", id)
	}
	return nil
}

func (p *Processor) leaseLost(log *slog.Logger, st *Stats) {
	st.LeaseLost++
	log.Warn("processor: claim taken over after its lease passed; leaving the event to its new claimer", "cause", inbox.CauseLeaseLost)
}

func (p *Processor) bookkeepingFailed(err error, log *slog.Logger) error {
	log.Error("processor: bookkeeping failed; stopping the drain", "cause", inbox.CauseDatabaseUnavailable, "err", err)
	return err
}

// release gives back events this claim will not start, due at once. It is
// best effort: if it fails, their lease passing frees them all the same.
func (p *Processor) release(ctx context.Context, token string, rest []storage.ClaimedEvent) int {
	if len(rest) == 0 {
		return 0
	}
	ids := make([]int64, len(rest))
	for i := range rest {
		ids[i] = rest[i].ID
	}
	bctx, cancel := p.bookkeepingContext(ctx)
	defer cancel()
	n, err := p.store.EventRelease(bctx, ids, token, p.cfg.Now())
	if err != nil {
		p.log.Warn("processor: could not release unstarted events; they are claimable when the lease passes",
			"cause", inbox.CauseDatabaseUnavailable, "err", err, "events", len(ids))
	}
	return n
}

// Requeue sends the open dead letters matching f back to the drain, due
// at once with attempts and history reset, and returns how many. It is
// storage.Store.DeadLetterRequeue on the processor's clock.
func (p *Processor) Requeue(ctx context.Context, f storage.DeadLetterFilter) (int, error) {
	n, err := p.store.DeadLetterRequeue(ctx, f, p.cfg.Now())
	if err == nil && n > 0 {
		p.log.Info("processor: dead letters requeued", "events", n)
	}
	return n, err
}
