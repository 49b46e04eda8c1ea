package receiver

import (
	"sync"
	"time"
)

// sampler lets one event per key through per interval and counts the rest,
// so the count is not lost: the next event let through carries it.
type sampler struct {
	mu    sync.Mutex
	every time.Duration
	keys  map[string]*sampled
}

type sampled struct {
	last       time.Time
	suppressed int64
}

func newSampler(every time.Duration) *sampler {
	return &sampler{every: every, keys: make(map[string]*sampled)}
}

// allow reports whether an event for key may be recorded at now, and if so
// how many were held back since the previous one. Keys come from a bounded
// set (configured sources, or "(unknown)", times cause codes), so the map
// stays small.
func (s *sampler) allow(key string, now time.Time) (bool, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.keys[key]
	if !ok {
		s.keys[key] = &sampled{last: now}
		return true, 0
	}
	// A clock that went backwards lets the event through rather than
	// holding every later one back until it catches up.
	if d := now.Sub(st.last); d >= 0 && d < s.every {
		st.suppressed++
		return false, 0
	}
	n := st.suppressed
	st.last, st.suppressed = now, 0
	return true, n
}
