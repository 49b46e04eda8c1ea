package processor

import (
	"math/rand/v2"
	"time"
)

// Backoff spaces the attempts of a failing event: exponential, capped, with
// full jitter. The delay after attempt n (from 1) is uniform in
// [0, min(Cap, Base·2^(n-1))). Full jitter ("Exponential Backoff And
// Jitter", AWS Architecture Blog) spreads the retries of events that failed
// together, say during an outage of the service a handler calls, instead of
// sending them back in waves.
type Backoff struct {
	Base time.Duration
	Cap  time.Duration
	// Rand returns a number in [0, 1); nil means math/rand/v2.Float64.
	// Tests inject a fixed source.
	Rand func() float64
}

// Ceiling returns the upper bound of the delay after attempt n:
// min(Cap, Base·2^(n-1)), without overflow for any n.
func (b Backoff) Ceiling(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := b.Base
	for i := 1; i < attempt && d < b.Cap; i++ {
		if d > b.Cap-d { // 2d > Cap, written so that it cannot overflow
			return b.Cap
		}
		d *= 2
	}
	return min(d, b.Cap)
}

// Delay returns the wait after attempt n: a uniform draw below Ceiling(n).
func (b Backoff) Delay(attempt int) time.Duration {
	r := b.Rand
	if r == nil {
		r = rand.Float64
	}
	return time.Duration(r() * float64(b.Ceiling(attempt)))
}
