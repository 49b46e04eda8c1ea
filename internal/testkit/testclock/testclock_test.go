package testclock_test

import (
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testclock"
)

// TestClockMovesOnlyWhenTold: the time is the one set, moved by Advance
// and by each wait, which is over at once.
func TestClockMovesOnlyWhenTold(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := testclock.At(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now = %s, want %s", got, start)
	}
	if got := c.Advance(time.Minute); !got.Equal(start.Add(time.Minute)) {
		t.Errorf("Advance = %s, want a minute later", got)
	}
	select {
	case got := <-c.After(time.Hour):
		if want := start.Add(time.Hour + time.Minute); !got.Equal(want) || !c.Now().Equal(want) {
			t.Errorf("After ended at %s, clock at %s; want both %s", got, c.Now(), want)
		}
	default:
		t.Fatal("After's wait was not over at once")
	}
	c.Set(start)
	if got := c.Now(); !got.Equal(start) {
		t.Errorf("after Set, Now = %s, want %s", got, start)
	}
}
