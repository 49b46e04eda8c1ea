package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/internal/dbsqlc"
)

// The queries on webhook_payload_mismatches
// (queries/webhook_payload_mismatches.sql).

// PayloadMismatchInsert records a redelivery whose body differs from the
// stored event's (ReceivedAt is the server's now).
func (e executor) PayloadMismatchInsert(ctx context.Context, m inbox.PayloadMismatch) error {
	err := queries.PayloadMismatchInsert(ctx, e.db, dbsqlc.PayloadMismatchInsertParams{
		Source: m.Source, EventID: m.EventID, StoredSHA256: m.StoredSHA256, ReceivedSHA256: m.ReceivedSHA256, ReceivedSize: int32(m.ReceivedSize),
	})
	if err != nil {
		return fmt.Errorf("record payload mismatch %s/%s: %w", m.Source, m.EventID, err)
	}
	return nil
}

// PayloadMismatchCountByEvent returns how many mismatching redeliveries
// were recorded for (source, eventID).
func (e executor) PayloadMismatchCountByEvent(ctx context.Context, source, eventID string) (int, error) {
	n, err := queries.PayloadMismatchCountByEvent(ctx, e.db, dbsqlc.PayloadMismatchCountByEventParams{Source: source, EventID: eventID})
	if err != nil {
		return 0, fmt.Errorf("count payload mismatches %s/%s: %w", source, eventID, err)
	}
	return int(n), nil
}

// PayloadMismatchListByEvent returns the mismatching redeliveries of one
// event, oldest first.
func (e executor) PayloadMismatchListByEvent(ctx context.Context, source, eventID string) ([]inbox.PayloadMismatch, error) {
	rows, err := queries.PayloadMismatchListByEvent(ctx, e.db, dbsqlc.PayloadMismatchListByEventParams{Source: source, EventID: eventID})
	if err != nil {
		return nil, fmt.Errorf("payload mismatches of %s/%s: %w", source, eventID, err)
	}
	out := make([]inbox.PayloadMismatch, len(rows))
	for i, r := range rows {
		out[i] = inbox.PayloadMismatch{
			Source: r.Source, EventID: r.EventID, StoredSHA256: r.StoredSHA256, ReceivedSHA256: r.ReceivedSHA256,
			ReceivedSize: int(r.ReceivedSize), ReceivedAt: r.ReceivedAt,
		}
	}
	return out, nil
}

// PayloadMismatchCount is the mismatching redeliveries of one source.
type PayloadMismatchCount struct {
	Source string
	Count  int64
	// LastAt is the latest one.
	LastAt time.Time
}

// PayloadMismatchCountBySource counts the mismatching redeliveries
// received since since, per source, largest first.
func (e executor) PayloadMismatchCountBySource(ctx context.Context, since time.Time) ([]PayloadMismatchCount, error) {
	rows, err := queries.PayloadMismatchCountBySource(ctx, e.db, since)
	if err != nil {
		return nil, fmt.Errorf("count payload mismatches: %w", err)
	}
	out := make([]PayloadMismatchCount, len(rows))
	for i, r := range rows {
		out[i] = PayloadMismatchCount{Source: r.Source, Count: r.Count, LastAt: deref(anyTime(r.LastAt))}
	}
	return out, nil
}
