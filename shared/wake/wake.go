// Package wake starts the stack's functions when there is work for them,
// so that nothing polls while the stack is idle: no schedule ticks, no
// processor waiting for events, no query that keeps the database awake.
//
// Three things wake a function:
//
//   - A receipt. After the receiver commits an event it calls Wake, which
//     starts the processor at once: an asynchronous lambda:Invoke of the
//     processor (ModeInvoke, through the stack's Lambda interface
//     endpoint), or, in the economy profile, which has no interface
//     endpoint, an empty marker object under wake/now/ in the control
//     bucket, which S3 announces to EventBridge and EventBridge turns into
//     an invocation of the processor (ModeObject).
//   - Time. Work that is due later (an event's next attempt after a
//     failure, a processor's lease that may have been abandoned, a body
//     old enough to archive) is armed with Arm: a marker under
//     wake/arm/<target>/<minute> that the relay function (shared/relay),
//     which runs outside the VPC, turns into a one-time EventBridge
//     Scheduler schedule invoking the target at that minute.
//   - The sweep. Wake also arms a processor wake-up Config.Sweep after the
//     receipt, so that an event whose immediate wake-up was lost (the
//     invoke failed, the processor crashed) waits minutes, not until the
//     next receipt.
//
// Wake-ups are debounced: a receiver that woke the processor less than
// Config.Debounce ago does not wake it again. That loses nothing as long as
// each processor invocation keeps draining for longer than the debounce
// after it starts (processor.Config.RunFor, which the template sets above
// WAKE_DEBOUNCE): the invocation a receiver started at t is still draining
// after t+Debounce, so it sees every event committed before then. Every
// marker and invocation is idempotent: an extra wake-up costs one empty
// drain.
//
// docs/processor.md ("Waking the processor") compares the mechanisms on
// latency, cost per event, cost at idle and failure modes.
package wake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Mode is how Wake starts the processor.
type Mode string

// The modes.
const (
	// ModeNone: Wake starts nothing (the dev stack's processor polls, and
	// tests drain by hand). Arm still writes its markers when a bucket is
	// configured.
	ModeNone Mode = "none"
	// ModeInvoke: an asynchronous lambda:Invoke of Config.Function.
	ModeInvoke Mode = "invoke"
	// ModeObject: a marker object under PrefixNow in Config.Bucket.
	ModeObject Mode = "object"
)

// Armer arranges for a function to be invoked later: what the processor
// and the archiver need of a Waker at an invocation's end.
type Armer interface {
	Arm(ctx context.Context, target Target, at time.Time) error
}

// Target is a function Arm can start later.
type Target string

// The targets.
const (
	TargetProcessor Target = "processor"
	TargetArchiver  Target = "archiver"
)

// Targets are the functions Arm can start, in a stable order.
var Targets = []Target{TargetProcessor, TargetArchiver}

// The control bucket's key layout: markers are empty objects, and a
// lifecycle rule deletes them after a day.
const (
	// PrefixNow holds immediate wake-ups of the processor (ModeObject):
	// wake/now/<unix nanoseconds>-<random>.
	PrefixNow = "wake/now/"
	// PrefixArm holds arming requests: wake/arm/<target>/<time>, the time
	// in RFC 3339, UTC, on a whole minute.
	PrefixArm = "wake/arm/"
)

// ArmKey is the marker key arming target at the minute at falls in or,
// when at is not on a whole minute, the next one: never early.
func ArmKey(target Target, at time.Time) string {
	return PrefixArm + string(target) + "/" + CeilMinute(at).Format(time.RFC3339)
}

// CeilMinute returns t rounded up to a whole minute, in UTC.
func CeilMinute(t time.Time) time.Time {
	t = t.UTC()
	m := t.Truncate(time.Minute)
	if m.Equal(t) {
		return m
	}
	return m.Add(time.Minute)
}

// ParseArmKey returns the target and time of an arming marker's key. It
// refuses anything else: another prefix, an unknown target, a time that is
// not RFC 3339 UTC on a whole minute.
func ParseArmKey(key string) (Target, time.Time, error) {
	rest, ok := strings.CutPrefix(key, PrefixArm)
	if !ok {
		return "", time.Time{}, fmt.Errorf("wake: key %q is not under %s", key, PrefixArm)
	}
	name, stamp, ok := strings.Cut(rest, "/")
	if !ok {
		return "", time.Time{}, fmt.Errorf("wake: key %q is not %s<target>/<time>", key, PrefixArm)
	}
	target := Target(name)
	if !target.valid() {
		return "", time.Time{}, fmt.Errorf("wake: key %q names no known target (%s)", key, targetNames())
	}
	at, err := time.Parse(time.RFC3339, stamp)
	// Exactly as ArmKey writes it: no fraction, no offset, zero seconds.
	if err != nil || at.UTC().Format(time.RFC3339) != stamp || !at.Equal(at.Truncate(time.Minute)) {
		return "", time.Time{}, fmt.Errorf("wake: key %q: the time is not RFC 3339 UTC on a whole minute", key)
	}
	return target, at, nil
}

func (t Target) valid() bool {
	for _, k := range Targets {
		if t == k {
			return true
		}
	}
	return false
}

func targetNames() string {
	names := make([]string, len(Targets))
	for i, t := range Targets {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// Invoker starts a function asynchronously (the Lambda client, in invoke
// mode).
type Invoker interface {
	InvokeAsync(ctx context.Context, function string, payload []byte) error
}

// Putter writes an object (the control bucket's blobstore.Store).
type Putter interface {
	PutMarker(ctx context.Context, key string) error
}

// Waker starts the processor after receipts and arms later wake-ups. Its
// methods are safe for concurrent use.
type Waker struct {
	cfg     Config
	invoker Invoker
	objects Putter
	// now is the clock: time.Now, but in the package's tests
	// (export_test.go), which step it through debounces and sweeps.
	now func() time.Time

	mu sync.Mutex
	// woke is when the last successful immediate wake-up was sent.
	woke time.Time
	// armed holds the markers written, so that one container writes each
	// at most once; entries past their time are forgotten.
	armed map[string]time.Time
	// sweep is the time of the latest sweep armed.
	sweep time.Time
}

// New returns a Waker over its transports. invoker is needed in ModeInvoke,
// objects whenever Config.Bucket is set (ModeObject and Arm).
func New(cfg Config, invoker Invoker, objects Putter) (*Waker, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Mode == ModeInvoke && invoker == nil {
		return nil, errors.New("wake: invoke mode without a Lambda client")
	}
	if cfg.Bucket != "" && objects == nil {
		return nil, errors.New("wake: a control bucket without an S3 client")
	}
	return &Waker{cfg: cfg, invoker: invoker, objects: objects, now: time.Now, armed: map[string]time.Time{}}, nil
}

// Wake starts the processor now, unless this Waker did so less than
// Config.Debounce ago, and makes sure a sweep is armed after now. The
// caller has committed what the processor is to find. An error means the
// immediate wake-up (or the sweep's marker) failed: the event is safe, and
// waits for the next wake-up, the sweep, or an operator.
func (w *Waker) Wake(ctx context.Context) error {
	now := w.now()
	var errs []error
	if w.cfg.Mode != ModeNone {
		if prev, ok := w.reserve(now); ok {
			if err := w.start(ctx, now); err != nil {
				errs = append(errs, err)
				w.release(now, prev)
			}
		}
	}
	if w.cfg.Bucket != "" && w.cfg.Sweep > 0 {
		w.mu.Lock()
		// A sweep armed at or after now covers this receipt: it runs after
		// the commit and drains everything due.
		covered := !w.sweep.Before(now)
		w.mu.Unlock()
		if !covered {
			at := CeilMinute(now.Add(w.cfg.Sweep))
			if err := w.Arm(ctx, TargetProcessor, at); err != nil {
				errs = append(errs, err)
			} else {
				w.mu.Lock()
				if at.After(w.sweep) {
					w.sweep = at
				}
				w.mu.Unlock()
			}
		}
	}
	return errors.Join(errs...)
}

// reserve takes the debounce window for a wake-up at now, before it is
// sent, so that concurrent callers send one; it returns the previous
// wake-up's time for release.
func (w *Waker) reserve(now time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.woke.IsZero() && now.Before(w.woke.Add(w.cfg.Debounce)) {
		return time.Time{}, false
	}
	prev := w.woke
	w.woke = now
	return prev, true
}

// release gives a failed wake-up's window back: the next receipt tries
// again at once.
func (w *Waker) release(now, prev time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.woke.Equal(now) {
		w.woke = prev
	}
}

// start sends one immediate wake-up.
func (w *Waker) start(ctx context.Context, now time.Time) error {
	switch w.cfg.Mode {
	case ModeInvoke:
		// The body says, in the woken function's log, what started it
		// (the relay's schedules send {"wake":"schedule"}); nothing else
		// reads it.
		if err := w.invoker.InvokeAsync(ctx, w.cfg.Function, []byte(`{"wake":"receipt"}`)); err != nil {
			return fmt.Errorf("wake: invoke %s: %w", w.cfg.Function, err)
		}
	case ModeObject:
		var r [4]byte
		_, _ = rand.Read(r[:])
		key := PrefixNow + strconv.FormatInt(now.UnixNano(), 10) + "-" + hex.EncodeToString(r[:])
		if err := w.objects.PutMarker(ctx, key); err != nil {
			return fmt.Errorf("wake: marker %s: %w", key, err)
		}
	}
	return nil
}

// Arm arranges for target to be invoked at the minute at falls in or the
// next one (never early; the relay starts a marker whose minute has passed
// at the next minute). One Waker writes each marker once; the relay treats
// a schedule that exists already as armed, so several containers arming
// the same minute make one schedule.
func (w *Waker) Arm(ctx context.Context, target Target, at time.Time) error {
	if !target.valid() {
		return fmt.Errorf("wake: arm: unknown target %q", target)
	}
	if w.cfg.Bucket == "" {
		return nil
	}
	key := ArmKey(target, at)
	now := w.now()
	w.mu.Lock()
	_, done := w.armed[key]
	for k, t := range w.armed {
		if t.Before(now) {
			delete(w.armed, k)
		}
	}
	w.mu.Unlock()
	if done {
		return nil
	}
	if err := w.objects.PutMarker(ctx, key); err != nil {
		return fmt.Errorf("wake: arm %s at %s: %w", target, CeilMinute(at).Format(time.RFC3339), err)
	}
	w.mu.Lock()
	w.armed[key] = CeilMinute(at)
	w.mu.Unlock()
	return nil
}
