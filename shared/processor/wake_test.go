package processor_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// armed records the wake-ups an invocation arms (shared/wake's own tests
// run the real markers against versitygw).
type armed struct {
	mu   sync.Mutex
	at   map[wake.Target][]time.Time
	fail error
}

func (a *armed) Arm(_ context.Context, target wake.Target, at time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil {
		return a.fail
	}
	if a.at == nil {
		a.at = map[wake.Target][]time.Time{}
	}
	a.at[target] = append(a.at[target], at)
	return nil
}

func (a *armed) of(target wake.Target) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.at[target]
}

func TestInvocationArmsWhatItLeaves(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		if ev.Type == "fails" {
			return errors.New("not yet")
		}
		return nil
	})
	f.insert("ledger", "works", "ok_", 2)
	failing := f.insert("ledger", "fails", "bad_", 1)[0]
	rec := &armed{}
	week := 7 * 24 * time.Hour
	p := f.processorOn(processor.Config{RunFor: 0, ArchiveAfter: week}, processor.Deps{Wake: rec})
	now := f.clock.Now()

	st, err := p.Invocation(f.ctx)
	if err != nil || st.Handled != 2 || st.Retried != 1 {
		t.Fatalf("invocation: %+v, %v", st, err)
	}
	// The processor's next wake-up is the failed event's retry.
	retry := f.row(failing).NextAttemptAt
	if got := rec.of(wake.TargetProcessor); len(got) != 1 || !got[0].Equal(retry) || !retry.After(now) {
		t.Fatalf("processor armed at %v, want the retry at %s (now %s)", got, retry, now)
	}
	// The archiver's: the hour after what it processed becomes archivable.
	want := now.Add(week).Truncate(time.Hour).Add(time.Hour)
	if got := rec.of(wake.TargetArchiver); len(got) != 1 || !got[0].Equal(want) {
		t.Fatalf("archiver armed at %v, want %s", got, want)
	}

	// At the retry it fails again, and arms the next.
	f.clock.Advance(retry.Sub(now))
	if st, err := p.Invocation(f.ctx); err != nil || st.Retried != 1 {
		t.Fatalf("second invocation: %+v, %v", st, err)
	}
	if got := rec.of(wake.TargetProcessor); len(got) != 2 || !got[1].Equal(f.row(failing).NextAttemptAt) {
		t.Fatalf("processor armed at %v after the second failure", got)
	}
	// Nothing processed: no archiver wake-up.
	if got := rec.of(wake.TargetArchiver); len(got) != 1 {
		t.Fatalf("archiver armed again: %v", got)
	}
}

func TestIdleInvocationArmsNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	f.insert("ledger", "t", "evt_", 3)
	rec := &armed{}
	p := f.processorOn(processor.Config{RunFor: 0}, processor.Deps{Wake: rec})
	if st, err := p.Invocation(f.ctx); err != nil || st.Handled != 3 {
		t.Fatalf("invocation: %+v, %v", st, err)
	}
	if st, err := p.Invocation(f.ctx); err != nil || st.Claimed != 0 {
		t.Fatalf("idle invocation: %+v, %v", st, err)
	}
	// Everything is processed, and ArchiveAfter is 0: nothing to arm.
	if len(rec.of(wake.TargetProcessor))+len(rec.of(wake.TargetArchiver)) != 0 {
		t.Fatalf("armed %v", rec.at)
	}
}

func TestFailedArmingFailsTheInvocation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(context.Context, pgx.Tx, *processor.Event) error {
		return errors.New("not yet")
	})
	f.insert("ledger", "t", "evt_", 1)
	rec := &armed{fail: errors.New("s3 unreachable")}
	p := f.processorOn(processor.Config{RunFor: 0}, processor.Deps{Wake: rec})
	st, err := p.Invocation(f.ctx)
	// The event's failure is recorded; the invocation fails so that Lambda
	// retries it, and the retry arms again.
	if err == nil || st.Retried != 1 {
		t.Fatalf("invocation: %+v, %v", st, err)
	}
}
