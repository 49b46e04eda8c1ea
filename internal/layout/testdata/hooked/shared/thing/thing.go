// Package thing exports, for the export check's own test, one of each
// export the check must flag and one of each it must let be.
package thing

import (
	"fmt"
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

// Config is set by the product (Name, Mode), and by the test alone
// (After, a clock hook).
type Config struct {
	Name  string
	Mode  Mode
	After func(time.Duration) <-chan time.Time
}

// Thing is what New builds.
type Thing struct {
	cfg   Config
	ticks int
}

// New is called by the product.
func New(cfg Config) *Thing {
	return &Thing{cfg: cfg}
}

// Wait waits d on the configured clock; the product calls it.
func (t *Thing) Wait(d time.Duration) {
	after := t.cfg.After
	if after == nil {
		after = time.After
	}
	<-after(d)
	t.ticks++
}

// String implements fmt.Stringer: fmt calls it, nobody by name.
func (t *Thing) String() string {
	return fmt.Sprintf("%s (mode %d, %d ticks)", t.cfg.Name, t.cfg.Mode, t.ticks)
}

// Dump is called by a development tool alone.
func (t *Thing) Dump() string {
	return fmt.Sprintf("%+v", t.cfg)
}

// ResetForTest is a test hook: only the package's test calls it.
func ResetForTest(t *Thing) {
	t.ticks = 0
}
