package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/internal/dbsqlc"
)

// The queries on webhook_rejections (queries/webhook_rejections.sql).

// DefaultRejectionsCapacity is how many recent rejections the ring buffer
// keeps: enough to see a pattern over a bad hour, small enough to ignore.
const DefaultRejectionsCapacity = 10000

// RejectionInsert writes r into the ring buffer of the last capacity
// rejections (0: DefaultRejectionsCapacity), overwriting the oldest slot,
// received at r.ReceivedAt, or the server's now when it is zero.
func (e executor) RejectionInsert(ctx context.Context, r inbox.Rejection, capacity int) error {
	if capacity <= 0 {
		capacity = DefaultRejectionsCapacity
	}
	err := queries.RejectionInsert(ctx, e.db, dbsqlc.RejectionInsertParams{
		Capacity: int64(capacity), Source: r.Source, Cause: string(r.Cause), Message: r.Message,
		RequestID: r.RequestID, RemoteAddr: r.RemoteAddr, BodySize: r.BodySize, Suppressed: r.Suppressed,
		ReceivedAt: timePtr(r.ReceivedAt),
	})
	if err != nil {
		return fmt.Errorf("record rejection %s/%s: %w", r.Source, r.Cause, err)
	}
	return nil
}

// RejectionList returns the rejections received since since, newest
// first, at most limit.
func (e executor) RejectionList(ctx context.Context, since time.Time, limit int) ([]inbox.Rejection, error) {
	rows, err := queries.RejectionList(ctx, e.db, dbsqlc.RejectionListParams{Since: since, Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list rejections: %w", err)
	}
	out := make([]inbox.Rejection, len(rows))
	for i, r := range rows {
		out[i] = inbox.Rejection{
			Source: r.Source, Cause: inbox.Cause(r.Cause), Message: r.Message, RequestID: r.RequestID,
			RemoteAddr: r.RemoteAddr, BodySize: r.BodySize, Suppressed: r.Suppressed, ReceivedAt: r.ReceivedAt,
		}
	}
	return out, nil
}

// RejectionCount is the number of rejections of one source and cause,
// counting the suppressed ones the records stand for.
type RejectionCount struct {
	Source string
	Cause  inbox.Cause
	Count  int64
}

// RejectionCountByCause counts the rejections since since per source and
// cause, largest first.
func (e executor) RejectionCountByCause(ctx context.Context, since time.Time) ([]RejectionCount, error) {
	rows, err := queries.RejectionCountByCause(ctx, e.db, since)
	if err != nil {
		return nil, fmt.Errorf("count rejections: %w", err)
	}
	out := make([]RejectionCount, len(rows))
	for i, r := range rows {
		out[i] = RejectionCount{Source: r.Source, Cause: inbox.Cause(r.Cause), Count: r.Count}
	}
	return out, nil
}

// RejectionCountByBucket counts the rejections in each bucket of b per
// cause, the suppressed ones included; empty buckets are absent.
func (e executor) RejectionCountByBucket(ctx context.Context, b Buckets) ([]RejectionBucket, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	rows, err := queries.RejectionCountByBucket(ctx, e.db, dbsqlc.RejectionCountByBucketParams{BucketSeconds: b.Width.Seconds(), Since: b.Since, Until: b.Until})
	if err != nil {
		return nil, fmt.Errorf("count rejections by time: %w", err)
	}
	out := make([]RejectionBucket, len(rows))
	for i, r := range rows {
		out[i] = RejectionBucket{At: r.Bucket, Cause: r.Cause, Count: r.Count}
	}
	return out, nil
}
