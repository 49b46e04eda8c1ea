package wake

import "time"

// SetClock makes w read the time from now, so that a test steps it.
func SetClock(w *Waker, now func() time.Time) {
	w.now = now
}
