package processor

import (
	"context"
	"fmt"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// Armer arranges for a function to be invoked later (wake.Waker).
type Armer = wake.Armer

// armTimeout bounds the arming at an invocation's end: one query and at
// most two small S3 PUTs.
const armTimeout = 10 * time.Second

// armNext arms what an invocation leaves to later, so that nothing needs to
// poll: the processor's next wake-up at the earliest retry or claim's lease
// end (storage's EventGetNextWake; at once when events are still due, as
// after a run stopped by its deadline), and, when the run processed events,
// the archiver's at the hour after they become archivable (ArchiveAfter
// rounded up to the hour, so a busy day arms one archiver run an hour),
// and the processor's just after the next source would become silent
// (silenceCheckAt).
func (p *Processor) armNext(ctx context.Context, st Stats) error {
	ctx, cancel := context.WithTimeout(ctx, armTimeout)
	defer cancel()
	next, err := p.store.EventGetNextWake(ctx)
	if err != nil {
		return fmt.Errorf("processor: arm the next wake-up: %w", err)
	}
	now := p.clock.Now()
	if next != nil {
		at := *next
		if at.Before(now) {
			at = now
		}
		if err := p.wake.Arm(ctx, wake.TargetProcessor, at); err != nil {
			return fmt.Errorf("processor: arm the next wake-up: %w", err)
		}
	}
	acts, err := p.store.SourceActivityList(ctx)
	if err != nil {
		return fmt.Errorf("processor: arm the silence check: %w", err)
	}
	if at, ok := silenceCheckAt(acts, now); ok {
		if err := p.wake.Arm(ctx, wake.TargetProcessor, at); err != nil {
			return fmt.Errorf("processor: arm the silence check: %w", err)
		}
	}
	if p.cfg.ArchiveAfter > 0 && st.Handled+st.Unhandled > 0 {
		at := now.Add(p.cfg.ArchiveAfter).Truncate(time.Hour).Add(time.Hour)
		if err := p.wake.Arm(ctx, wake.TargetArchiver, at); err != nil {
			return fmt.Errorf("processor: arm the archiver: %w", err)
		}
	}
	return nil
}

// silenceCheckAt is when a processor must run for the next source that
// would become silent to be reported: the earliest moment after now at
// which a source with silent_after passes it, rounded up to its step
// (silenceStep). A run is otherwise started only by deliveries, and a
// silent stack has none, so this is the one wake-up that silence itself
// needs. Rounded so that a busy day arms few such wake-ups (each Waker
// writes a marker once per distinct time), at the cost of reporting a
// silence up to a step after it began when nothing else runs a
// processor. Sources already silent are left out: they were reported by
// this run, and a check for them would wake the processor again and again
// for as long as they stay silent.
func silenceCheckAt(acts []inbox.SourceActivity, now time.Time) (time.Time, bool) {
	var next time.Time
	for _, a := range acts {
		at, ok := a.SilentAt()
		if !ok || !at.After(now) {
			continue
		}
		if step := silenceStep(a.SilentAfter); !at.Truncate(step).Equal(at) {
			at = at.Truncate(step).Add(step)
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if next.IsZero() {
		return next, false
	}
	// Silent only once past the moment: a run at it exactly would not
	// yet count the source.
	return next.Add(time.Second), true
}

// silenceStep is how finely a source's silence check is timed: a quarter
// of its silent_after in whole minutes, between a minute and an hour, so
// that a silence is reported at most a quarter late (an hour for a day's
// setting, 3 minutes for the shortest, 15 minutes), and a source that
// keeps delivering arms at most four checks per silent_after.
func silenceStep(silentAfter time.Duration) time.Duration {
	return min(max((silentAfter/4).Truncate(time.Minute), time.Minute), time.Hour)
}
