#!/usr/bin/env bash
# Times the inner loop, `go test -short -count=1 ./...`, and prints one
# line: the wall time and the five slowest packages. CONTRIBUTING and
# internal/testkit/tier quote that line; run this again after adding or
# moving a test and update them if the figure moved.
#
# Warm: compilation is not measured. The script first runs the same
# packages with `-run '^$'` (compiles and links every test binary, runs no
# test), so the timed run finds every binary in Go's build cache and
# measures the tests alone, as an edit-and-rerun loop does. -count=1 keeps
# the test results themselves out of the cache.
#
# A package's time is the one `go test` prints on its `ok` line (the test
# binary's run); packages run in parallel (-p is the number of CPUs), so the
# times add up to more than the wall time.
#
#   ./scripts/short-tier.sh            # the whole module
#   ./scripts/short-tier.sh ./shared/... # a part of it
#   VERBOSE=1 ./scripts/short-tier.sh  # and the go test output as it runs
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
[ $# -gt 0 ] || set -- ./...

"$GO" test -short -count=1 -run '^$' "$@" >/dev/null

out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s.%N)
status=0
if [ -n "${VERBOSE:-}" ]; then
	"$GO" test -short -count=1 "$@" 2>&1 | tee "$out" || status=$?
else
	"$GO" test -short -count=1 "$@" >"$out" 2>&1 || status=$?
fi
end=$(date +%s.%N)

if [ "$status" -ne 0 ]; then
	[ -n "${VERBOSE:-}" ] || grep -v '^ok ' "$out" >&2 || true
	echo "short-tier: go test -short failed (exit $status)" >&2
fi

module=$("$GO" list -m)
slowest=$(awk -v mod="$module/" '$1 == "ok" && $3 ~ /s$/ {
		pkg = $2; sub("^" mod, "", pkg); t = $3; sub(/s$/, "", t)
		printf "%s %s\n", t, pkg
	}' "$out" | sort -rn | head -5 | awk '{ printf "%s%s %.1fs", (NR > 1 ? ", " : ""), $2, $1 }')
wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
printf 'go test -short ./... (warm, %d CPUs): %ss wall; slowest: %s\n' \
	"$(nproc)" "$wall" "$slowest"
exit "$status"
