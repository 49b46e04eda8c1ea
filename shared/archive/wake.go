package archive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// Armer arranges for a function to be invoked later (wake.Waker).
type Armer = wake.Armer

// FailedRunRetry is how long after a failed run (S3 or the database out)
// the next one is armed, once Lambda's own retries of the invocation are
// spent: the archive can wait, and the alarms have already spoken.
const FailedRunRetry = 15 * time.Minute

// armTimeout bounds the arming at an invocation's end: one query and one
// small S3 PUT.
const armTimeout = 10 * time.Second

// Invocation is one invocation of the deployed archiver: RunOnce, then,
// with Deps.Wake, the next run armed for when there will be work (armNext).
// The processor arms a run for the hour after what it processed becomes
// archivable; this keeps the chain going for whatever one run left. An
// arming that failed is returned, so that Lambda retries the invocation.
func (a *Archiver) Invocation(ctx context.Context) (Result, error) {
	res, err := a.RunOnce(ctx)
	if a.deps.Wake == nil || errors.Is(ctx.Err(), context.Canceled) {
		return res, err
	}
	return res, errors.Join(err, a.armNext(context.WithoutCancel(ctx), res, err))
}

// armNext arms the archiver's next run: at once (the relay makes that the
// next minute) when this run stopped with work left, FailedRunRetry after a
// failed run, and otherwise at the hour after the oldest processed body
// still in Postgres becomes archivable; nothing when there is none.
func (a *Archiver) armNext(ctx context.Context, res Result, runErr error) error {
	ctx, cancel := context.WithTimeout(ctx, armTimeout)
	defer cancel()
	now := a.now()
	var at time.Time
	switch {
	case runErr != nil:
		at = now.Add(FailedRunRetry)
	case res.Truncated:
		at = now
	default:
		p, err := a.store.EventGetArchiveProgress(ctx, now.Add(-a.cfg.MinAge))
		if err != nil {
			return fmt.Errorf("archive: arm the next run: %w", err)
		}
		switch {
		case p.Due > 0:
			at = now
		case p.OldestProcessedAt != nil:
			// The hour after it comes of age, as the processor arms it:
			// under steady traffic a body comes of age every minute, and
			// an object a minute would cost a PUT (and a run) each.
			at = p.OldestProcessedAt.Add(a.cfg.MinAge).Truncate(time.Hour).Add(time.Hour)
			if r := a.cfg.BodyRetention; r > 0 && r < a.cfg.MinAge {
				// Its body passes retention before it comes of age.
				at = p.OldestProcessedAt.Add(r).Truncate(time.Hour).Add(time.Hour)
			}
		}
		// With no traffic left to archive, the retention pass still has
		// to run when the next stored object passes retention.
		next, err := a.nextExpiry(ctx)
		if err != nil {
			return fmt.Errorf("archive: arm the next run: %w", err)
		}
		if next != nil && (at.IsZero() || next.Before(at)) {
			at = next.Truncate(time.Hour).Add(time.Hour)
		}
		if at.IsZero() {
			return nil
		}
	}
	if err := a.deps.Wake.Arm(ctx, wake.TargetArchiver, at); err != nil {
		return fmt.Errorf("archive: arm the next run: %w", err)
	}
	return nil
}
