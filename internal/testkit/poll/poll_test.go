package poll_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
)

func TestWait(t *testing.T) {
	t.Parallel()
	calls := 0
	ok, state := poll.Wait(time.Minute, func() (bool, string) {
		calls++
		return calls == 3, fmt.Sprint(calls)
	})
	if !ok || state != "3" || calls != 3 {
		t.Fatalf("done on the third call: ok=%v state=%q calls=%d", ok, state, calls)
	}
	start := time.Now()
	ok, state = poll.Wait(50*time.Millisecond, func() (bool, string) { return false, "still waiting" })
	if ok || state != "still waiting" || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("timeout: ok=%v state=%q after %v", ok, state, time.Since(start))
	}
	poll.Until(t, time.Second, func() (bool, string) { return true, "" })
}
