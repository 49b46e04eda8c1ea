#!/usr/bin/env bash
# Times the inner loop and prints one line with its figures, all measured
# here with a warm build cache:
#
#   - `make test-short` as a developer runs it again and again:
#     ./scripts/test-short.sh with its test binaries up to date (the script
#     runs it once first, untimed). Every test runs; only linking is saved.
#   - the plain `go test -short -count=1 ./...`, which links every
#     package's test binary again before running it (go test keeps
#     compiled packages in the build cache, not linked test binaries).
#   - the time linking every test binary afresh takes (into an empty
#     folder, as many at a time as CPUs): what a change to a package that
#     every test links (shared/storage, say) costs on top of the first
#     figure.
#
# and the five slowest packages of the timed `make test-short` run.
# CONTRIBUTING and internal/testkit/tier quote that line; run this again
# after adding or moving a test and update them if the figures moved.
#
# All runs have every package on one throwaway PostgreSQL server, as
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

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

"$GO" test -short -count=1 -run '^$' "$@" >/dev/null
# Brings the test binaries up to date, running the tests once.
./scripts/test-short.sh "$@" >"$work/first.out" 2>&1 || { cat "$work/first.out" >&2; echo "short-tier: make test-short failed" >&2; status=1; }

start=$(now)
./scripts/test-short.sh "$@" >"$work/warm.out" 2>&1 || { cat "$work/warm.out" >&2; echo "short-tier: make test-short failed" >&2; status=1; }
warm=$(since "$start")

start=$(now)
"$GO" test -short -count=1 "$@" >"$work/plain.out" 2>&1 || { grep -v '^ok ' "$work/plain.out" >&2 || true; echo "short-tier: go test -short failed" >&2; status=1; }
plain=$(since "$start")

# Linking alone, into an empty folder: every package is compiled already.
"$GO" list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' "$@" >"$work/pkgs"
packages=$(wc -l <"$work/pkgs")
start=$(now)
awk '{ n = $1; gsub("/", "_", n); print n, $1 }' "$work/pkgs" |
	xargs -P "$cpus" -L1 sh -c '"$0" test -c -ldflags="-s -w" -o "$1/$2.test" "$3"' "$GO" "$work" 2>&1 |
	sed 's/^/short-tier: link: /' >&2
link=$(since "$start")

module=$("$GO" list -m)
slowest=$(awk -v mod="$module/" '$1 == "ok" { p = $2; sub("^" mod, "", p); t = $3; sub("s$", "", t); print t, p }' "$work/warm.out" |
	sort -rn | head -5 | awk '{ printf "%s%s %.1fs", (NR > 1 ? ", " : ""), $2, $1 }')
printf 'make test-short %s (warm: build cache and test binaries up to date, %d CPUs, one shared Postgres server): %ss wall; plain go test -short -count=1: %ss wall; linking the %d test binaries afresh: %ss; slowest: %s\n' \
	"$*" "$cpus" "$warm" "$plain" "$packages" "$link" "$slowest"
exit "$status"
