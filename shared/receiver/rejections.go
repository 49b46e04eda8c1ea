package receiver

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
)

// rejectionQueue is how many rejection records may wait for the
// background writer. Records are sampled (one per source and cause per
// rejectionSampleInterval) before they are queued, so a full queue means
// the database is slow or down: more records would only wait longer, which
// is why no setting changes it.
const rejectionQueue = 256

// rejectionTimeout bounds one record's write.
const rejectionTimeout = 2 * time.Second

// rejectionWriter writes rejection records in the background, so that a
// refusal never waits for the database: the request queues its record and
// answers. When the queue is full the record is dropped and counted; the
// count is logged (and is an EMF metric, RejectionRecordsDropped) with
// the next record written, and at Close.
type rejectionWriter struct {
	store   EventStore
	logger  *slog.Logger
	metrics metrics.Emitter

	queue   chan inbox.Rejection
	dropped atomic.Int64
	// mu guards closed against a send on a closed queue.
	mu     sync.RWMutex
	closed bool
	done   chan struct{}
}

func newRejectionWriter(store EventStore, logger *slog.Logger, m metrics.Emitter) *rejectionWriter {
	w := &rejectionWriter{store: store, logger: logger, metrics: m,
		queue: make(chan inbox.Rejection, rejectionQueue), done: make(chan struct{})}
	go w.run()
	return w
}

// add queues r without waiting; it reports false when r was dropped.
func (w *rejectionWriter) add(r inbox.Rejection) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if !w.closed {
		select {
		case w.queue <- r:
			return true
		default:
		}
	}
	w.dropped.Add(1)
	return false
}

func (w *rejectionWriter) run() {
	defer close(w.done)
	for r := range w.queue {
		ctx, cancel := context.WithTimeout(context.Background(), rejectionTimeout)
		// 0 is the table's one capacity (storage.DefaultRejectionsCapacity):
		// a slot is the sequence modulo the capacity, so every writer, a
		// receiver of the last deploy's included, must wrap at the same
		// one, and no setting changes it.
		err := w.store.RejectionInsert(ctx, r, 0)
		cancel()
		if err != nil {
			w.logger.Warn("recording a rejection failed", "source", r.Source, "cause", r.Cause, "err", err)
		}
		w.reportDropped()
	}
	w.reportDropped()
}

// reportDropped logs the records dropped since the last report, if any.
func (w *rejectionWriter) reportDropped() {
	if n := w.dropped.Swap(0); n > 0 {
		w.logger.Warn("rejection records dropped: the queue was full", append([]any{"cause", inbox.CauseDatabaseUnavailable, "dropped", n},
			w.metrics.Attrs(nil, metrics.C("RejectionRecordsDropped", float64(n)))...)...)
	}
}

// close stops taking records and writes those queued until ctx ends; what
// is left then is dropped (and counted in the log line).
func (w *rejectionWriter) close(ctx context.Context) error {
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

// Close writes the quarantined deliveries and the rejection records still queued, waiting at most until
// ctx ends, and stops the background writer: later refusals are answered
// as before but not recorded. The Lambda main calls it on SIGTERM (the
// environment's shutdown), before closing the pool; tests, at cleanup.
func (h *Handler) Close(ctx context.Context) error {
	var qerr error
	if h.quarantined != nil {
		qerr = h.quarantined.close(ctx)
	}
	return errors.Join(qerr, h.rejections.close(ctx))
}
