// Package tier sorts tests into the inner loop and the rest. `go test
// -short ./...` is the inner loop, about a minute on two cores; a heavy
// test (one that builds and runs the Lambda binaries, starts the whole dev
// stack, archives ten thousand events, or kills processes and servers to
// prove nothing is lost) calls Heavy first and is skipped there. `make
// test` runs everything.
package tier

import "testing"

// Heavy skips t under -short, saying why it is heavy.
func Heavy(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip("heavy (" + why + "): skipped by -short; make test runs it")
	}
}
