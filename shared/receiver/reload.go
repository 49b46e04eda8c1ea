package receiver

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// DefaultSourcesRefresh is how often the sources document is read again
// unless SOURCES_REFRESH_INTERVAL says otherwise: a source or a secret
// changed where the document lives reaches every running receiver within
// a minute, for one read a minute per container that serves.
const DefaultSourcesRefresh = time.Minute

const (
	// sourcesReadTimeout bounds a re-read, and so the wait of the one
	// request that makes it; the requests served meanwhile go on with the
	// sources they have. A read of a file, an S3 object or a secret in the
	// function's region takes tens of milliseconds.
	sourcesReadTimeout = time.Second
	// refusalBurst unauthenticated refusals of one source name within
	// refusalWindow make the receiver read the document at once: a sender
	// that signs with a secret added since the last read (a roll), or
	// posts to a source just added, is accepted within its next
	// deliveries, not an interval later.
	refusalBurst  = 3
	refusalWindow = 30 * time.Second
	// burstRereadGap is the least time from the last re-read to one a
	// burst asks for: a flood of forged requests costs a container at
	// most one read per gap.
	burstRereadGap = 10 * time.Second
)

// Why a re-read was made, for its log lines.
const (
	triggerInterval = "interval"
	triggerRefusals = "refusals"
)

// sourcesReloader holds the sources a Handler serves and replaces them
// when the document, read again through the path it was first read
// through (Deps.ReadSources), has changed and parses. A request takes the
// set once, so it finishes on the set it started with, whatever a re-read
// swaps in meanwhile.
//
// Nothing runs in the background: a Lambda container is frozen between
// invocations, so a re-read is made by the request that finds it due (the
// interval passed, or a burst of refusals), outside the lock, bounded by
// sourcesReadTimeout; concurrent requests do not wait for it. A document
// that cannot be read or does not parse leaves the set as it is.
type sourcesReloader struct {
	current  atomic.Pointer[source.Set]
	read     func(context.Context) ([]byte, error) // nil: the sources never change
	interval time.Duration                         // 0: no re-read on an interval
	clock    Clock
	log      *slog.Logger
	metrics  metrics.Emitter

	mu       sync.Mutex
	reading  bool      // a re-read is under way
	due      time.Time // the interval's next re-read
	lastRead time.Time // the last re-read's start; zero before the first
	// doc is the SHA-256 of the document of the current set, once a
	// re-read has made it (known): an unchanged document is not parsed
	// again.
	doc   [sha256.Size]byte
	known bool
	// bursts counts the recent unauthenticated refusals of each
	// configured source, and of every other name together: bounded by the
	// sources, and emptied with each new set.
	bursts map[string]burst
}

// burst is a key's refusals since start.
type burst struct {
	start time.Time
	n     int
}

func newSourcesReloader(set *source.Set, read func(context.Context) ([]byte, error), interval time.Duration, clock Clock, log *slog.Logger, m metrics.Emitter) *sourcesReloader {
	r := &sourcesReloader{read: read, interval: interval, clock: clock, log: log, metrics: m, bursts: map[string]burst{}}
	r.current.Store(set)
	r.due = clock.Now().Add(interval)
	return r
}

// sources returns the set a request is served with: the current one, read
// again first when the interval has passed since the last re-read.
func (r *sourcesReloader) sources(ctx context.Context) *source.Set {
	if r.read != nil && r.interval > 0 {
		now := r.clock.Now()
		if r.claim(now, func() bool { return !now.Before(r.due) }) {
			r.reread(ctx, triggerInterval, "")
		}
	}
	return r.current.Load()
}

// refused counts an unauthenticated refusal under key (a configured
// source's name, or the one key of every other name) and, at the burst's
// refusalBurst-th within refusalWindow, reads the document at once unless
// the last re-read began less than burstRereadGap ago (the count then
// stands, so that the next refusal after the gap reads). It returns the
// new set when that read replaced the sources, for the request to be
// authenticated again; nil otherwise.
func (r *sourcesReloader) refused(ctx context.Context, key string) *source.Set {
	if r.read == nil {
		return nil
	}
	now := r.clock.Now()
	before := r.current.Load()
	due := func() bool {
		b := r.bursts[key]
		if now.Sub(b.start) >= refusalWindow {
			b = burst{start: now}
		}
		b.n++
		r.bursts[key] = b
		if b.n < refusalBurst || (!r.lastRead.IsZero() && now.Sub(r.lastRead) < burstRereadGap) {
			return false
		}
		delete(r.bursts, key)
		return true
	}
	if !r.claim(now, due) {
		return nil
	}
	r.reread(ctx, triggerRefusals, key)
	if after := r.current.Load(); after != before {
		return after
	}
	return nil
}

// claim reports whether the caller is to make a re-read now: none is under
// way and due (called under the lock) says one is due. The interval
// starts again from any re-read.
func (r *sourcesReloader) claim(now time.Time, due func() bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reading || !due() {
		return false
	}
	r.reading, r.lastRead, r.due = true, now, now.Add(r.interval)
	return true
}

// reread reads the document and swaps in its set when it changed and
// parses; otherwise the set stays, with a line (and a metric) saying why.
// The read outlives a request that ends meanwhile, within its own bound.
func (r *sourcesReloader) reread(ctx context.Context, trigger, forSource string) {
	defer func() {
		r.mu.Lock()
		r.reading = false
		r.mu.Unlock()
	}()
	attrs := []any{"trigger", trigger}
	if forSource != "" {
		attrs = append(attrs, "source", forSource)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sourcesReadTimeout)
	defer cancel()
	doc, err := r.read(ctx)
	if err != nil {
		// The error names the file, the object or the secret, never what
		// it holds (secrets.SourcesReader).
		r.log.Warn("sources: the document could not be read again; the sources in use stay",
			append(append(attrs, "cause", inbox.CauseSourcesReloadFailed, "err", err), r.metrics.Attrs(nil, metrics.C("SourcesReloadFailed", 1))...)...)
		return
	}
	sum := sha256.Sum256(doc)
	r.mu.Lock()
	unchanged, first := r.known && sum == r.doc, !r.known
	r.mu.Unlock()
	if unchanged {
		return
	}
	set, err := source.Parse(doc)
	if err != nil {
		// Said at every re-read while the document stays bad, so that its
		// alarm stays on until it is fixed. source.Parse's errors name the
		// source and the field, never a secret.
		r.log.Error("sources: the document read again is refused; the sources in use stay",
			append(append(attrs, "cause", inbox.CauseSourcesReloadRefused, "err", err), r.metrics.Attrs(nil, metrics.C("SourcesReloadRefused", 1))...)...)
		return
	}
	old := r.current.Swap(set)
	r.mu.Lock()
	r.doc, r.known = sum, true
	clear(r.bursts)
	r.mu.Unlock()

	added, removed := namesDiff(old, set)
	// The first re-read of a container finds the document it started
	// with, unless it changed in between; which of its sources' secrets
	// changed cannot be told without keeping them, so only names are
	// compared, and a first re-read that changed none says so quietly.
	level := slog.LevelInfo
	if first && len(added) == 0 && len(removed) == 0 {
		level = slog.LevelDebug
	}
	r.log.Log(ctx, level, "sources: the document changed; new requests are served with it",
		append(attrs, "sources", set.Names(), "added", added, "removed", removed)...)
	for _, name := range set.Names() {
		src, _ := set.Lookup(name)
		prev, had := old.Lookup(name)
		if src.Warning != "" && (!had || prev.Warning != src.Warning) {
			r.log.Warn("source accepts a risk", "source", name, "warning", src.Warning)
		}
	}
}

// namesDiff returns the names of next that prev lacks, and the other way
// round, sorted.
func namesDiff(prev, next *source.Set) (added, removed []string) {
	was, is := prev.Names(), next.Names()
	for _, n := range is {
		if !slices.Contains(was, n) {
			added = append(added, n)
		}
	}
	for _, n := range was {
		if !slices.Contains(is, n) {
			removed = append(removed, n)
		}
	}
	return added, removed
}
