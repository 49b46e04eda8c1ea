package storage

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store runs the project's queries on a pgx pool.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store over pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Pool returns the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// EventInsertParams is a new delivery to store.
type EventInsertParams struct {
	Provider string
	// SourceKind is the kind of the source that verified the delivery.
	SourceKind string
	EventID    string
	EventType  string
	Body       []byte
	// Metadata is stored as a JSON object; nil stores NULL.
	Metadata map[string]string
}

// EventInsertResult says whether the delivery made a new row.
type EventInsertResult struct {
	// ID is the new row's id, or the stored row's id for a duplicate when
	// it could be read in the same statement (0 otherwise).
	ID int64
	// Inserted is true for a new event, false for a duplicate.
	Inserted bool
	// BodySHA256 is the hash of the body received now.
	BodySHA256 [32]byte
	// StoredSHA256 is the stored row's body hash, for duplicates.
	StoredSHA256 []byte
	// PayloadStored is false when the body could not be held as JSONB
	// (not JSON, or JSON Postgres refuses, such as \u0000): the raw body is
	// then the only copy, which is always stored anyway.
	PayloadStored bool
}

// Mismatch reports a duplicate whose body differs from the stored one.
func (r EventInsertResult) Mismatch() bool {
	return !r.Inserted && r.StoredSHA256 != nil && string(r.StoredSHA256) != string(r.BodySHA256[:])
}

// EventInsertSQL is the receiver's one statement (exported so the
// benchmark can run the very same text under pgbench): the insert that
// deduplicates, and for a conflict the stored row's hash in the same round
// trip. $4 is the payload as text for JSONB, or NULL; $8 the metadata
// likewise. Text cast in SQL works the same in every query mode.
//
// The second branch reads the table with the statement's snapshot, so it
// misses a conflicting row committed by a concurrent receiver after the
// snapshot was taken (ON CONFLICT waits for that row, the snapshot cannot
// see it). That case returns no row, and EventInsert re-reads.
const EventInsertSQL = `
WITH ins AS (
    INSERT INTO webhook_events (provider, event_id, event_type, payload, body, body_sha256, body_size, metadata, source_kind)
    VALUES ($1, $2, $3, $4::text::jsonb, $5, $6, $7, $8::text::jsonb, $9)
    ON CONFLICT (provider, event_id) DO NOTHING
    RETURNING id
)
SELECT id, true, NULL::bytea FROM ins
UNION ALL
SELECT e.id, false, e.body_sha256 FROM webhook_events e
 WHERE e.provider = $1 AND e.event_id = $2 AND NOT EXISTS (SELECT 1 FROM ins)`

const eventHashGetSQL = `SELECT id, body_sha256 FROM webhook_events WHERE provider = $1 AND event_id = $2`

// EventInsert stores a delivery unless (provider, event_id) exists. When it
// returns nil the event is committed; any error means it may not be, and the
// sender must be told to retry.
func (s *Store) EventInsert(ctx context.Context, p EventInsertParams) (EventInsertResult, error) {
	res := EventInsertResult{BodySHA256: sha256.Sum256(p.Body)}
	// Try the body as JSONB when it looks like a JSON document, and let
	// Postgres, which parses it anyway, be the judge: a refusal (not JSON
	// after all, or JSON JSONB cannot hold) falls back to raw-only. A full
	// parse here would be the request's second in Go (the verifier already
	// read its fields) for the benefit of rare invalid bodies.
	var payload any
	if looksLikeJSON(p.Body) {
		payload = string(p.Body)
	}
	// Text, cast in SQL, so every query mode sends the same thing: in the
	// exec and simple protocols a []byte would travel as bytea.
	var metadata any
	if len(p.Metadata) > 0 {
		// Metadata comes from headers: JSONB cannot hold NUL, and dropping
		// it here keeps a stray byte from refusing the whole event.
		clean := make(map[string]string, len(p.Metadata))
		for k, v := range p.Metadata {
			clean[strings.ReplaceAll(k, "\x00", "")] = strings.ReplaceAll(v, "\x00", "")
		}
		b, err := json.Marshal(clean)
		if err != nil {
			return res, fmt.Errorf("encode metadata of %s/%s: %w", p.Provider, p.EventID, err)
		}
		metadata = string(b)
	}
	for {
		row := s.pool.QueryRow(ctx, EventInsertSQL,
			p.Provider, p.EventID, p.EventType, payload, p.Body, res.BodySHA256[:], len(p.Body), metadata, p.SourceKind)
		err := row.Scan(&res.ID, &res.Inserted, &res.StoredSHA256)
		switch {
		case err == nil:
			res.PayloadStored = res.Inserted && payload != nil
			return res, nil
		case errors.Is(err, pgx.ErrNoRows):
			// A concurrent receiver committed the same event after our
			// snapshot: it is a duplicate; read its hash with a new one.
			err = s.pool.QueryRow(ctx, eventHashGetSQL, p.Provider, p.EventID).Scan(&res.ID, &res.StoredSHA256)
			if err != nil {
				return res, fmt.Errorf("read stored event %s/%s: %w", p.Provider, p.EventID, err)
			}
			return res, nil
		case payload != nil && isJSONBRefusal(err):
			payload = nil // store the raw body alone
			continue
		default:
			return res, fmt.Errorf("insert event %s/%s: %w", p.Provider, p.EventID, err)
		}
	}
}

// looksLikeJSON reports whether b starts, after whitespace, like a JSON
// object or array: the bodies webhooks carry.
func looksLikeJSON(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', '[':
			return true
		default:
			return false
		}
	}
	return false
}

// isJSONBRefusal reports whether err is Postgres refusing the payload as
// JSONB: a data exception (class 22: \u0000, bad escapes, lone surrogates,
// numbers out of range) or a program limit (class 54: nesting too deep).
func isJSONBRefusal(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return len(pgErr.Code) == 5 && (pgErr.Code[:2] == "22" || pgErr.Code[:2] == "54")
}

// IsDataError reports whether err is Postgres refusing values as data
// (classes 22 and 23): retrying the same values cannot succeed, unlike a
// connection failure or timeout.
func IsDataError(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return len(pgErr.Code) == 5 && (pgErr.Code[:2] == "22" || pgErr.Code[:2] == "23")
}

// PayloadMismatchInsert records a redelivery whose body differs from the
// stored event's.
func (s *Store) PayloadMismatchInsert(ctx context.Context, provider, eventID string, stored []byte, received [32]byte, size int) error {
	_, err := s.pool.Exec(ctx, `
INSERT INTO webhook_payload_mismatches (provider, event_id, stored_sha256, received_sha256, received_size)
VALUES ($1, $2, $3, $4, $5)`, provider, eventID, stored, received[:], size)
	if err != nil {
		return fmt.Errorf("record payload mismatch %s/%s: %w", provider, eventID, err)
	}
	return nil
}

// Event is a stored event row (the columns the receiver writes).
type Event struct {
	ID          int64
	Provider    string
	EventID     string
	EventType   string
	Payload     []byte // JSONB as text, nil when not stored
	Body        []byte // raw body, nil once archived or expunged
	BodySHA256  []byte
	BodySize    int
	CreatedAt   time.Time
	ProcessedAt *time.Time
	Metadata    map[string]string
}

// EventGetByKey returns the event stored for (provider, eventID).
func (s *Store) EventGetByKey(ctx context.Context, provider, eventID string) (Event, error) {
	var e Event
	err := s.pool.QueryRow(ctx, `
SELECT id, provider, event_id, event_type, payload::text, body, body_sha256, body_size, created_at, processed_at, metadata
  FROM webhook_events WHERE provider = $1 AND event_id = $2`, provider, eventID).Scan(
		&e.ID, &e.Provider, &e.EventID, &e.EventType, &e.Payload, &e.Body, &e.BodySHA256, &e.BodySize, &e.CreatedAt, &e.ProcessedAt, &e.Metadata)
	if err != nil {
		return e, fmt.Errorf("get event %s/%s: %w", provider, eventID, err)
	}
	return e, nil
}

// PayloadMismatchCount returns how many mismatching redeliveries were
// recorded for (provider, eventID).
func (s *Store) PayloadMismatchCount(ctx context.Context, provider, eventID string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_payload_mismatches WHERE provider = $1 AND event_id = $2`, provider, eventID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count payload mismatches %s/%s: %w", provider, eventID, err)
	}
	return n, nil
}
