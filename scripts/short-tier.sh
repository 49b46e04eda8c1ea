#!/usr/bin/env bash
# Times the inner loop, `go test -short ./...`, and prints one line with
# two figures, both measured here, with a warm build cache:
#
#   - the plain `go test -short -count=1 ./...` wall time. `go test` links
#     every package's test binary again on each run (the build cache keeps
#     compiled packages, not linked binaries), so this includes linking.
#   - the wall time of running prebuilt test binaries (`go test -c`), with
#     -test.short, in each package's folder, as many at a time as `go test`
#     runs (-p, the number of CPUs): the tests alone, without linking. The
#     time taken to link them is printed beside it.
#
# and the five slowest packages of the prebuilt run. CONTRIBUTING and
# internal/testkit/tier quote that line; run this again after adding or
# moving a test and update them if the figures moved.
#
# Both runs have every package on one throwaway PostgreSQL server, as
# `make test-short` runs them (`webhookdev postgres`, which sets
# DATABASE_URL): the script starts it once, outside the timed runs, rather
# than each test binary starting a cluster of its own.
#
# Compilation is not measured: the script first runs the packages with
# `-run '^$'` (compiles and links every test binary, runs no test). A
# package's time is its binary's run, and packages run in parallel, so the
# times add up to more than the wall time.
#
#   ./scripts/short-tier.sh              # the whole module
#   ./scripts/short-tier.sh ./shared/... # a part of it
#   VERBOSE=1 ./scripts/short-tier.sh    # and the go test output as it runs
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
[ $# -gt 0 ] || set -- ./...
cpus=$(nproc)

if [ -z "${SHORT_TIER_SHARED_SERVER:-}" ]; then
	bin=$(mktemp -d)
	status=0
	"$GO" build -o "$bin/webhookdev" ./cmd/webhookdev || status=$?
	[ "$status" -ne 0 ] || SHORT_TIER_SHARED_SERVER=1 "$bin/webhookdev" postgres -- ./scripts/short-tier.sh "$@" || status=$?
	rm -rf "$bin"
	exit "$status"
fi
module=$("$GO" list -m)

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

"$GO" test -short -count=1 -run '^$' "$@" >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The plain run.
start=$(now)
status=0
if [ -n "${VERBOSE:-}" ]; then
	"$GO" test -short -count=1 "$@" 2>&1 | tee "$work/plain.out" || status=$?
else
	"$GO" test -short -count=1 "$@" >"$work/plain.out" 2>&1 || status=$?
fi
plain=$(since "$start")
if [ "$status" -ne 0 ]; then
	[ -n "${VERBOSE:-}" ] || grep -v '^ok ' "$work/plain.out" >&2 || true
	echo "short-tier: go test -short failed (exit $status)" >&2
fi

# The packages with tests, as "name path folder": path is the import path
# below the module, name that path with / as _ (a file name, unique where
# the last element is not).
"$GO" list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "$@" |
	awk -v mod="$module/" 'NF == 2 { p = $1; sub("^" mod, "", p); n = p; gsub("/", "_", n); print n, p, $1, $2 }' >"$work/pkgs"

# Linking alone: every package is compiled already. -s -w is what `go
# test` links its test binaries with.
start=$(now)
awk '{ print $1, $3 }' "$work/pkgs" |
	xargs -P "$cpus" -L1 sh -c '"$0" test -c -ldflags="-s -w" -o "$1/$2.test" "$3"' "$GO" "$work" 2>&1 |
	sed 's/^/short-tier: link: /' >&2
link=$(since "$start")

# The prebuilt binaries, each in its package's folder as go test runs it.
start=$(now)
awk '{ print $1, $4 }' "$work/pkgs" |
	xargs -P "$cpus" -L1 sh -c '
		s=$(date +%s.%N)
		rc=0
		(cd "$2" && "$0/$1.test" -test.short -test.count=1 >"$0/$1.out" 2>&1) || rc=$?
		awk -v n="$1" -v rc="$rc" -v a="$s" -v b="$(date +%s.%N)" "BEGIN { printf \"%s %d %.2f\\n\", n, rc, b - a }" >>"$0/times"
	' "$work" || true
prebuilt=$(since "$start")

while read -r name rc _; do
	[ "$rc" -eq 0 ] && continue
	cat "$work/$name.out" >&2
	echo "short-tier: prebuilt $(awk -v n="$name" '$1 == n { print $2 }' "$work/pkgs") failed (exit $rc)" >&2
	status=1
done <"$work/times"

slowest=$(awk 'NR == FNR { path[$1] = $2; next } { print $3, path[$1] }' "$work/pkgs" "$work/times" |
	sort -rn | head -5 | awk '{ printf "%s%s %.1fs", (NR > 1 ? ", " : ""), $2, $1 }')
printf 'go test -short %s (warm, %d CPUs, one shared Postgres server): %ss wall; prebuilt test binaries, %d at a time: %ss wall (linking them: %ss); slowest: %s\n' \
	"$*" "$cpus" "$plain" "$cpus" "$prebuilt" "$link" "$slowest"
exit "$status"
