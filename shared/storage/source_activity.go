package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/internal/dbsqlc"
)

// The queries on webhook_source_activity
// (queries/webhook_source_activity.sql).

// SourceRecord is one configured source as a receiver records it.
type SourceRecord struct {
	Source string
	// SilentAfter is the source's setting; 0: none.
	SilentAfter time.Duration
	// ReceivedAt is its newest delivery since the receiver's last
	// record; zero: none.
	ReceivedAt time.Time
}

// SourceActivityRecord records a receiver's configured sources at now:
// each of sources configured with its setting (and its newest delivery,
// never moved back), every other source no longer configured.
func (e executor) SourceActivityRecord(ctx context.Context, sources []SourceRecord, now time.Time) error {
	p := dbsqlc.SourceActivityRecordParams{
		Now: now, Sources: make([]string, len(sources)), SilentAfterMs: make([]int64, len(sources)), ReceivedMs: make([]int64, len(sources)),
	}
	for i, s := range sources {
		p.Sources[i], p.SilentAfterMs[i] = s.Source, s.SilentAfter.Milliseconds()
		if !s.ReceivedAt.IsZero() {
			p.ReceivedMs[i] = s.ReceivedAt.UnixMilli()
		}
	}
	if err := queries.SourceActivityRecord(ctx, e.db, p); err != nil {
		return fmt.Errorf("record the sources' activity: %w", err)
	}
	return nil
}

// SourceActivityList returns every source's recorded activity, by name.
func (e executor) SourceActivityList(ctx context.Context) ([]inbox.SourceActivity, error) {
	rows, err := queries.SourceActivityList(ctx, e.db)
	if err != nil {
		return nil, fmt.Errorf("list the sources' activity: %w", err)
	}
	out := make([]inbox.SourceActivity, len(rows))
	for i, r := range rows {
		out[i] = inbox.SourceActivity{
			Source: r.Source, Configured: r.Configured, SilentAfter: time.Duration(r.SilentAfterMs) * time.Millisecond,
			SeenAt: r.SeenAt, LastReceivedAt: r.LastReceivedAt,
		}
	}
	return out, nil
}
