package storage

import (
	"context"
	"fmt"
	"time"
)

// DeadLetterStats is the open dead letters (not requeued) as a gauge.
type DeadLetterStats struct {
	// Open is how many dead letters wait for an operator.
	Open int64
	// OldestDeadAt is when the oldest of them died; nil when none is open.
	OldestDeadAt *time.Time
}

// OldestAge is how long the oldest open dead letter has waited at now;
// zero when none is open.
func (s DeadLetterStats) OldestAge(now time.Time) time.Duration {
	if s.OldestDeadAt == nil || now.Before(*s.OldestDeadAt) {
		return 0
	}
	return now.Sub(*s.OldestDeadAt)
}

// DeadLetterGetOpenStats counts the open dead letters and finds the oldest,
// with an index-only scan of the open ones (the processor's gauge).
func (e executor) DeadLetterGetOpenStats(ctx context.Context) (DeadLetterStats, error) {
	r, err := queries.DeadLetterGetOpenStats(ctx, e.db)
	if err != nil {
		return DeadLetterStats{}, fmt.Errorf("read open dead letters: %w", err)
	}
	return DeadLetterStats{Open: r.Count, OldestDeadAt: anyTime(r.OldestDeadAt)}, nil
}
