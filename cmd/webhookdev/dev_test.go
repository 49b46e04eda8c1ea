package main

import (
	"slices"
	"testing"
)

// TestWatchChildArgs: the stack --watch runs gets the flags given, but
// --watch itself (the child would supervise another child).
func TestWatchChildArgs(t *testing.T) {
	t.Parallel()
	cmd := newDevCmd()
	if err := cmd.ParseFlags([]string{"--watch", "--addr", "127.0.0.1:3100", "--samples", "--replay-unhandled=false"}); err != nil {
		t.Fatal(err)
	}
	got := childArgs(cmd.Flags())
	want := []string{"dev", "--addr=127.0.0.1:3100", "--replay-unhandled=false", "--samples=true"}
	if !slices.Equal(got, want) {
		t.Errorf("child args %q, want %q", got, want)
	}
}
