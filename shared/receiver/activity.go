package receiver

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// activityInterval is the least time between two records of the sources'
// activity by one receiver (webhook_source_activity): a source's last
// delivery is known to within it, for one small statement a minute per
// container that receives, whatever the rate. Silence is measured in
// quarter hours at least (source.MinSilentAfter), so a minute is no loss.
const activityInterval = time.Minute

// activity keeps the newest delivery of each source since the last
// record, and when the next record is due. A request that stores an event
// while it is due makes the record, before its answer: a Lambda container
// is frozen between invocations, so work left for later may never run.
type activity struct {
	mu       sync.Mutex
	received map[string]time.Time // bounded by the configured sources
	due      time.Time            // zero: at the next delivery
	busy     bool                 // a record is under way
}

// delivered notes source's delivery at now and reports whether the caller
// is to record (then it owns the map it is given until done).
func (a *activity) delivered(name string, now time.Time) (map[string]time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.received == nil {
		a.received = map[string]time.Time{}
	}
	if now.After(a.received[name]) {
		a.received[name] = now
	}
	if a.busy || now.Before(a.due) {
		return nil, false
	}
	a.busy = true
	taken := a.received
	a.received = map[string]time.Time{}
	return taken, true
}

// done ends a record made at now; when it failed, its deliveries go back
// to the next one. Either way the next is a minute on, so that a database
// that refuses the statement is not asked again by every request.
func (a *activity) done(taken map[string]time.Time, now time.Time, failed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.busy = false
	a.due = now.Add(activityInterval)
	if failed {
		for name, at := range taken {
			if at.After(a.received[name]) {
				a.received[name] = at
			}
		}
	}
}

// recordActivity notes the delivery of a stored event (new or duplicate)
// and, once a minute, records every source of the current set (its
// silent_after, and the newest deliveries since the last record); the
// sources it no longer has are marked so. The current set, not the
// request's: a re-read during the request may have added the source. A failure is logged and never changes the
// answer: the event is stored.
func (h *Handler) recordActivity(ctx context.Context, log *slog.Logger, name string) {
	now := h.deps.Clock.Now()
	taken, due := h.activity.delivered(name, now)
	if !due {
		return
	}
	set := h.sources.current.Load()
	names := set.Names()
	recs := make([]storage.SourceRecord, len(names))
	for i, n := range names {
		src, _ := set.Lookup(n)
		recs[i] = storage.SourceRecord{Source: n, SilentAfter: src.SilentAfter, ReceivedAt: taken[n]}
	}
	err := h.deps.Store.SourceActivityRecord(ctx, recs, now)
	h.activity.done(taken, now, err != nil)
	if err != nil {
		log.Warn("webhook stored; recording the sources' activity failed", "cause", inbox.CauseDatabaseUnavailable, "err", err)
	}
}
