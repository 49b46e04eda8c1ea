package storage

import (
	"errors"
	"time"
)

// Buckets is a window cut into equal time buckets, for counts over time
// (the console's charts): Since up to Until (excluded), Width each; the
// last bucket may be cut short by Until.
type Buckets struct {
	Since, Until time.Time
	Width        time.Duration
}

// errBadBuckets refuses a window that is empty or cut into nothing.
var errBadBuckets = errors.New("time buckets: want Since before Until and a Width of at least a second")

func (b Buckets) check() error {
	if !b.Since.Before(b.Until) || b.Width < time.Second {
		return errBadBuckets
	}
	return nil
}

// Index is the bucket t falls in, from 0; -1 outside the window.
func (b Buckets) Index(t time.Time) int {
	if t.Before(b.Since) || !t.Before(b.Until) || b.Width <= 0 {
		return -1
	}
	return int(t.Sub(b.Since) / b.Width)
}

// Len is how many buckets the window holds.
func (b Buckets) Len() int {
	if b.check() != nil {
		return 0
	}
	return int((b.Until.Sub(b.Since) + b.Width - 1) / b.Width)
}

// EventBucket counts the events stored (accepted) in one bucket, by
// their created_at.
type EventBucket struct {
	At    time.Time
	Count int64
}

// AttemptBucket counts the attempts that finished in one bucket:
// Processed (handled or unhandled), Failed, and Dead, the failed ones
// that moved their event to the dead letters.
type AttemptBucket struct {
	At                      time.Time
	Processed, Failed, Dead int64
}

// RejectionBucket counts one cause's rejections in one bucket, the
// suppressed ones each record stands for included.
type RejectionBucket struct {
	At    time.Time
	Cause string
	Count int64
}
