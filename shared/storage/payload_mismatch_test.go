package storage_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/sqltext"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The statistics of anomalies read their window through
// webhook_payload_mismatches_received_idx, not the whole table: with
// sequential scans off, the plan of the very statement the store runs uses
// the index (without the index, the planner could only scan the table).
func TestPayloadMismatchStatsUseTheIndex(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := t.Context()
	s := storage.New(pool)
	stored, received := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	for i := range 50 {
		if _, err := s.PayloadMismatchInsert(ctx, inbox.PayloadMismatch{Source: "shop", EventID: fmt.Sprintf("e%d", i),
			StoredSHA256: stored[:], ReceivedSHA256: received[:]}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `ANALYZE webhook_payload_mismatches`); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	// A window after every stored row: what a periodic look at the last
	// minutes is to a table of months.
	stmt, err := sqltext.Storage("PayloadMismatchCountBySource")
	if err != nil {
		t.Fatal(err)
	}
	var plan []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+stmt, time.Now().Add(time.Hour)).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(plan, &v); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(plan), `"Index Name": "webhook_payload_mismatches_received_idx"`) {
		t.Fatalf("the statistics do not use webhook_payload_mismatches_received_idx:\n%s", plan)
	}
}
