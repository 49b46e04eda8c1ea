// Package thing exports, for the export check's own test, one of each
// export the check must flag and one of each it must let be.
package thing

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Mode is an enumeration: the product names one value, and the others are
// the same set.
type Mode int

const (
	ModeFast Mode = iota
	ModeSafe
	ModeOff
)

// Config is set by the product (Name, Mode, and Batch through
// ConfigFromEnv), and by the test alone (After, a clock hook; Limit and
// Label). New defaults Batch, and the test-only fields, which does not
// make them the product's.
type Config struct {
	Name  string
	Mode  Mode
	After func(time.Duration) <-chan time.Time
	Batch int
	Limit int
	Label string
}

const maxLimit = 100

// ConfigFromEnv reads the settings a user sets in the environment.
func ConfigFromEnv() (Config, error) {
	var c Config
	if v := os.Getenv("THING_BATCH"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return Config{}, fmt.Errorf("THING_BATCH: %w", err)
		}
		c.Batch = n
	}
	return c, nil
}

// Thing is what New builds.
type Thing struct {
	cfg   Config
	ticks int
}

// New is called by the product.
func New(cfg Config) *Thing {
	if cfg.After == nil {
		cfg.After = time.After
	}
	cfg.Batch = cmp.Or(cfg.Batch, 10)
	if cfg.Limit <= 0 || cfg.Limit > maxLimit {
		cfg.Limit = maxLimit
	}
	cfg.Label = cmp.Or(cfg.Label, "thing")
	return &Thing{cfg: cfg}
}

// Wait waits d on the configured clock, at most Limit times; the product
// calls it.
func (t *Thing) Wait(d time.Duration) {
	if t.ticks >= t.cfg.Limit {
		return
	}
	<-t.cfg.After(d)
	t.ticks++
}

// String implements fmt.Stringer: fmt calls it, nobody by name.
func (t *Thing) String() string {
	return fmt.Sprintf("%s %s (mode %d, batch %d, %d ticks)", t.cfg.Label, t.cfg.Name, t.cfg.Mode, t.cfg.Batch, t.ticks)
}

// Dump is called by a development tool alone.
func (t *Thing) Dump() string {
	return fmt.Sprintf("%+v", t.cfg)
}

// ResetForTest is a test hook: only the package's test calls it.
func ResetForTest(t *Thing) {
	t.ticks = 0
}
