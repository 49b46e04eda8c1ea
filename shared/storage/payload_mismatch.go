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

// PayloadMismatchCap is how many anomalies (payload mismatches and
// suspected replays) are recorded per stored event; the others are only
// logged and counted in metrics. It bounds the table by the events, not by
// what senders (or whoever replays their captured deliveries) post.
const PayloadMismatchCap = 20

// PayloadMismatchInsert records an anomaly of a stored event (ReceivedAt is
// the server's now) unless PayloadMismatchCap are recorded for it already;
// it reports whether it recorded this one.
func (e executor) PayloadMismatchInsert(ctx context.Context, m inbox.PayloadMismatch) (bool, error) {
	cause := m.Cause
	if cause == "" {
		cause = inbox.CausePayloadMismatch
	}
	n, err := queries.PayloadMismatchInsert(ctx, e.db, dbsqlc.PayloadMismatchInsertParams{
		Source: m.Source, EventID: m.EventID, StoredSHA256: m.StoredSHA256, ReceivedSHA256: m.ReceivedSHA256, ReceivedSize: int32(m.ReceivedSize),
		Cause: string(cause), ReceivedEventID: nonEmpty(m.ReceivedEventID), ReceivedEventType: nonEmpty(m.ReceivedEventType),
		Cap: PayloadMismatchCap,
	})
	if err != nil {
		return false, fmt.Errorf("record %s %s/%s: %w", cause, m.Source, m.EventID, err)
	}
	return n > 0, nil
}

// nonEmpty is nil for "", else a pointer to s: NULL for an absent value.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
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
			Source: r.Source, EventID: r.EventID, Cause: inbox.Cause(r.Cause), StoredSHA256: r.StoredSHA256, ReceivedSHA256: r.ReceivedSHA256,
			ReceivedSize: int(r.ReceivedSize), ReceivedEventID: deref(r.ReceivedEventID), ReceivedEventType: deref(r.ReceivedEventType),
			ReceivedAt: r.ReceivedAt,
		}
	}
	return out, nil
}

// PayloadMismatchCount is the anomalies of one source and cause.
type PayloadMismatchCount struct {
	Source string
	// Cause is inbox.CausePayloadMismatch or inbox.CauseSuspectedReplay.
	Cause inbox.Cause
	Count int64
	// LastAt is the latest one.
	LastAt time.Time
}

// PayloadMismatchCountBySource counts the anomalies received since since,
// per source and cause, largest first.
func (e executor) PayloadMismatchCountBySource(ctx context.Context, since time.Time) ([]PayloadMismatchCount, error) {
	rows, err := queries.PayloadMismatchCountBySource(ctx, e.db, since)
	if err != nil {
		return nil, fmt.Errorf("count payload mismatches: %w", err)
	}
	out := make([]PayloadMismatchCount, len(rows))
	for i, r := range rows {
		out[i] = PayloadMismatchCount{Source: r.Source, Cause: inbox.Cause(r.Cause), Count: r.Count, LastAt: deref(anyTime(r.LastAt))}
	}
	return out, nil
}
