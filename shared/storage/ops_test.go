package storage_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// insertProcessed stores n events of provider and marks them processed at
// processedAt, as the processor would.
func insertProcessed(t *testing.T, s *storage.Store, provider string, n int, processedAt time.Time) []int64 {
	t.Helper()
	ctx := t.Context()
	var ids []int64
	for i := range n {
		id := provider + "_" + processedAt.Format("150405") + "_" + string(rune('a'+i))
		res, err := s.EventInsert(ctx, storage.EventInsertParams{Provider: provider, EventID: id, EventType: "t", Body: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE webhook_events SET processed_at = $2, outcome = 'handled', attempts = 1 WHERE id = ANY($1)`, ids, processedAt); err != nil {
		t.Fatal(err)
	}
	return ids
}

// The operators' queries run behind RDS Proxy or PgBouncer too, so in
// every query mode.
func TestOpsQueriesInEveryQueryMode(t *testing.T) {
	t.Parallel()
	modes := make([]string, 0, len(storage.QueryModes))
	for m := range storage.QueryModes {
		modes = append(modes, m)
	}
	sort.Strings(modes)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, err := storage.OpenPool(ctx, pgtest.URL(t), storage.PoolOptions{QueryMode: mode})
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			s := storage.New(pool)
			now, err := s.DatabaseNow(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ids := insertProcessed(t, s, "shop", 3, now.Add(-time.Minute))
			if _, err := s.EventsBacklog(ctx, now); err != nil {
				t.Fatal(err)
			}
			if _, err := s.EventsBacklogStats(ctx, now); err != nil {
				t.Fatal(err)
			}
			if _, err := s.DeadLettersCountByType(ctx); err != nil {
				t.Fatal(err)
			}
			if n, err := s.DeadLettersCount(ctx, storage.DeadLetterFilter{Provider: "shop", DeadFrom: now.Add(-time.Hour)}); err != nil || n != 0 {
				t.Fatalf("dead letters count = %d, %v", n, err)
			}
			if _, err := s.DeadLettersByEvent(ctx, ids[0]); err != nil {
				t.Fatal(err)
			}
			if _, err := s.PayloadMismatchesCountBySource(ctx, now.Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			if _, err := s.PayloadMismatchesByEvent(ctx, "shop", "x"); err != nil {
				t.Fatal(err)
			}
			if a, err := s.ArchiveStatsGet(ctx, now); err != nil || a.Due != 3 {
				t.Fatalf("archive stats = %+v, %v", a, err)
			}
			if _, err := s.TableSizes(ctx); err != nil {
				t.Fatal(err)
			}
			for _, st := range append(storage.EventStates(), "") {
				if _, err := s.EventsList(ctx, storage.EventFilter{Provider: "shop", State: st, CreatedFrom: now.Add(-time.Hour), BeforeID: 1 << 40}, now, 10); err != nil {
					t.Fatalf("list %q: %v", st, err)
				}
			}
			e, err := s.EventGet(ctx, ids[0], now)
			if err != nil || e.State != storage.StateProcessed {
				t.Fatalf("get = %+v, %v", e, err)
			}
			if _, err := s.EventFind(ctx, "shop", e.EventID, now); err != nil {
				t.Fatal(err)
			}
			if n, err := s.EventsArchivableCount(ctx, now); err != nil || n != 3 {
				t.Fatalf("archivable = %d, %v", n, err)
			}
			res, err := s.EventsReplay(ctx, storage.ReplayFilter{Provider: "shop", Outcome: "handled", ProcessedFrom: now.Add(-time.Hour)},
				storage.ReplayOptions{Now: now, ChunkSize: 2})
			if err != nil || res.Matched != 3 || res.Replayed != 3 {
				t.Fatalf("replay = %+v, %v", res, err)
			}
		})
	}
}

// TestEventsReplayChunks: the real run resets, in chunks, exactly what the
// dry run counted, each event once, and reports its progress.
func TestEventsReplayChunks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := storage.New(pgtest.Pool(t))
	now, err := s.DatabaseNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	insertProcessed(t, s, "a", 4, now.Add(-2*time.Hour)) // out of the window
	late := insertProcessed(t, s, "a", 5, now.Add(-time.Minute))
	insertProcessed(t, s, "b", 2, now.Add(-time.Minute))

	if _, err := s.EventsReplay(ctx, storage.ReplayFilter{}, storage.ReplayOptions{Now: now, DryRun: true}); err != storage.ErrEmptyReplayFilter {
		t.Fatalf("empty filter: %v", err)
	}
	f := storage.ReplayFilter{Provider: "a", ProcessedFrom: now.Add(-time.Hour), ProcessedTo: now}
	dry, err := s.EventsReplay(ctx, f, storage.ReplayOptions{Now: now, DryRun: true})
	if err != nil || dry.Matched != 5 || dry.Replayed != 0 {
		t.Fatalf("dry run = %+v, %v", dry, err)
	}
	var progress [][2]int
	res, err := s.EventsReplay(ctx, f, storage.ReplayOptions{Now: now, ChunkSize: 2, Progress: func(done, total int) {
		progress = append(progress, [2]int{done, total})
	}})
	if err != nil || res.Matched != dry.Matched || res.Replayed != dry.Matched {
		t.Fatalf("replay = %+v, %v", res, err)
	}
	if len(progress) != 3 || progress[2] != [2]int{5, 5} || progress[0] != [2]int{2, 5} {
		t.Fatalf("progress = %v", progress)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE processed_at IS NULL AND id = ANY($1)`, late).Scan(&n); err != nil || n != 5 {
		t.Fatalf("%d of the window's events unprocessed, want 5 (%v)", n, err)
	}
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE processed_at IS NULL`).Scan(&n); err != nil || n != 5 {
		t.Fatalf("%d events unprocessed in all, want 5 (%v)", n, err)
	}
	// The backlog now holds them, all due.
	b, err := s.EventsBacklog(ctx, now)
	if err != nil || b.Count != 5 || b.Due != 5 || b.OldestDueAt == nil || !b.OldestDueAt.Equal(now) || b.OldestDueAge(now.Add(time.Minute)) != time.Minute {
		t.Fatalf("backlog = %+v, %v", b, err)
	}
}
