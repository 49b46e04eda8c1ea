package wake

import (
	"errors"
	"fmt"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
)

// The environment of every function that wakes another (the receiver, the
// processor, the archiver, the acting operator function).
const (
	// EnvMode is Config.Mode: none, invoke or object.
	EnvMode = "WAKE_MODE"
	// EnvFunction is Config.Function: the processor's name or ARN.
	EnvFunction = "WAKE_FUNCTION"
	// EnvBucket is Config.Bucket: the control bucket.
	EnvBucket = "WAKE_BUCKET"
	// EnvDebounce is Config.Debounce.
	EnvDebounce = "WAKE_DEBOUNCE"
	// EnvSweep is Config.Sweep.
	EnvSweep = "WAKE_SWEEP"
)

// Defaults and bounds.
const (
	// DefaultDebounce is Config.Debounce's default: at most two immediate
	// wake-ups a second per receiver environment, well under the
	// processor's default RunFor (1 s), which must exceed it.
	DefaultDebounce = 500 * time.Millisecond
	// MaxDebounce bounds it: a longer debounce needs processors that run
	// as long, for nothing.
	MaxDebounce = 10 * time.Second
	// DefaultSweep is Config.Sweep's default: an event whose wake-up was
	// lost is handled within about five minutes.
	DefaultSweep = 5 * time.Minute
	// MinSweep and MaxSweep bound it: EventBridge Scheduler's one-time
	// schedules are per minute, and beyond a day a lost wake-up would go
	// unnoticed for too long.
	MinSweep = time.Minute
	MaxSweep = 24 * time.Hour
)

// Config configures a Waker.
type Config struct {
	// Mode is how Wake starts the processor; default ModeNone.
	Mode Mode
	// Function is the processor's function name or ARN (ModeInvoke).
	Function string
	// Bucket is the control bucket: wake/now/ markers (ModeObject) and
	// arming markers. Empty, Arm does nothing (the dev stack).
	Bucket string
	// S3 is how the control bucket is reached (its Bucket is Bucket).
	S3 blobstore.Config
	// Debounce is the least time between two immediate wake-ups sent by
	// one Waker.
	Debounce time.Duration
	// Sweep is how long after a receipt the sweep that backs up its
	// wake-up runs; 0 arms none.
	Sweep time.Duration
}

// ConfigFromEnv reads a Waker's configuration with getenv, reporting every
// problem at once. Unset, WAKE_MODE is none: nothing is woken.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	e := settings.NewEnv(getenv)
	c := Config{
		Mode:     Mode(e.OneOf(EnvMode, string(ModeNone), string(ModeNone), string(ModeInvoke), string(ModeObject))),
		Function: e.String(EnvFunction, ""),
		Bucket:   e.String(EnvBucket, ""),
		Debounce: e.DurationIn(EnvDebounce, DefaultDebounce, 0, MaxDebounce),
		Sweep:    e.DurationIn(EnvSweep, DefaultSweep, MinSweep, MaxSweep),
	}
	if c.Bucket != "" {
		var err error
		c.S3, err = blobstore.ConnectionFromEnv(getenv)
		e.Add(err)
		c.S3.Bucket = c.Bucket
	}
	e.Add(c.check())
	return c, e.Err()
}

func (c Config) check() error {
	var errs []error
	switch c.Mode {
	case ModeNone, ModeInvoke, ModeObject:
	case "":
		return errors.New("wake: no mode (none, invoke or object)")
	default:
		return fmt.Errorf("wake: unknown mode %q", c.Mode)
	}
	if c.Mode == ModeInvoke && c.Function == "" {
		errs = append(errs, fmt.Errorf("%s=%s needs %s, the processor's function", EnvMode, ModeInvoke, EnvFunction))
	}
	if c.Mode == ModeObject && c.Bucket == "" {
		errs = append(errs, fmt.Errorf("%s=%s needs %s, the control bucket", EnvMode, ModeObject, EnvBucket))
	}
	if c.Debounce < 0 || c.Sweep < 0 {
		errs = append(errs, errors.New("wake: negative debounce or sweep"))
	}
	return errors.Join(errs...)
}
