#!/usr/bin/env bash
# Runs every fuzz target of shared/source briefly (FUZZTIME each, default
# 30000 executions) and fails if any finds a failure. `make test` calls it;
# run it longer (e.g. FUZZTIME=2000000x, or FUZZTIME=5m) after touching a
# verifier.
#
# The default is a count, not a duration: on Go 1.26, a duration-based
# -fuzztime can end in a spurious "context deadline exceeded" failure with
# no failing input when the machine is loaded (golang/go#75804, fixed in Go
# 1.27); a count has no deadline to race.
#
# A failing input is written by go test to
# shared/source/testdata/fuzz/<Target>/: fix the bug, keep that file as a
# regression seed. Interesting inputs found on the way go to Go's cache,
# not to the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30000x}
PKG=./shared/source
TARGETS=(
	FuzzStripeVerify
	FuzzStandardVerify
	FuzzGitHubVerify
	FuzzSquareVerify
	FuzzShopifyVerify
	FuzzHMACVerify
	FuzzBodyFields
)

# Every Fuzz function of the package must be in the list: a new target
# that is never run would be a silent gap.
declared=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$PKG"/*_test.go | sed 's/^func //' | sort)
listed=$(printf '%s\n' "${TARGETS[@]}" | sort)
if [[ "$declared" != "$listed" ]]; then
	echo "fuzz-smoke: the TARGETS list does not match the Fuzz functions of $PKG:" >&2
	diff <(echo "$listed") <(echo "$declared") >&2 || true
	exit 1
fi

failed=()
for target in "${TARGETS[@]}"; do
	echo "fuzz-smoke: $target for $FUZZTIME"
	if ! "$GO" test "$PKG" -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME"; then
		failed+=("$target")
	fi
done
if ((${#failed[@]})); then
	echo "fuzz-smoke: FAILED: ${failed[*]} (the failing inputs are in $PKG/testdata/fuzz/)" >&2
	exit 1
fi
echo "fuzz-smoke: ${#TARGETS[@]} targets, no failure"
