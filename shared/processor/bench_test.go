package processor_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
)

// BenchmarkDrain measures the drain with a ledger insert as the business
// logic: one processor, and four at once (ns/op is per event, all
// processors together). make bench compares the drain with River and the
// database's own limit, with fsync on and off; this is the quick look.
//
// The throwaway cluster runs with fsync=off, which hides commit costs: run
// it against a server that flushes its WAL too, with DATABASE_URL.
func BenchmarkDrain(b *testing.B) {
	b.Run("one", func(b *testing.B) {
		f, _ := benchSetup(b)
		p := f.processor(processor.Config{})
		b.ResetTimer()
		st, err := p.Drain(f.ctx)
		b.StopTimer()
		if err != nil || st.Handled != b.N {
			b.Fatalf("drain = %+v, %v", st, err)
		}
	})
	b.Run("x4", func(b *testing.B) {
		f, url := benchSetup(b)
		procs := make([]*processor.Processor, 4)
		for i := range procs {
			procs[i] = f.processorOn(processor.Config{}, processor.Deps{Pool: newPool(b, url)})
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
