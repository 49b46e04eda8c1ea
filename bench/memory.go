package main

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// heapSampleEvery is how often heapSampler reads the heap.
const heapSampleEvery = 5 * time.Millisecond

// Heap metrics of runtime/metrics: the bytes of heap objects, garbage not
// yet swept included (what the process holds, and what GOMEMLIMIT weighs),
// and the live heap the last garbage collection marked.
const (
	metricHeapObjects = "/memory/classes/heap/objects:bytes"
	metricHeapLive    = "/gc/heap/live:bytes"
)

// HeapUse is the Go heap of this process around a run: right before it
// (after a garbage collection, so only what outlives a run counts), and the
// most it held during it.
type HeapUse struct {
	BaseBytes int64 `json:"heap_base_bytes"`
	// PeakBytes is the most the heap's objects took, garbage included;
	// PeakLiveBytes the largest live heap a collection found.
	PeakBytes     int64 `json:"heap_peak_bytes"`
	PeakLiveBytes int64 `json:"heap_peak_live_bytes"`
}

// heapSampler samples the heap until stopped.
type heapSampler struct {
	stop chan struct{}
	done sync.WaitGroup
	use  HeapUse
}

// sampleHeap collects garbage, reads the base and starts sampling.
func sampleHeap() *heapSampler {
	runtime.GC()
	s := &heapSampler{stop: make(chan struct{})}
	objects, live := readHeap()
	s.use = HeapUse{BaseBytes: objects, PeakBytes: objects, PeakLiveBytes: live}
	s.done.Go(func() {
		t := time.NewTicker(heapSampleEvery)
		defer t.Stop()
		for {
			objects, live := readHeap()
			s.use.PeakBytes = max(s.use.PeakBytes, objects)
			s.use.PeakLiveBytes = max(s.use.PeakLiveBytes, live)
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	})
	return s
}

// Stop ends the sampling and returns what it saw.
func (s *heapSampler) Stop() HeapUse {
	close(s.stop)
	s.done.Wait()
	return s.use
}

// readHeap returns the heap objects' bytes and the live heap's.
func readHeap() (objects, live int64) {
	samples := []metrics.Sample{{Name: metricHeapObjects}, {Name: metricHeapLive}}
	metrics.Read(samples)
	for i, s := range samples {
		if s.Value.Kind() != metrics.KindUint64 {
			continue
		}
		v := int64(s.Value.Uint64())
		if i == 0 {
			objects = v
		} else {
			live = v
		}
	}
	return objects, live
}
