package receiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/invoketest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// wakeFixture is a receiver whose wake-ups go through the real Lambda
// client to the Invoke stand-in, undebounced, so each one counts.
type wakeFixture struct {
	*fixture
	logs  *syncBuffer
	calls *atomic.Int64
}

func setupWake(t *testing.T, function string, sources ...string) *wakeFixture {
	t.Helper()
	calls := &atomic.Int64{}
	if function == "" {
		function = invoketest.Function(t, "processor", func(context.Context, []byte) ([]byte, error) {
			calls.Add(1)
			return nil, nil
		})
	}
	w, err := wake.Open(context.Background(), wake.Config{Mode: wake.ModeInvoke, Function: function})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	deps := receiver.Deps{Wake: w, Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	if len(sources) > 0 {
		if deps.Sources, err = source.Parse([]byte(sources[0])); err != nil {
			t.Fatal(err)
		}
	}
	f := setupOn(t, pgtest.Pool(t), receiver.Config{}, deps)
	return &wakeFixture{fixture: f, logs: logs, calls: calls}
}

// invocations waits for the stand-in to have run the function n times
// (Event invocations run after the answer), then checks it stays at n.
func (f *wakeFixture) invocations(n int64) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.calls.Load() < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if got := f.calls.Load(); got != n {
		f.t.Fatalf("%d wake-ups, want %d", got, n)
	}
}

func TestStoredEventsWakeTheProcessor(t *testing.T) {
	t.Parallel()
	f := setupWake(t, "")
	body := stripeEvent(t, "evt_wake")
	if a := f.do(f.signed("stripe", body, "")); a.Status != receiver.StatusAccepted {
		t.Fatalf("delivery: %+v", a)
	}
	f.invocations(1)
	// A redelivery wakes it again: the first wake-up may be what was lost.
	if a := f.do(f.signed("stripe", body, "")); a.Status != receiver.StatusDuplicate {
		t.Fatalf("redelivery: %+v", a)
	}
	f.invocations(2)
	// A refused request stores nothing and wakes nothing.
	r := f.signed("stripe", stripeEvent(t, "evt_forged"), "")
	r.Header.Set("Stripe-Signature", "t=1700000000,v1=00")
	if a := f.do(r); a.Code != 401 {
		t.Fatalf("forged: %+v", a)
	}
	f.invocations(2)
}

func TestFailedWakeStillAccepts(t *testing.T) {
	t.Parallel()
	f := setupWake(t, "no-such-processor")
	a := f.do(f.signed("stripe", stripeEvent(t, "evt_nowake"), ""))
	if a.Code != 200 || a.Status != receiver.StatusAccepted {
		t.Fatalf("answer with the wake-up failing: %+v", a)
	}
	if n := f.count(); n != 1 {
		t.Fatalf("%d events stored", n)
	}
	var found bool
	for _, l := range f.logs.lines() {
		if !bytes.Contains(l, []byte(`"wake_failed"`)) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		found = m["cause"] == string(inbox.CauseWakeFailed) && m["WakeFailed"] == 1.0 && m["source"] == "stripe"
	}
	if !found {
		t.Fatalf("no wake_failed line with its metric in %s", f.logs.lines())
	}
}

// A suspected replay stores nothing: there is nothing to wake for.
func TestSuspectedReplayWakesNothing(t *testing.T) {
	t.Parallel()
	f := setupWake(t, "", replaySources)
	rf := &replayFixture{fixture: f.fixture, logs: f.logs}
	body := []byte(`{"action":"opened","issue":{"id":1347,"number":1}}`)
	if a := rf.post("gh", body, "d-original", "issues"); a.Status != receiver.StatusAccepted {
		t.Fatalf("first delivery: %+v", a)
	}
	f.invocations(1)
	if a := rf.post("gh", body, "d-replay", "push"); a.Cause != inbox.CauseSuspectedReplay {
		t.Fatalf("replay: %+v", a)
	}
	f.invocations(1)
}
