// Package testclock is the clock tests give a component (processor.Deps's
// Clock): it reads a time the test sets and moves, so that leases pass and
// retries fall due without sleeping.
package testclock

import (
	"sync"
	"time"
)

// Clock is a settable clock, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// At returns a clock reading t until it is moved.
func At(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Advance moves the clock by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// After is a wait that is over at once, the clock moved by d: a component
// that waits on its clock (processor.Run between drains) never waits in
// a test, and its time passes as if it had.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	end := make(chan time.Time, 1)
	end <- c.Advance(max(d, 0))
	return end
}
