package storage_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// archiveFixture stores n processed events of provider "a" and returns the
// store.
func archiveFixture(t *testing.T, pool *pgxpool.Pool, n int) *storage.Store {
	t.Helper()
	ctx := context.Background()
	s := storage.New(pool)
	for i := range n {
		body := []byte{'{', '"', 'n', '"', ':', byte('0' + i), '}'}
		if _, err := s.EventInsert(ctx, storage.EventInsertParams{Provider: "a", EventID: string(rune('a' + i)), Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE webhook_events SET processed_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	return s
}

var archiveParams = storage.EventArchiveParams{ProcessedBefore: time.Now().Add(time.Hour), Limit: 10}

// The archiver's queries must work in every query mode too (RDS Proxy,
// PgBouncer): a whole batch, a read, an expunge and a sweep.
func TestArchiveQueriesInEveryQueryMode(t *testing.T) {
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
			s := archiveFixture(t, pool, 3)
			c, err := s.EventArchiveCandidates(ctx, archiveParams)
			if err != nil || len(c.IDs) != 3 || c.Provider != "a" {
				t.Fatalf("candidates %+v, %v", c, err)
			}
			if err := s.ArchiveObjectPrepare(ctx, "k", c.Provider); err != nil {
				t.Fatal(err)
			}
			b, err := s.EventArchiveBegin(ctx, "k", c, time.Minute)
			if err != nil || len(b.Events) != 3 {
				t.Fatalf("begin: %v", err)
			}
			var locs []storage.ArchiveLocation
			for i, e := range b.Events {
				locs = append(locs, storage.ArchiveLocation{EventPK: e.ID, Offset: int64(i * 10), Length: 10})
			}
			sum := sha256.Sum256([]byte("object"))
			if err := b.EventArchiveMark(ctx, storage.ArchiveObject{Key: "k", Size: 30, SHA256: sum[:]}, locs); err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			loc, err := s.EventBodyLocate(ctx, "a", "b")
			if err != nil || loc.Body != nil || loc.ArchiveKey == nil || *loc.ArchiveKey != "k" || loc.ArchiveOffset != 10 || loc.ArchiveLength != 10 {
				t.Fatalf("locate: %+v, %v", loc, err)
			}
			o, err := s.ArchiveObjectGet(ctx, "k")
			if err != nil || o.CommittedAt == nil || o.EventCount != 3 || o.Size != 30 {
				t.Fatalf("manifest: %+v, %v", o, err)
			}
			called := false
			_, err = s.EventExpunge(ctx, "a", "b", func(ctx context.Context, tg storage.EventExpungeTarget) (storage.ArchiveObjectRewrite, error) {
				called = true
				return storage.ArchiveObjectRewrite{Size: 30, SHA256: sum[:]}, nil
			})
			if err != nil || !called {
				t.Fatalf("expunge: %v (rewrite called %v)", err, called)
			}
			if swept, err := s.ArchiveObjectSweep(ctx, 10, func(context.Context, string) error { return nil }); err != nil || len(swept) != 0 {
				t.Fatalf("sweep of committed objects: %v, %v", swept, err)
			}
		})
	}
}

func TestArchiveBatchChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	s := archiveFixture(t, pool, 3)

	// Another transaction holds one event (an expunge, say): the batch as
	// chosen cannot be locked.
	c, _ := s.EventArchiveCandidates(ctx, archiveParams)
	if err := s.ArchiveObjectPrepare(ctx, "k1", "a"); err != nil {
		t.Fatal(err)
	}
	other, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, `SELECT 1 FROM webhook_events WHERE id = $1 FOR UPDATE`, c.IDs[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EventArchiveBegin(ctx, "k1", c, 0); !errors.Is(err, storage.ErrArchiveBatchChanged) {
		t.Fatalf("begin with an event held elsewhere: %v", err)
	}
	// Meanwhile the next choice skips the held event.
	c2, err := s.EventArchiveCandidates(ctx, archiveParams)
	if err != nil || len(c2.IDs) != 2 {
		t.Fatalf("candidates while one is held: %+v, %v", c2, err)
	}
	_ = other.Rollback(ctx)

	// A sweep took the pending row between Prepare and Begin.
	swept, err := s.ArchiveObjectSweep(ctx, 10, func(context.Context, string) error { return nil })
	if err != nil || len(swept) != 1 || swept[0] != "k1" {
		t.Fatalf("sweep: %v, %v", swept, err)
	}
	if _, err := s.EventArchiveBegin(ctx, "k1", c, 0); !errors.Is(err, storage.ErrArchiveBatchChanged) {
		t.Fatalf("begin after its row was swept: %v", err)
	}

	// A batch that holds its row is never swept; once committed, its key
	// can never be prepared again.
	if err := s.ArchiveObjectPrepare(ctx, "k1", "a"); err != nil {
		t.Fatal(err)
	}
	b, err := s.EventArchiveBegin(ctx, "k1", c, 0)
	if err != nil {
		t.Fatal(err)
	}
	if swept, err := s.ArchiveObjectSweep(ctx, 10, func(context.Context, string) error { return errors.New("must not be called") }); err != nil || len(swept) != 0 {
		t.Fatalf("sweep of a held row: %v, %v", swept, err)
	}
	// A location outside the batch is refused, and nothing is marked.
	sum := sha256.Sum256(nil)
	if err := b.EventArchiveMark(ctx, storage.ArchiveObject{Key: "k1", Size: 1, SHA256: sum[:]}, []storage.ArchiveLocation{{EventPK: 999, Offset: 0, Length: 1}}); err == nil {
		t.Fatal("marked an event that is not in the batch")
	}
	_ = b.Rollback(ctx)
	b, err = s.EventArchiveBegin(ctx, "k1", c, 0)
	if err != nil {
		t.Fatal(err)
	}
	var locs []storage.ArchiveLocation
	for _, e := range b.Events {
		locs = append(locs, storage.ArchiveLocation{EventPK: e.ID, Offset: 0, Length: 1})
	}
	if err := b.EventArchiveMark(ctx, storage.ArchiveObject{Key: "k1", Size: 1, SHA256: sum[:]}, locs); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Rollback(ctx); err != nil {
		t.Fatalf("rollback after commit: %v", err)
	}
	if err := s.ArchiveObjectPrepare(ctx, "k1", "a"); !errors.Is(err, storage.ErrArchiveObjectCommitted) {
		t.Fatalf("prepare of a committed key: %v", err)
	}
	if c, err := s.EventArchiveCandidates(ctx, archiveParams); err != nil || len(c.IDs) != 0 {
		t.Fatalf("candidates after archiving all: %+v, %v", c, err)
	}
}

func TestArchiveSweepStopsOnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storage.New(pgtest.Pool(t))
	for _, k := range []string{"x", "y"} {
		if err := s.ArchiveObjectPrepare(ctx, k, "a"); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("S3 down")
	swept, err := s.ArchiveObjectSweep(ctx, 10, func(context.Context, string) error { return boom })
	if !errors.Is(err, boom) || len(swept) != 0 {
		t.Fatalf("sweep: %v, %v", swept, err)
	}
	// The rows stay for the next sweep.
	swept, err = s.ArchiveObjectSweep(ctx, 10, func(context.Context, string) error { return nil })
	if err != nil || len(swept) != 2 {
		t.Fatalf("second sweep: %v, %v", swept, err)
	}
}

func TestEventExpungeNotFound(t *testing.T) {
	t.Parallel()
	s := storage.New(pgtest.Pool(t))
	if _, err := s.EventExpunge(context.Background(), "a", "nope", nil); !errors.Is(err, storage.ErrEventNotFound) {
		t.Fatalf("expunge: %v", err)
	}
	if _, err := s.EventBodyLocate(context.Background(), "a", "nope"); !errors.Is(err, storage.ErrEventNotFound) {
		t.Fatalf("locate: %v", err)
	}
}
