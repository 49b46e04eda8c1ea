package migrator

import "time"

// Hooks for the tests of package migrator_test.

// SetAnswerWaits makes h wait between an answer's attempts on after (a
// test clock's After), rather than for real.
func SetAnswerWaits(h *Handler, after func(time.Duration) <-chan time.Time) { h.send.After = after }
