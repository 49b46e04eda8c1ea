package settings

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Env reads environment variables with a getenv and collects one problem
// per bad variable, each naming it, so a configuration reader reports every
// mistake at once rather than one per deploy. A variable that is unset or
// bad keeps the default it was read with.
type Env struct {
	getenv func(string) string
	errs   []error
}

// NewEnv returns an Env reading with getenv (os.Getenv, or a test's map).
func NewEnv(getenv func(string) string) *Env {
	return &Env{getenv: getenv}
}

// Err returns every problem recorded so far, joined; nil when none.
func (e *Env) Err() error { return errors.Join(e.errs...) }

// Add records a problem found elsewhere (a component's own rule), if err
// is not nil.
func (e *Env) Add(err error) {
	if err != nil {
		e.errs = append(e.errs, err)
	}
}

// Errorf records a problem; the message must name its variable.
func (e *Env) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf(format, args...))
}

// JoinUnique joins errs, each line once: components that share variables
// (the database's, the archive's) report one mistake as one line when
// their configurations are read together.
func JoinUnique(errs ...error) error {
	seen := map[string]bool{}
	var out []error
	for _, err := range errs {
		if err == nil {
			continue
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !seen[line] {
				seen[line] = true
				out = append(out, errors.New(line))
			}
		}
	}
	return errors.Join(out...)
}

// String returns the variable, or def when it is unset.
func (e *Env) String(name, def string) string {
	if v := e.getenv(name); v != "" {
		return v
	}
	return def
}

// Required returns the variable, recording a problem when it is unset.
func (e *Env) Required(name string) string {
	v := e.getenv(name)
	if v == "" {
		e.Errorf("%s is not set", name)
	}
	return v
}

// Int returns the variable as a positive whole number, or def.
func (e *Env) Int(name string, def int) int {
	v := e.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		e.Errorf("%s must be a positive whole number, got %q", name, v)
		return def
	}
	return n
}

// IntIn returns the variable as a number of unit (events, connections)
// from lo to hi, or def.
func (e *Env) IntIn(name string, def, lo, hi int, unit string) int {
	v := e.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		e.Errorf("%s must be a number of %s from %d to %d, got %q", name, unit, lo, hi, v)
		return def
	}
	return n
}

// Bytes returns the variable as a positive number of bytes, or def.
func (e *Env) Bytes(name string, def int64) int64 {
	v := e.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		e.Errorf("%s must be a positive number of bytes, got %q", name, v)
		return def
	}
	return n
}

// Duration returns the variable as a positive Go duration ("30s", "5m"),
// or def.
func (e *Env) Duration(name string, def time.Duration) time.Duration {
	v := e.getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		e.Errorf("%s must be a positive duration such as 30s or 5m, got %q", name, v)
		return def
	}
	return d
}

// DurationIn returns the variable as a Go duration from lo to hi, or def.
// Unlike Duration it may allow zero ("0" or "0s") when lo is zero: a
// setting that a zero turns off.
func (e *Env) DurationIn(name string, def, lo, hi time.Duration) time.Duration {
	v := e.getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < lo || d > hi {
		e.Errorf("%s must be a duration from %s to %s, got %q", name, lo, hi, v)
		return def
	}
	return d
}

// Age returns the variable as a positive Go duration or a whole number of
// days ("7d", the unit retention is thought in), or def.
func (e *Env) Age(name string, def time.Duration) time.Duration {
	v := e.getenv(name)
	if v == "" {
		return def
	}
	d, err := ParseAge(v)
	if err != nil || d <= 0 {
		e.Errorf("%s must be a positive duration such as 168h or 7d, got %q", name, v)
		return def
	}
	return d
}

// ParseAge reads a Go duration, or a whole number of days ("30d"): how
// ages, retention and time windows are written everywhere (ARCHIVE_MIN_AGE,
// webhookctl's --since, the console's windows).
func ParseAge(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, err
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}

// Bool returns the variable as true or false (strconv.ParseBool's
// spellings: 1, t, TRUE, ...), or def.
func (e *Env) Bool(name string, def bool) bool {
	v := e.getenv(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.Errorf("%s must be true or false, got %q", name, v)
		return def
	}
	return b
}

// OneOf returns the variable when it is one of allowed, or def when it is
// unset.
func (e *Env) OneOf(name, def string, allowed ...string) string {
	v := e.getenv(name)
	if v == "" {
		return def
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	e.Errorf("%s must be %s, got %q", name, orList(allowed), v)
	return def
}

// orList writes "a", "a or b", "a, b or c".
func orList(words []string) string {
	switch len(words) {
	case 0:
		return "set"
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// A Reader reads one part of a configuration from the environment into
// the value Into bound it to.
type Reader func(getenv func(string) string) error

// Into binds read, a component's ConfigFromEnv (or any reader of one
// value), to dst.
func Into[T any](dst *T, read func(getenv func(string) string) (T, error)) Reader {
	return func(getenv func(string) string) error {
		v, err := read(getenv)
		*dst = v
		return err
	}
}

// If is r when cond holds, else a reader that reads nothing: a part of a
// configuration only some deployments have (an archive's bucket).
func If(cond bool, r Reader) Reader {
	if cond {
		return r
	}
	return func(func(string) string) error { return nil }
}

// ReadAll runs every reader on getenv and reports their problems together,
// each line once (JoinUnique): what a function reads from its environment
// is several components' configurations, and a person fixing a deployment
// wants every mistake in one go.
func ReadAll(getenv func(string) string, readers ...Reader) error {
	errs := make([]error, len(readers))
	for i, r := range readers {
		errs[i] = r(getenv)
	}
	return JoinUnique(errs...)
}
