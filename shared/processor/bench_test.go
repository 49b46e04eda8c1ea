package processor_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// BenchmarkApply measures what it costs to apply one event (a ledger
// insert as the business logic) in batches of 25, for the ways the drain
// could isolate events from each other. It is how the processor's design
// was chosen; docs/processor.md has the numbers.
//
//   - drain: the processor as built: the attempt counted in a transaction
//     of its own (asynchronous commit, one round trip), then the event's own
//     transaction.
//   - drain_x4: the same with 4 processors at once (ns/op is per event, all
//     processors together).
//   - own_tx: the event's own transaction, the attempt not counted apart
//     (what the drain would cost if a crash could spend no attempt).
//   - own_tx_sync_start: own_tx after counting the attempt in a plain
//     autocommit UPDATE, which waits for a WAL flush of its own.
//   - savepoints: one transaction per batch and a savepoint per event.
//
// The throwaway cluster runs with fsync=off, which hides commit costs: run
// it against a server that flushes its WAL too, with DATABASE_URL.
func BenchmarkApply(b *testing.B) {
	b.Run("drain", func(b *testing.B) {
		f, _ := benchSetup(b)
		p := f.processor(processor.Config{BatchSize: 25})
		b.ResetTimer()
		st, err := p.Drain(f.ctx)
		b.StopTimer()
		if err != nil || st.Handled != b.N {
			b.Fatalf("drain = %+v, %v", st, err)
		}
	})
	b.Run("drain_x4", func(b *testing.B) {
		f, url := benchSetup(b)
		procs := make([]*processor.Processor, 4)
		for i := range procs {
			procs[i] = f.processor(processor.Config{Pool: newPool(b, url), BatchSize: 25, Name: fmt.Sprint("p", i)})
		}
		var wg sync.WaitGroup
		var handled atomic.Int64
		b.ResetTimer()
		for _, p := range procs {
			wg.Go(func() {
				st, err := p.Drain(f.ctx)
				if err != nil {
					b.Error(err)
				}
				handled.Add(int64(st.Handled))
			})
		}
		wg.Wait()
		b.StopTimer()
		if handled.Load() != int64(b.N) {
			b.Fatalf("handled %d, want %d", handled.Load(), b.N)
		}
	})
	b.Run("own_tx", func(b *testing.B) { benchOwnTx(b, false) })
	b.Run("own_tx_sync_start", func(b *testing.B) { benchOwnTx(b, true) })
	b.Run("savepoints", func(b *testing.B) {
		f, _ := benchSetup(b)
		b.ResetTimer()
		n := 0
		for token := 0; ; token++ {
			batch := f.claim(token)
			if len(batch) == 0 {
				break
			}
			tx, err := f.store.Begin(f.ctx)
			if err != nil {
				b.Fatal(err)
			}
			for _, ev := range batch {
				sp, err := tx.Begin(f.ctx) // SAVEPOINT
				if err != nil {
					b.Fatal(err)
				}
				f.apply(sp, ev, token)
				if err := sp.Commit(f.ctx); err != nil { // RELEASE SAVEPOINT
					b.Fatal(err)
				}
				n++
			}
			if err := tx.Commit(f.ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if n != b.N {
			b.Fatalf("applied %d, want %d", n, b.N)
		}
	})
}

// benchOwnTx applies each event in its own transaction, after counting the
// attempt in an autocommit statement (syncStart) or not at all.
func benchOwnTx(b *testing.B, syncStart bool) {
	f, _ := benchSetup(b)
	b.ResetTimer()
	n := 0
	for token := 0; ; token++ {
		batch := f.claim(token)
		if len(batch) == 0 {
			break
		}
		for _, ev := range batch {
			if syncStart {
				if _, err := f.pool.Exec(f.ctx, `UPDATE webhook_events SET attempts = attempts + 1 WHERE id = $1`, ev.ID); err != nil {
					b.Fatal(err)
				}
			}
			tx, err := f.store.Begin(f.ctx)
			if err != nil {
				b.Fatal(err)
			}
			f.apply(tx, ev, token)
			if err := tx.Commit(f.ctx); err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	b.StopTimer()
	if n != b.N {
		b.Fatalf("applied %d, want %d", n, b.N)
	}
}

// benchSetup makes a database holding b.N due events, and returns a fixture
// whose pool has the processor's session settings, and the database's URL.
func benchSetup(b *testing.B) (*fixture, string) {
	b.Helper()
	url := pgtest.URL(b)
	f := setupOn(b, newPool(b, url))
	f.reg.HandleFunc(processor.Source("ledger"), processor.AnyType, writeLedger)
	f.insert("ledger", "ledger.write", "evt_", b.N)
	return f, url
}

func (f *fixture) claim(token int) []storage.ClaimedEvent {
	now := f.clock.Now()
	batch, err := f.store.EventClaim(f.ctx, storage.EventClaimParams{
		Now: now, Limit: 25, LockedUntil: now.Add(time.Minute), Token: fmt.Sprint("bench#", token),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return batch
}

// apply is the work of one event inside tx (a transaction or savepoint).
func (f *fixture) apply(tx *storage.Tx, ev storage.ClaimedEvent, token int) {
	ok, err := tx.EventMarkProcessed(f.ctx, storage.EventMarkProcessedParams{
		ID: ev.ID, Token: fmt.Sprint("bench#", token), Now: f.clock.Now(), Outcome: inbox.OutcomeHandled,
	})
	if err != nil || !ok {
		f.t.Fatalf("mark = %v, %v", ok, err)
	}
	if _, err := tx.Pgx().Exec(f.ctx, `INSERT INTO ledger (event_pk, attempt) VALUES ($1, 1)`, ev.ID); err != nil {
		f.t.Fatal(err)
	}
}
