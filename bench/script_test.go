package main

import (
	"strings"
	"testing"
)

// TestInsertScript checks that the pgbench script is the receiver's
// statement with every parameter mapped.
func TestInsertScript(t *testing.T) {
	s, err := insertScript(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s, "$") || !strings.HasPrefix(s, `\set id random(1, 2)`) || !strings.HasSuffix(s, ";\n") {
		t.Fatalf("script:\n%s", s)
	}
	t.Log("\n" + s)
}

// TestStripeBody checks the generated bodies' size and determinism.
func TestStripeBody(t *testing.T) {
	for i := range 100 {
		b := dupBody(1, i)
		if len(b) != bodySize {
			t.Fatalf("body %d is %d bytes", i, len(b))
		}
		if string(b) != string(dupBody(1, i)) {
			t.Fatal("dupBody is not deterministic")
		}
	}
}
