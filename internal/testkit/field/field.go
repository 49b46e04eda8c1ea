// Package field reports which fields of a result are not what a test
// wants, each by name with what it holds and what was wanted. One
// condition over many fields that prints the whole value on failure
// leaves the reader to diff the struct by eye; a list of named fields
// says which one broke.
package field

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// A Want is one named expectation about a result.
type Want struct {
	name      string
	got, want any
	ok        bool
}

// Eq wants got == want.
func Eq[T comparable](name string, got, want T) Want {
	return Want{name: name, got: got, want: want, ok: got == want}
}

// Is wants ok, a condition that is not an equality (a time's Equal, a
// bound, a substring); want says in words what was wanted.
func Is(name string, got any, ok bool, want string) Want {
	return Want{name: name, got: got, want: wanted(want), ok: ok}
}

// wanted is a description of what was wanted, printed as written.
type wanted string

// Check reports, with t.Errorf, each field that is not as wanted,
// prefixed by what (the value checked), and says whether all were. A
// caller whose next lines depend on the value stops with t.FailNow when
// it returns false.
func Check(t testing.TB, what string, wants ...Want) bool {
	t.Helper()
	var bad []string
	for _, f := range wants {
		if !f.ok {
			bad = append(bad, fmt.Sprintf("%s = %s, want %s", f.name, show(f.got), show(f.want)))
		}
	}
	if len(bad) == 0 {
		return true
	}
	t.Errorf("%s: %s", what, strings.Join(bad, "; "))
	return false
}

// show prints a value as a reader compares it: strings quoted, pointers
// by what they point to, so that two addresses never stand for values.
func show(v any) string {
	if r := reflect.ValueOf(v); r.Kind() == reflect.Pointer {
		if r.IsNil() {
			return "nil"
		}
		return "&" + show(r.Elem().Interface())
	}
	switch x := v.(type) {
	case nil:
		return "nil"
	case wanted:
		return string(x)
	case string:
		return fmt.Sprintf("%q", x)
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprintf("%+v", v)
}

// Printed wants got and want to print alike (fmt.Sprint): for values of
// different types that mean the same, an untyped 2 and an int64's 2.
func Printed(name string, got, want any) Want {
	return Want{name: name, got: got, want: want, ok: fmt.Sprint(got) == fmt.Sprint(want)}
}

// Must is Check, and stops the test (t.FailNow) when a field is not as
// wanted: for a caller whose next lines depend on the value.
func Must(t testing.TB, what string, wants ...Want) {
	t.Helper()
	if !Check(t, what, wants...) {
		t.FailNow()
	}
}
