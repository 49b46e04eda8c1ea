package wake_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/invoketest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

func TestMain(m *testing.M) {
	invoketest.Use()
	m.Run()
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	clock   *clock
	bucket  blobstore.Config
	objects *blobstore.Store
	// calls receives each invocation's payload.
	calls chan string
	// function is the processor's registered name.
	function string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	if testing.Short() {
		t.Skip("needs versitygw")
	}
	srv := s3test.Server(t)
	f := &fixture{
		clock:  &clock{t: time.Date(2026, 12, 3, 10, 0, 30, 0, time.UTC)},
		bucket: s3test.Bucket(t, srv),
		calls:  make(chan string, 100),
	}
	f.objects = s3test.Open(t, f.bucket)
	f.function = invoketest.Function(t, "processor", func(_ context.Context, payload []byte) ([]byte, error) {
		f.calls <- string(payload)
		return []byte(`{}`), nil
	})
	return f
}

func (f *fixture) waker(t *testing.T, mode wake.Mode, function string) *wake.Waker {
	t.Helper()
	w, err := wake.Open(context.Background(), wake.Config{
		Mode: mode, Function: function, Bucket: f.bucket.Bucket, S3: f.bucket,
		Debounce: 500 * time.Millisecond, Sweep: 5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	wake.SetClock(w, f.clock.Now)
	return w
}

func (f *fixture) keys(t *testing.T, prefix string) []string {
	t.Helper()
	objs, err := f.objects.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	slices.Sort(keys)
	return keys
}

// waitCalls waits for n invocations, then checks that no more come.
func (f *fixture) waitCalls(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		select {
		case p := <-f.calls:
			if p != `{"wake":"receipt"}` {
				t.Errorf("invocation %d: payload %s", i, p)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d invocations", i, n)
		}
	}
	select {
	case <-f.calls:
		t.Fatalf("more than %d invocations", n)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestWakeInvokesTheProcessorDebounced(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := f.waker(t, wake.ModeInvoke, f.function)
	ctx := context.Background()

	if err := w.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	f.waitCalls(t, 1)
	// Within the debounce: no second invocation.
	f.clock.Add(499 * time.Millisecond)
	if err := w.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	f.waitCalls(t, 0)
	// At the debounce's end: a new one.
	f.clock.Add(time.Millisecond)
	if err := w.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	f.waitCalls(t, 1)
	inv := invoketest.Shared(t).Invocations()
	n := 0
	for _, i := range inv {
		if i.Function == f.function {
			n++
			if !i.Async {
				t.Errorf("the wake-up was not an Event invocation")
			}
		}
	}
	if n != 2 {
		t.Errorf("%d invocations recorded, want 2", n)
	}
}

func TestWakeArmsOneSweepPerWindow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := f.waker(t, wake.ModeInvoke, f.function)
	ctx := context.Background()
	// 10:00:30 + 5 min, rounded up: 10:06.
	if err := w.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(4 * time.Minute) // 10:04:30: the 10:06 sweep covers it
	if err := w.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"wake/arm/processor/2026-12-03T10:06:00Z"}
	if got := f.keys(t, wake.PrefixArm); !slices.Equal(got, want) {
		t.Fatalf("arming markers %v, want %v", got, want)
	}
	f.clock.Add(2 * time.Minute) // 10:06:30: past it, a new sweep
	if err := w.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	want = append(want, "wake/arm/processor/2026-12-03T10:12:00Z")
	if got := f.keys(t, wake.PrefixArm); !slices.Equal(got, want) {
		t.Fatalf("arming markers %v, want %v", got, want)
	}
	f.waitCalls(t, 3)
}

func TestWakeByMarkerObject(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := f.waker(t, wake.ModeObject, "")
	ctx := context.Background()
	for range 3 {
		if err := w.Wake(ctx); err != nil {
			t.Fatal(err)
		}
		f.clock.Add(200 * time.Millisecond)
	}
	// 0, 200 and 400 ms: the debounce lets the first through only.
	if got := f.keys(t, wake.PrefixNow); len(got) != 1 {
		t.Fatalf("markers %v, want one", got)
	}
	f.clock.Add(100 * time.Millisecond) // 600 ms
	if err := w.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	got := f.keys(t, wake.PrefixNow)
	if len(got) != 2 || got[0] == got[1] {
		t.Fatalf("markers %v, want two distinct", got)
	}
	f.waitCalls(t, 0)
}

func TestFailedWakeIsNotDebounced(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := f.waker(t, wake.ModeInvoke, "no-such-function")
	ctx := context.Background()
	err := w.Wake(ctx)
	if err == nil || !strings.Contains(err.Error(), "no-such-function") {
		t.Fatalf("Wake of a missing function: %v", err)
	}
	// The sweep is armed even so: it is what finds the event.
	if got := f.keys(t, wake.PrefixArm); len(got) != 1 {
		t.Fatalf("arming markers %v, want the sweep", got)
	}
	// A failed wake-up does not count: the next receipt tries again at once.
	f.clock.Add(time.Millisecond)
	if err := w.Wake(ctx); err == nil {
		t.Fatal("the second Wake was debounced after a failure")
	}
}

func TestArm(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := f.waker(t, wake.ModeNone, "")
	ctx := context.Background()
	at := time.Date(2026, 12, 3, 11, 20, 0, 1, time.FixedZone("CET", 3600))
	for range 2 {
		if err := w.Arm(ctx, wake.TargetArchiver, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Arm(ctx, wake.TargetProcessor, at); err != nil {
		t.Fatal(err)
	}
	want := []string{"wake/arm/archiver/2026-12-03T10:21:00Z", "wake/arm/processor/2026-12-03T10:21:00Z"}
	if got := f.keys(t, wake.PrefixArm); !slices.Equal(got, want) {
		t.Fatalf("markers %v, want %v", got, want)
	}
	if err := w.Arm(ctx, "migrator", at); err == nil {
		t.Fatal("Arm accepted an unknown target")
	}
	// ModeNone starts nothing (its sweep is still armed).
	if err := w.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	f.waitCalls(t, 0)
}

func TestArmKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2026, 12, 3, 10, 15, 0, 0, time.UTC), "wake/arm/processor/2026-12-03T10:15:00Z"},
		{time.Date(2026, 12, 3, 10, 15, 0, 1, time.UTC), "wake/arm/processor/2026-12-03T10:16:00Z"},
		{time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC), "wake/arm/processor/2027-01-01T00:00:00Z"},
	} {
		key := wake.ArmKey(wake.TargetProcessor, tc.at)
		if key != tc.want {
			t.Errorf("ArmKey(%s) = %s, want %s", tc.at, key, tc.want)
		}
		target, at, err := wake.ParseArmKey(key)
		if err != nil {
			t.Errorf("ParseArmKey(%s): %v", key, err)
			continue
		}
		field.Check(t, "ParseArmKey("+key+")",
			field.Eq("target", target, wake.TargetProcessor),
			field.Is("at", at, !at.Before(tc.at) && at.Sub(tc.at) < time.Minute, "within the minute from "+tc.at.String()),
		)
	}
	for _, key := range []string{
		"wake/now/123", "wake/arm/processor", "wake/arm/migrator/2026-12-03T10:15:00Z",
		"wake/arm/processor/2026-12-03T10:15:30Z", "wake/arm/processor/2026-12-03T11:15:00+01:00",
		"wake/arm/processor/tomorrow", "wake/arm/processor/2026-12-03T10:15:00Z/x", "wake/arm/processor/2026-12-03T10:15:00.000Z",
	} {
		if _, _, err := wake.ParseArmKey(key); err == nil {
			t.Errorf("ParseArmKey(%q) accepted it", key)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	c, err := wake.ConfigFromEnv(env())
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if !field.Check(t, "defaults",
		field.Eq("Mode", c.Mode, wake.ModeNone),
		field.Eq("Debounce", c.Debounce, wake.DefaultDebounce),
		field.Eq("Sweep", c.Sweep, wake.DefaultSweep),
	) {
		t.FailNow()
	}
	c, err = wake.ConfigFromEnv(env(wake.EnvMode, "invoke", wake.EnvFunction, "p", wake.EnvBucket, "b",
		"S3_ENDPOINT", "http://127.0.0.1:1", wake.EnvDebounce, "250ms", wake.EnvSweep, "10m"))
	if err != nil {
		t.Fatalf("set: %v", err)
	}
	if !field.Check(t, "set",
		field.Eq("Function", c.Function, "p"),
		field.Eq("S3.Bucket", c.S3.Bucket, "b"),
		field.Eq("S3.PathStyle", c.S3.PathStyle, true),
		field.Eq("Debounce", c.Debounce, 250*time.Millisecond),
		field.Eq("Sweep", c.Sweep, 10*time.Minute),
	) {
		t.FailNow()
	}
	for name, bad := range map[string]func(string) string{
		"invoke without a function": env(wake.EnvMode, "invoke"),
		"object without a bucket":   env(wake.EnvMode, "object"),
		"an unknown mode":           env(wake.EnvMode, "poll"),
		"a debounce too long":       env(wake.EnvDebounce, "1m"),
		"a sweep too short":         env(wake.EnvSweep, "10s"),
	} {
		if _, err := wake.ConfigFromEnv(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := wake.New(wake.Config{Mode: wake.ModeInvoke, Function: "p"}, nil, nil); err == nil {
		t.Error("New: invoke mode without an invoker accepted")
	}
	if _, err := wake.New(wake.Config{Mode: wake.ModeNone, Bucket: "b"}, nil, nil); err == nil {
		t.Error("New: a bucket without an S3 client accepted")
	}
}

// Concurrent receipts within the debounce send one wake-up: the window is
// taken before the invoke is sent, not after it returns.
func TestConcurrentWakesSendOne(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := f.waker(t, wake.ModeInvoke, f.function)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := w.Wake(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	f.waitCalls(t, 1)
}
