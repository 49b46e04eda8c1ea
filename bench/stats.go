package main

import (
	"math"
	"slices"
	"time"
)

// Run is one measured run of one system.
type Run struct {
	Events       int     `json:"events"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	// P50Ms and P99Ms are per-request (or per-transaction) latencies;
	// zero where there is no per-event latency (the drains).
	P50Ms float64 `json:"p50_ms,omitempty"`
	P99Ms float64 `json:"p99_ms,omitempty"`
	// Costs per 1 000 events: CPU of this Go process, of the Postgres
	// server, and of the client program (pgbench), in milliseconds; WAL
	// written per event in bytes.
	SelfCPUMsPerK     float64 `json:"self_cpu_ms_per_1000,omitempty"`
	PostgresCPUMsPerK float64 `json:"postgres_cpu_ms_per_1000,omitempty"`
	ClientCPUMsPerK   float64 `json:"client_cpu_ms_per_1000,omitempty"`
	WALBytesPerEvent  float64 `json:"wal_bytes_per_event,omitempty"`
	// OtherCores is the CPU the rest of the machine (other people's work)
	// used during the run, in cores: the noise.
	OtherCores float64 `json:"other_cores"`
	// Heap is this process's Go heap around the run, where the system
	// measured runs in it (the processors, River); nil otherwise.
	Heap *HeapUse `json:"heap,omitempty"`
}

// costs fills the run's cost figures from the usage before and after it;
// client is the CPU time of a client process (pgbench), zero for none.
func (r *Run) costs(before, after Usage, client time.Duration) {
	if r.Events == 0 {
		return
	}
	k := float64(r.Events) / 1000
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	self := after.SelfCPU - before.SelfCPU
	pg := after.PostgresCPU - before.PostgresCPU
	if client == 0 {
		r.SelfCPUMsPerK = ms(self) / k
	} else {
		r.ClientCPUMsPerK = ms(client) / k
	}
	r.PostgresCPUMsPerK = ms(pg) / k
	r.WALBytesPerEvent = float64(after.WALBytes-before.WALBytes) / float64(r.Events)
	wall := after.At.Sub(before.At)
	if wall > 0 {
		// The bench process is counted whether it measured or idled
		// (waiting on pgbench costs next to nothing).
		other := after.MachineBusy - before.MachineBusy - self - pg - client
		r.OtherCores = math.Max(0, float64(other)/float64(wall))
	}
}

// Measure is the runs of one figure, summed up by their median.
type Measure struct {
	Runs []Run `json:"runs"`
	// Median, Min and Max are of events per second over the runs.
	Median float64 `json:"events_per_sec_median"`
	Min    float64 `json:"events_per_sec_min"`
	Max    float64 `json:"events_per_sec_max"`
	// P50Ms and P99Ms are the medians of the runs' percentiles.
	P50Ms float64 `json:"p50_ms_median,omitempty"`
	P99Ms float64 `json:"p99_ms_median,omitempty"`
	// Cost medians per 1 000 events (see Run).
	SelfCPUMsPerK     float64 `json:"self_cpu_ms_per_1000,omitempty"`
	PostgresCPUMsPerK float64 `json:"postgres_cpu_ms_per_1000,omitempty"`
	ClientCPUMsPerK   float64 `json:"client_cpu_ms_per_1000,omitempty"`
	WALBytesPerEvent  float64 `json:"wal_bytes_per_event,omitempty"`
	OtherCoresMax     float64 `json:"other_cores_max"`
	// HeapPeakBytes is the most heap any run held, HeapPeakLiveBytes the
	// largest live heap, and HeapBaseBytes the heap before that run.
	HeapPeakBytes     int64 `json:"heap_peak_bytes,omitempty"`
	HeapPeakLiveBytes int64 `json:"heap_peak_live_bytes,omitempty"`
	HeapBaseBytes     int64 `json:"heap_base_bytes,omitempty"`
}

// CPUPerEvent is the CPU, in microseconds, that one event cost all the
// processes of its side: this program or pgbench, and Postgres.
func (m Measure) CPUPerEvent() float64 {
	return m.SelfCPUMsPerK + m.ClientCPUMsPerK + m.PostgresCPUMsPerK
}

// cpuRatio is the ratio of throughputs the CPU per event predicts on the
// same cores: theirs/ours of the CPU per event.
func cpuRatio(ours, theirs Measure) float64 {
	return ratio(theirs.CPUPerEvent(), ours.CPUPerEvent())
}

// summarize computes a Measure from runs.
func summarize(runs []Run) Measure {
	m := Measure{Runs: runs}
	if len(runs) == 0 {
		return m
	}
	pick := func(f func(Run) float64) []float64 {
		out := make([]float64, len(runs))
		for i, r := range runs {
			out[i] = f(r)
		}
		return out
	}
	eps := pick(func(r Run) float64 { return r.EventsPerSec })
	m.Median = median(eps)
	m.Min, m.Max = slices.Min(eps), slices.Max(eps)
	m.P50Ms = median(pick(func(r Run) float64 { return r.P50Ms }))
	m.P99Ms = median(pick(func(r Run) float64 { return r.P99Ms }))
	m.SelfCPUMsPerK = median(pick(func(r Run) float64 { return r.SelfCPUMsPerK }))
	m.PostgresCPUMsPerK = median(pick(func(r Run) float64 { return r.PostgresCPUMsPerK }))
	m.ClientCPUMsPerK = median(pick(func(r Run) float64 { return r.ClientCPUMsPerK }))
	m.WALBytesPerEvent = median(pick(func(r Run) float64 { return r.WALBytesPerEvent }))
	m.OtherCoresMax = slices.Max(pick(func(r Run) float64 { return r.OtherCores }))
	for _, r := range runs {
		if r.Heap != nil && r.Heap.PeakBytes > m.HeapPeakBytes {
			m.HeapPeakBytes, m.HeapBaseBytes = r.Heap.PeakBytes, r.Heap.BaseBytes
		}
		if r.Heap != nil {
			m.HeapPeakLiveBytes = max(m.HeapPeakLiveBytes, r.Heap.PeakLiveBytes)
		}
	}
	return m
}

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile returns the p-th percentile (0..100) of sorted latencies, by
// the nearest-rank method, in milliseconds.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return float64(sorted[rank-1]) / float64(time.Millisecond)
}

// ratio returns a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
