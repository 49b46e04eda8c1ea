package receiver

import (
	"testing"
	"time"
)

func TestSampler(t *testing.T) {
	t.Parallel()
	s := newSampler(time.Second)
	t0 := time.Unix(1_700_000_000, 0)
	steps := []struct {
		at         time.Duration
		key        string
		ok         bool
		suppressed int64
	}{
		{0, "a", true, 0},
		{100 * time.Millisecond, "a", false, 0},
		{900 * time.Millisecond, "a", false, 0},
		{0, "b", true, 0}, // keys are independent
		{time.Second, "a", true, 2},
		{1100 * time.Millisecond, "a", false, 0},
		{-time.Hour, "a", true, 1}, // the clock went back: let it through
	}
	for i, st := range steps {
		ok, n := s.allow(st.key, t0.Add(st.at))
		if ok != st.ok || n != st.suppressed {
			t.Fatalf("step %d: allow = %v, %d; want %v, %d", i, ok, n, st.ok, st.suppressed)
		}
	}
}
