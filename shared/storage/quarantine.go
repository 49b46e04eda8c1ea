package storage

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/internal/dbsqlc"
)

// The queries on webhook_quarantine (queries/webhook_quarantine.sql): the
// deliveries refused for their signature or their signed time, kept for a
// re-ingest.

// DefaultQuarantineCap is how many refused deliveries a source keeps when
// no cap is given: a bad day of a busy sender's retries, at most the
// receiver's body limit each.
const DefaultQuarantineCap = 1000

// ErrQuarantineNotFound is returned (wrapped) when no quarantined delivery
// has the id.
var ErrQuarantineNotFound = errors.New("quarantined delivery not found")

// QuarantineFilter selects quarantined deliveries: one by its id, those of
// a source, those received in [ReceivedFrom, ReceivedTo); zero values
// select every one (the caller refuses an empty selection where it must).
type QuarantineFilter struct {
	ID           int64     `json:"id,omitzero"`
	Source       string    `json:"source,omitzero"`
	ReceivedFrom time.Time `json:"received_from,omitzero"`
	ReceivedTo   time.Time `json:"received_to,omitzero"`
}

// QuarantineInsert keeps q (its ReceivedAt, Header, Body) unless its
// source already holds capacity deliveries (0: DefaultQuarantineCap), and
// reports whether it was kept.
func (e executor) QuarantineInsert(ctx context.Context, q inbox.Quarantined, capacity int) (bool, error) {
	if capacity <= 0 {
		capacity = DefaultQuarantineCap
	}
	header := q.Header
	if header == nil {
		header = http.Header{}
	}
	h, err := json.Marshal(header)
	if err != nil {
		return false, fmt.Errorf("quarantine %s: headers: %w", q.Source, err)
	}
	sum := sha256.Sum256(q.Body)
	body := q.Body
	if body == nil {
		body = []byte{}
	}
	n, err := queries.QuarantineInsert(ctx, e.db, dbsqlc.QuarantineInsertParams{
		Source: q.Source, SourceKind: q.SourceKind, Cause: string(q.Cause), RequestID: q.RequestID, ReceivedAt: q.ReceivedAt,
		Headers: string(h), Body: body, BodySHA256: sum[:], BodySize: int32(len(q.Body)), Cap: int32(capacity),
	})
	if err != nil {
		return false, fmt.Errorf("quarantine %s/%s: %w", q.Source, q.Cause, err)
	}
	return n == 1, nil
}

// QuarantineListPage returns a page of the selected deliveries, newest
// first, before the cursor before (0: the first page), at most limit;
// without headers or bodies.
func (e executor) QuarantineListPage(ctx context.Context, f QuarantineFilter, before int64, limit int) ([]inbox.Quarantined, error) {
	rows, err := queries.QuarantineListPage(ctx, e.db, dbsqlc.QuarantineListPageParams{
		ID: f.ID, Source: f.Source, From: timePtr(f.ReceivedFrom), To: timePtr(f.ReceivedTo), Before: before, Max: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("list the quarantine: %w", err)
	}
	out := make([]inbox.Quarantined, len(rows))
	for i, r := range rows {
		out[i] = quarantinedFromRow(dbsqlc.WebhookQuarantine{
			ID: r.ID, Source: r.Source, SourceKind: r.SourceKind, Cause: r.Cause, RequestID: r.RequestID, ReceivedAt: r.ReceivedAt,
			BodySHA256: r.BodySHA256, BodySize: r.BodySize, TriedAt: r.TriedAt, LastCause: r.LastCause, LastError: r.LastError,
		})
	}
	return out, nil
}

// QuarantineGetByID returns one delivery, its headers and body included.
func (e executor) QuarantineGetByID(ctx context.Context, id int64) (inbox.Quarantined, error) {
	row, err := queries.QuarantineGetByID(ctx, e.db, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return inbox.Quarantined{}, fmt.Errorf("quarantined delivery %d: %w", id, ErrQuarantineNotFound)
	}
	if err != nil {
		return inbox.Quarantined{}, fmt.Errorf("read quarantined delivery %d: %w", id, err)
	}
	return quarantinedWhole(row)
}

// QuarantineCount counts the selected deliveries.
func (e executor) QuarantineCount(ctx context.Context, f QuarantineFilter) (int, error) {
	n, err := queries.QuarantineCount(ctx, e.db, dbsqlc.QuarantineCountParams{
		ID: f.ID, Source: f.Source, From: timePtr(f.ReceivedFrom), To: timePtr(f.ReceivedTo),
	})
	if err != nil {
		return 0, fmt.Errorf("count the quarantine: %w", err)
	}
	return int(n), nil
}

// QuarantineListForReingest returns the selected deliveries after the id
// after (0: from the first) whole, oldest first, at most limit, locked
// until the transaction ends: run it in the re-ingest's.
func (e executor) QuarantineListForReingest(ctx context.Context, f QuarantineFilter, after int64, limit int) ([]inbox.Quarantined, error) {
	rows, err := queries.QuarantineListForReingest(ctx, e.db, dbsqlc.QuarantineListForReingestParams{
		After: after, ID: f.ID, Source: f.Source, From: timePtr(f.ReceivedFrom), To: timePtr(f.ReceivedTo), Max: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("read the quarantine: %w", err)
	}
	out := make([]inbox.Quarantined, len(rows))
	for i, r := range rows {
		if out[i], err = quarantinedWhole(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// QuarantineDelete removes the deliveries ids and returns how many it
// removed.
func (e executor) QuarantineDelete(ctx context.Context, ids []int64) (int, error) {
	n, err := queries.QuarantineDelete(ctx, e.db, ids)
	if err != nil {
		return 0, fmt.Errorf("delete quarantined deliveries: %w", err)
	}
	return int(n), nil
}

// QuarantineMarkFailed records why a re-ingest at at still refused the
// delivery id.
func (e executor) QuarantineMarkFailed(ctx context.Context, id int64, at time.Time, cause inbox.Cause, msg string) error {
	err := queries.QuarantineMarkFailed(ctx, e.db, dbsqlc.QuarantineMarkFailedParams{ID: id, TriedAt: at, LastCause: string(cause), LastError: msg})
	if err != nil {
		return fmt.Errorf("mark quarantined delivery %d: %w", id, err)
	}
	return nil
}

// QuarantinePurge deletes the selected deliveries and returns how many.
func (e executor) QuarantinePurge(ctx context.Context, f QuarantineFilter) (int, error) {
	n, err := queries.QuarantinePurge(ctx, e.db, dbsqlc.QuarantinePurgeParams{
		ID: f.ID, Source: f.Source, From: timePtr(f.ReceivedFrom), To: timePtr(f.ReceivedTo),
	})
	if err != nil {
		return 0, fmt.Errorf("purge the quarantine: %w", err)
	}
	return int(n), nil
}

// QuarantineCountCopies counts the quarantined copies of a stored event:
// of its source, with its body's hash, or carrying its event id as a
// kept header's whole value.
func (e executor) QuarantineCountCopies(ctx context.Context, source, eventID string, bodySHA256 []byte) (int, error) {
	n, err := queries.QuarantineCountCopies(ctx, e.db, dbsqlc.QuarantineCountCopiesParams{Source: source, EventID: eventID, BodySHA256: nonNilBytes(bodySHA256)})
	if err != nil {
		return 0, fmt.Errorf("count the quarantined copies of %s/%s: %w", source, eventID, err)
	}
	return int(n), nil
}

// QuarantineDeleteCopies erases what QuarantineCountCopies counts and
// returns how many.
func (e executor) QuarantineDeleteCopies(ctx context.Context, source, eventID string, bodySHA256 []byte) (int, error) {
	n, err := queries.QuarantineDeleteCopies(ctx, e.db, dbsqlc.QuarantineDeleteCopiesParams{Source: source, EventID: eventID, BodySHA256: nonNilBytes(bodySHA256)})
	if err != nil {
		return 0, fmt.Errorf("erase the quarantined copies of %s/%s: %w", source, eventID, err)
	}
	return int(n), nil
}

// nonNilBytes is b, or an empty slice for nil: a hash that matches none
// rather than a NULL.
func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func quarantinedFromRow(r dbsqlc.WebhookQuarantine) inbox.Quarantined {
	return inbox.Quarantined{
		ID: r.ID, Source: r.Source, SourceKind: r.SourceKind, Cause: inbox.Cause(r.Cause), RequestID: r.RequestID,
		ReceivedAt: r.ReceivedAt, Body: r.Body, BodySHA256: r.BodySHA256, BodySize: int(r.BodySize),
		TriedAt: r.TriedAt, LastCause: inbox.Cause(deref(r.LastCause)), LastError: deref(r.LastError),
	}
}

// quarantinedWhole is a whole row, its headers decoded.
func quarantinedWhole(r dbsqlc.WebhookQuarantine) (inbox.Quarantined, error) {
	q := quarantinedFromRow(r)
	q.Header = http.Header{}
	if err := decodeJSON(r.Headers, &q.Header); err != nil {
		return q, fmt.Errorf("quarantined delivery %d: headers: %w", r.ID, err)
	}
	if q.Body == nil {
		q.Body = []byte{}
	}
	return q, nil
}
