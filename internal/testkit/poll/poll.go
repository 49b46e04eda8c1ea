// Package poll waits, in tests, for a condition that another goroutine or
// process makes true: a server that starts, a row that a processor writes,
// a lock another transaction waits on. It is the one way tests wait; it
// never stands in for time passing (tests move an injected clock for that).
package poll

import (
	"testing"
	"time"
)

// Until calls cond until it reports done, first at once and then at
// intervals growing from 5 ms to 100 ms, and fails t when timeout passes
// first. cond's state describes what it saw, and is in the failure message,
// so a timeout says what was wrong rather than only that it was.
func Until(t testing.TB, timeout time.Duration, cond func() (done bool, state string)) {
	t.Helper()
	if ok, state := Wait(timeout, cond); !ok {
		t.Fatalf("poll: not done after %s: %s", timeout, state)
	}
}

// Wait is Until for a caller that decides itself what a timeout means (a
// skip, say): it reports whether cond was done in time, and its last state.
func Wait(timeout time.Duration, cond func() (done bool, state string)) (bool, string) {
	deadline := time.Now().Add(timeout)
	wait := 5 * time.Millisecond
	for {
		done, state := cond()
		if done {
			return true, state
		}
		if time.Now().After(deadline) {
			return false, state
		}
		time.Sleep(wait) // polling a condition, not waiting out a delay
		wait = min(2*wait, 100*time.Millisecond)
	}
}
