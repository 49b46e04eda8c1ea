package thing_test

import (
	"fmt"
	"testing"
	"time"

	"example.com/hooked/shared/thing"
)

func TestWait(t *testing.T) {
	now := make(chan time.Time, 1)
	th := thing.New(thing.Config{
		Mode:  thing.ModeSafe,
		After: func(time.Duration) <-chan time.Time { now <- time.Time{}; return now },
		Limit: 1,
		Label: "test",
	})
	th.Wait(time.Hour)
	thing.ResetForTest(th)
	if got := fmt.Sprint(th); got != "test  (mode 1, batch 10, 0 ticks)" {
		t.Errorf("fmt.Sprint(th) = %q", got)
	}
}
