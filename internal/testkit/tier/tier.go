// Package tier sorts tests into the inner loop and the rest. `go test
// -short ./...` (make test-short: on one shared server) is the inner loop:
// ./scripts/short-tier.sh printed "44.7s wall" for it on two cores with a
// warm build cache, linking included, and 27.9 s for the tests alone from
// prebuilt binaries (CONTRIBUTING, Tests, quotes the whole line). A
// heavy test (one that builds and runs the Lambda binaries, starts the
// whole dev stack or a cluster of its own, pushes thousands of events or
// megabytes of bodies through, or kills processes and servers to prove
// nothing is lost) calls Heavy first and is skipped there. `make test`
// runs everything.
package tier

import "testing"

// Heavy skips t under -short, saying why it is heavy.
func Heavy(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip("heavy (" + why + "): skipped by -short; make test runs it")
	}
}
