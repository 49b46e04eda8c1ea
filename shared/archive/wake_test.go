package archive_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// arms records the archiver's wake-ups (shared/wake's own tests run the
// real markers).
type arms struct {
	mu sync.Mutex
	at []time.Time
}

func (a *arms) Arm(_ context.Context, target wake.Target, at time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if target != wake.TargetArchiver {
		panic("the archiver armed " + string(target))
	}
	a.at = append(a.at, at)
	return nil
}

func TestInvocationArmsTheNextRun(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := time.Now().Truncate(time.Microsecond)
	recent := now.Add(-10 * time.Minute)
	f.bulk("stripe", 4, 64, func(i int) time.Time {
		if i == 4 {
			return recent
		}
		return now.Add(-3 * time.Hour)
	})
	rec := &arms{}
	clock := clockFunc(func() time.Time { return now })
	// One batch of two: the run stops with work left, and arms one now.
	a := f.archiver(func(c *archive.Config, d *archive.Deps) {
		d.Wake, d.Clock, c.BatchSize, c.MaxBatches = rec, clock, 2, 1
	})
	res, err := a.Invocation(context.Background())
	if err != nil || res.Events != 2 || !res.Truncated {
		t.Fatalf("first run: %+v, %v", res, err)
	}
	if len(rec.at) != 1 || !rec.at[0].Equal(now) {
		t.Fatalf("armed %v after a truncated run, want now (%s)", rec.at, now)
	}
	// The rest of the due ones; the last waits for its hour.
	a = f.archiver(func(c *archive.Config, d *archive.Deps) { d.Wake, d.Clock = rec, clock })
	if res, err := a.Invocation(context.Background()); err != nil || res.Events != 1 || res.Truncated {
		t.Fatalf("second run: %+v, %v", res, err)
	}
	want := recent.Add(time.Hour).Truncate(time.Hour).Add(time.Hour)
	if len(rec.at) != 2 || !rec.at[1].Equal(want) {
		t.Fatalf("armed %v, want the hour after the recent event comes of age (%s)", rec.at, want)
	}
	// At that time it is archived, and nothing is left to arm for.
	later := want
	a = f.archiver(func(c *archive.Config, d *archive.Deps) {
		d.Wake, d.Clock = rec, clockFunc(func() time.Time { return later })
	})
	if res, err := a.Invocation(context.Background()); err != nil || res.Events != 1 {
		t.Fatalf("third run: %+v, %v", res, err)
	}
	if len(rec.at) != 2 {
		t.Fatalf("armed %v with nothing left", rec.at)
	}
}

func TestFailedRunArmsARetry(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := time.Now()
	f.bulk("stripe", 1, 64, func(int) time.Time { return now.Add(-3 * time.Hour) })
	if err := f.srv.Stop(); err != nil { // S3 is out
		t.Fatal(err)
	}
	rec := &arms{}
	a := f.archiver(func(c *archive.Config, d *archive.Deps) {
		d.Wake, d.Clock = rec, clockFunc(func() time.Time { return now })
	})
	if _, err := a.Invocation(context.Background()); err == nil {
		t.Fatal("a run without S3 succeeded")
	}
	if want := now.Add(archive.FailedRunRetry); len(rec.at) != 1 || !rec.at[0].Equal(want) {
		t.Fatalf("armed %v after a failed run, want %s", rec.at, want)
	}
}

// TestIdleArchiverArmsForTheNextExpiry: with nothing left to archive, an
// archiver with a body retention arms its next run for the hour after the
// stored object's newest event passes retention, and an archiver without
// one arms nothing.
func TestIdleArchiverArmsForTheNextExpiry(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := time.Now().Truncate(time.Microsecond)
	f.bulk("stripe", 2, 64, func(int) time.Time { return now.Add(-3 * time.Hour) }) // received 3h ago
	rec := &arms{}
	clock := clockFunc(func() time.Time { return now })
	a := f.archiver(func(c *archive.Config, d *archive.Deps) { d.Wake, d.Clock = rec, clock })
	if res, err := a.Invocation(context.Background()); err != nil || res.Events != 2 {
		t.Fatalf("archiving run: %+v, %v", res, err)
	}
	if len(rec.at) != 0 {
		t.Fatalf("armed %v with nothing left and no retention", rec.at)
	}
	var received time.Time
	if err := f.pool.QueryRow(context.Background(), `SELECT max(created_at) FROM webhook_events`).Scan(&received); err != nil {
		t.Fatal(err)
	}
	retaining := f.archiver(func(c *archive.Config, d *archive.Deps) {
		d.Wake, d.Clock, c.BodyRetention = rec, clock, 24*time.Hour
	})
	if res, err := retaining.Invocation(context.Background()); err != nil || res.ExpiredObjects != 0 {
		t.Fatalf("retaining run: %+v, %v", res, err)
	}
	want := received.Add(24 * time.Hour).Truncate(time.Hour).Add(time.Hour)
	if len(rec.at) != 1 || !rec.at[0].Equal(want) {
		t.Fatalf("armed %v, want the hour after the object passes retention (%s)", rec.at, want)
	}
}
