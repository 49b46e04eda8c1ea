package receiver

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// The quarantine: a POST to a configured source, at its right endpoint and
// within the body limit, refused only for its signature
// (signature_mismatch) or its signed time (timestamp_out_of_tolerance), is
// kept in webhook_quarantine, so that a secret rolled in the wrong order
// does not lose a sender's events for good (GitHub never redelivers by
// itself): an operator re-ingests them once the secret is fixed
// (webhookctl quarantine). It is never processed as it is. The answer to
// the sender does not change (the same 401 unauthenticated), and keeping
// it never waits for the database: like the rejection records, a
// background writer does it.
//
// Forged requests could fill it; three bounds hold: a cap per source
// (Config.QuarantineCap, in the insert), this container's rate
// (quarantinePerSecond, quarantineBurst) and its queue (quarantineQueue):
// a delivery beyond any of them is not kept, and is logged and counted
// (cause quarantine_full, metric QuarantineNotKept).

// quarantineCauses are the refusals whose deliveries are kept.
var quarantineCauses = map[inbox.Cause]bool{inbox.CauseSignatureMismatch: true, inbox.CauseTimestampOutOfTolerance: true}

const (
	// quarantinePerSecond and quarantineBurst bound the deliveries one
	// container keeps: a sender's honest retries after a bad roll come at
	// a few a second at most, and a flood of forged ones then writes at
	// most quarantinePerSecond bodies a second per container.
	quarantinePerSecond = 10
	quarantineBurst     = 20
	// quarantineQueue is how many kept deliveries may wait for the
	// writer: each holds a body of up to MaxBodyBytes in memory.
	quarantineQueue = 8
	// quarantineTimeout bounds one delivery's write.
	quarantineTimeout = 3 * time.Second
	// Bounds of the kept headers: values per header, bytes per value, and
	// bytes in all. A signature, a timestamp or an id is far smaller.
	maxKeptValues      = 8
	maxKeptValueBytes  = 8 << 10
	maxKeptHeaderBytes = 32 << 10
)

// quarantineWriter keeps deliveries in the background, within the rate
// and the queue.
type quarantineWriter struct {
	store    EventStore
	capacity int
	logger   *slog.Logger
	metrics  metrics.Emitter

	queue chan inbox.Quarantined
	// mu guards closed and the rate's tokens.
	mu     sync.Mutex
	closed bool
	tokens float64
	last   time.Time
	done   chan struct{}
}

func newQuarantineWriter(store EventStore, capacity int, logger *slog.Logger, m metrics.Emitter) *quarantineWriter {
	w := &quarantineWriter{store: store, capacity: capacity, logger: logger, metrics: m,
		queue: make(chan inbox.Quarantined, quarantineQueue), tokens: quarantineBurst, done: make(chan struct{})}
	go w.run()
	return w
}

// add queues q without waiting, within the rate at now; it logs and counts
// a delivery it does not keep.
func (w *quarantineWriter) add(q inbox.Quarantined, now time.Time) {
	w.mu.Lock()
	if !w.last.IsZero() {
		if d := now.Sub(w.last); d > 0 {
			w.tokens = min(quarantineBurst, w.tokens+d.Seconds()*quarantinePerSecond)
		}
	}
	w.last = now
	why := ""
	switch {
	case w.closed:
		why = "the receiver is shutting down"
	case w.tokens < 1:
		why = "this receiver keeps no more this second"
	default:
		select {
		case w.queue <- q:
			w.tokens--
		default:
			why = "the quarantine's queue is full (the database is slow)"
		}
	}
	w.mu.Unlock()
	if why != "" {
		w.notKept(q, why)
	}
}

// notKept logs and counts a delivery that was not kept.
func (w *quarantineWriter) notKept(q inbox.Quarantined, why string) {
	w.logger.Warn("refused delivery not quarantined: "+why, append([]any{"source", q.Source, "cause", inbox.CauseQuarantineFull,
		"refused_for", q.Cause, "request_id", q.RequestID},
		w.metrics.Attrs([]string{"source"}, metrics.C("QuarantineNotKept", 1))...)...)
}

func (w *quarantineWriter) run() {
	defer close(w.done)
	for q := range w.queue {
		ctx, cancel := context.WithTimeout(context.Background(), quarantineTimeout)
		kept, err := w.store.QuarantineInsert(ctx, q, w.capacity)
		cancel()
		switch {
		case err != nil:
			w.logger.Warn("quarantining a refused delivery failed", append([]any{"source", q.Source, "cause", inbox.CauseQuarantineFailed,
				"refused_for", q.Cause, "request_id", q.RequestID, "err", err},
				w.metrics.Attrs([]string{"source"}, metrics.C("QuarantineFailed", 1))...)...)
		case !kept:
			w.notKept(q, "its source's quarantine holds as many as it may (WEBHOOK_QUARANTINE_CAP)")
		default:
			w.logger.Info("refused delivery quarantined", append([]any{"source", q.Source, "cause", q.Cause, "request_id", q.RequestID, "bytes", len(q.Body)},
				w.metrics.Attrs([]string{"source"}, metrics.C("Quarantined", 1))...)...)
		}
	}
}

// close stops taking deliveries and writes those queued until ctx ends.
func (w *quarantineWriter) close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// quarantine keeps a delivery to src refused with cause, when the cause is
// one that is kept and the quarantine is on. It never waits and never
// changes the answer.
func (h *Handler) quarantine(r *http.Request, src *source.Source, body []byte, cause inbox.Cause) {
	if h.quarantined == nil || src == nil || !quarantineCauses[cause] {
		return
	}
	now := h.deps.Clock.Now()
	h.quarantined.add(inbox.Quarantined{
		Source: src.Name, SourceKind: src.Kind, Cause: cause, RequestID: cleanText(h.deps.RequestID(r), 128),
		ReceivedAt: now, Header: keptHeaders(r.Header, src.KeptHeaders()), Body: body,
	}, now)
}

// keptHeaders is the part of hd a quarantined delivery keeps: the named
// headers only, within the bounds. A value that is not valid UTF-8 or
// holds a NUL (no signature, timestamp or id does) is dropped: the
// headers are stored as JSON.
func keptHeaders(hd http.Header, names []string) http.Header {
	out := http.Header{}
	total := 0
	for _, name := range names {
		for i, v := range hd.Values(name) {
			if i >= maxKeptValues || len(v) > maxKeptValueBytes || total+len(name)+len(v) > maxKeptHeaderBytes ||
				!utf8.ValidString(v) || strings.ContainsRune(v, 0) {
				continue
			}
			total += len(name) + len(v)
			out[name] = append(out[name], v)
		}
	}
	return out
}
