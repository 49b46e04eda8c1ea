package processor

import (
	"context"
	"fmt"
	"time"

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
// rounded up to the hour, so a busy day arms one archiver run an hour).
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
	if p.cfg.ArchiveAfter > 0 && st.Handled+st.Unhandled > 0 {
		at := now.Add(p.cfg.ArchiveAfter).Truncate(time.Hour).Add(time.Hour)
		if err := p.wake.Arm(ctx, wake.TargetArchiver, at); err != nil {
			return fmt.Errorf("processor: arm the archiver: %w", err)
		}
	}
	return nil
}
