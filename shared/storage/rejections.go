package storage

import (
	"context"
	"fmt"
	"time"
)

// DefaultRejectionsCapacity is how many recent rejections the ring buffer
// keeps: enough to see a pattern over a bad hour, small enough to ignore.
const DefaultRejectionsCapacity = 10000

// Rejection is one refused request, as the receiver records it. Every
// field is bounded and free of secrets, signatures and bodies.
type Rejection struct {
	Provider   string
	Cause      string
	Message    string
	RequestID  string
	RemoteAddr string
	BodySize   int64
	// Suppressed is how many rejections of the same source and cause were
	// not written since the previous record (sampling).
	Suppressed int64
	ReceivedAt time.Time
}

// RejectionInsert writes r into the ring buffer of the last capacity
// rejections, overwriting the oldest slot.
func (s *Store) RejectionInsert(ctx context.Context, r Rejection, capacity int) error {
	if capacity <= 0 {
		capacity = DefaultRejectionsCapacity
	}
	_, err := s.pool.Exec(ctx, `
INSERT INTO webhook_rejections (slot, provider, cause, message, request_id, remote_addr, body_size, suppressed, received_at)
VALUES ((nextval('webhook_rejections_seq') % $1)::int, $2, $3, $4, $5, $6, $7, $8, now())
ON CONFLICT (slot) DO UPDATE SET
    provider = EXCLUDED.provider, cause = EXCLUDED.cause, message = EXCLUDED.message,
    request_id = EXCLUDED.request_id, remote_addr = EXCLUDED.remote_addr, body_size = EXCLUDED.body_size,
    suppressed = EXCLUDED.suppressed, received_at = EXCLUDED.received_at`,
		capacity, r.Provider, r.Cause, r.Message, r.RequestID, r.RemoteAddr, r.BodySize, r.Suppressed)
	if err != nil {
		return fmt.Errorf("record rejection %s/%s: %w", r.Provider, r.Cause, err)
	}
	return nil
}

// RejectionsList returns the rejections received since since, newest
// first, at most limit.
func (s *Store) RejectionsList(ctx context.Context, since time.Time, limit int) ([]Rejection, error) {
	rows, err := s.pool.Query(ctx, `
SELECT provider, cause, message, request_id, remote_addr, body_size, suppressed, received_at
  FROM webhook_rejections WHERE received_at >= $1 ORDER BY received_at DESC, slot DESC LIMIT $2`, since, limit)
	if err != nil {
		return nil, fmt.Errorf("list rejections: %w", err)
	}
	defer rows.Close()
	var out []Rejection
	for rows.Next() {
		var r Rejection
		if err := rows.Scan(&r.Provider, &r.Cause, &r.Message, &r.RequestID, &r.RemoteAddr, &r.BodySize, &r.Suppressed, &r.ReceivedAt); err != nil {
			return nil, fmt.Errorf("list rejections: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list rejections: %w", err)
	}
	return out, nil
}

// RejectionCount is the number of rejections of one source and cause,
// counting the suppressed ones the records stand for.
type RejectionCount struct {
	Provider string
	Cause    string
	Count    int64
}

// RejectionsCountByCause counts the rejections since since per source and
// cause, largest first.
func (s *Store) RejectionsCountByCause(ctx context.Context, since time.Time) ([]RejectionCount, error) {
	rows, err := s.pool.Query(ctx, `
SELECT provider, cause, sum(1 + suppressed)::bigint AS n
  FROM webhook_rejections WHERE received_at >= $1
 GROUP BY provider, cause ORDER BY n DESC, provider, cause`, since)
	if err != nil {
		return nil, fmt.Errorf("count rejections: %w", err)
	}
	defer rows.Close()
	var out []RejectionCount
	for rows.Next() {
		var c RejectionCount
		if err := rows.Scan(&c.Provider, &c.Cause, &c.Count); err != nil {
			return nil, fmt.Errorf("count rejections: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
