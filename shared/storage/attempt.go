package storage

import (
	"context"
	"fmt"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/internal/dbsqlc"
)

// The queries on webhook_attempts (queries/webhook_attempts.sql), the
// attempt history; EventFinish and EventRecordInterrupted (event.go)
// write it.

// AttemptExpunge replaces the error text of each of an event's attempts
// with Redacted (an expunge: a handler's error may quote the body) and
// returns how many it replaced.
func (e executor) AttemptExpunge(ctx context.Context, eventPK int64) (int, error) {
	n, err := queries.AttemptExpunge(ctx, e.db, dbsqlc.AttemptExpungeParams{EventPK: eventPK, Redacted: Redacted})
	if err != nil {
		return 0, fmt.Errorf("expunge attempt errors of event %d: %w", eventPK, err)
	}
	return int(n), nil
}

// AttemptListByEvent returns an event's attempts, in order.
func (e executor) AttemptListByEvent(ctx context.Context, eventPK int64) ([]inbox.Attempt, error) {
	rows, err := queries.AttemptListByEvent(ctx, e.db, eventPK)
	if err != nil {
		return nil, fmt.Errorf("list attempts of event %d: %w", eventPK, err)
	}
	out := make([]inbox.Attempt, len(rows))
	for i, r := range rows {
		out[i] = inbox.Attempt{
			EventPK: r.EventPK, Number: int(r.Attempt), StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
			Outcome: inbox.AttemptOutcome(r.Outcome), Cause: inbox.Cause(r.Cause), Error: r.Error, Dead: r.Dead,
			Processor: r.Processor, BatchSize: int(r.BatchSize),
		}
	}
	return out, nil
}

// AttemptCountByBucket counts the attempts that finished in each bucket
// of b, by outcome; buckets without attempts are absent.
func (e executor) AttemptCountByBucket(ctx context.Context, b Buckets) ([]AttemptBucket, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	rows, err := queries.AttemptCountByBucket(ctx, e.db, dbsqlc.AttemptCountByBucketParams{BucketSeconds: b.Width.Seconds(), Since: b.Since, Until: b.Until})
	if err != nil {
		return nil, fmt.Errorf("count attempts by time: %w", err)
	}
	out := make([]AttemptBucket, len(rows))
	for i, r := range rows {
		out[i] = AttemptBucket{At: r.Bucket, Processed: r.Processed, Failed: r.Failed, Dead: r.Dead}
	}
	return out, nil
}
