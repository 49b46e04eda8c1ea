// Package tier sorts tests into the inner loop and the rest. `make
// test-short` is the inner loop: every test `go test -short ./...` runs, on
// one shared server, from test binaries linked again only when a change
// reaches them (scripts/test-short.sh). ./scripts/short-tier.sh printed
// "23.8s wall" for it on two cores with a warm build cache, and 39.9 s for
// the plain `go test -short -count=1 ./...`, which links every test binary
// again first (CONTRIBUTING, Tests, quotes the whole line). A
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
