#!/usr/bin/env bash
# The inner loop (make test-short): every package's tests under -short, as
# `go test -short ./...` runs them, from test binaries kept between runs
# and linked again only when what they are made of changed.
#
# Why not plain `go test -short ./...`: with a test's result not cached
# (a change, or -count=1), `go test` links its test binary again before
# running it, even when nothing the binary is made of changed, and on a
# 2-core machine linking the module's 63 test binaries takes longer than
# running their tests. `go test -c -o` leaves a binary that is up to date
# (the build ID it carries matches its inputs) where it is, so this keeps
# them in .local/test-short/ (about 800 MB) and only the binaries that a
# change reaches are linked again. Every test still runs on every call: no
# result is taken from a cache.
#
# It builds every binary first (a compile error stops the run before any
# test), then runs them in their packages' folders, as `go test` does, with
# `go test`'s default timeout, printing "ok" or the test output and "FAIL"
# for each package as it ends. The exit status is 1 when a package failed.
# One more binary runs at a time than there are CPUs (TEST_SHORT_PARALLEL
# to change it): the tests spend part of their time waiting on the
# Postgres server, which shares the CPUs (on 2 CPUs the whole tier took
# 27.2 s at 2, 25.9 s at 3 and 27.1 s at 4). The slowest packages of the
# last run start first, so that none of them is left running alone at
# the end; their times are kept beside the binaries.
# `go test` also runs a few vet checks before testing; `make lint` runs
# all of go vet.
#
#   ./scripts/test-short.sh                        # every package
#   ./scripts/test-short.sh ./shared/...           # some
#   ./scripts/test-short.sh ./shared/storage -- -test.run Conformance -test.v
#
# Run it under `webhookdev postgres --` (make test-short does) so that every
# package shares one throwaway server instead of starting a cluster each.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
pkgs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	pkgs+=("$1")
	shift
done
[ $# -eq 0 ] || shift # the --; what follows goes to every test binary
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)
parallel=${TEST_SHORT_PARALLEL:-$(($(nproc) + 1))}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=.local/test-short

# "group path folder" for each package with tests. `go test -c -o dir/`
# names a binary after the last element of the package's path, so packages
# whose last elements are the same (shared/processor, functions/processor)
# go to different groups, one `go test -c` each. The groups are the whole
# module's, so that a package's binary has one place whatever is run.
list='{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}'
"$GO" list -f "$list" ./... | awk 'NF == 2 { n = split($1, e, "/"); print ++seen[e[n]], $1 }' >"$work/groups"
"$GO" list -f "$list" "${pkgs[@]}" |
	awk 'FILENAME == ARGV[1] { g[$2] = $1; next } NF == 2 { print g[$1], $1, $2 }' "$work/groups" - >"$work/pkgs"
[ -s "$work/pkgs" ] || { echo "test-short: no packages with tests in ${pkgs[*]}" >&2; exit 1; }
mkdir -p "$bin"
touch "$bin/times"
# Slowest first: a package's time last run, or first of all when unknown.
awk 'FILENAME == ARGV[1] { t[$1] = $2; next } { print ($2 in t ? t[$2] : 1e9), $0 }' "$bin/times" "$work/pkgs" |
	sort -k1,1 -rn | cut -d' ' -f2- >"$work/order"

for group in $(cut -d' ' -f1 "$work/pkgs" | sort -u); do
	mkdir -p "$bin/$group"
	# -s -w: as `go test` links them.
	# shellcheck disable=SC2046 # one argument per package path
	"$GO" test -c -ldflags='-s -w' -o "$bin/$group/" $(awk -v g="$group" '$1 == g { print $2 }' "$work/pkgs")
done

touch "$work/lock"
status=0
xargs -r -P "$parallel" -L1 bash -c '
	# $0 is the work folder, $1 the folder of the binaries, then the flags
	# after --, then the package line.
	work=$0 bin=$(realpath "$1") args=("${@:2}")
	n=${#args[@]}
	group=${args[n-3]} path=${args[n-2]} dir=${args[n-1]}
	flags=("${args[@]:0:n-3}")
	test="$bin/$group/${path##*/}.test"
	out="$work/out.${path//\//_}"
	start=$(date +%s.%N)
	rc=0
	(cd "$dir" && "$test" -test.paniconexit0 -test.timeout=10m0s -test.short=true "${flags[@]}" >"$out" 2>&1) || rc=$?
	secs=$(awk -v a="$start" -v b="$(date +%s.%N)" "BEGIN { printf \"%.3fs\", b - a }")
	verbose=
	case " ${flags[*]} " in *" -test.v "* | *" -test.v="*) verbose=1 ;; esac
	exec 9>>"$work/lock"
	flock 9
	if [ "$rc" -eq 0 ]; then
		[ -z "$verbose" ] || cat "$out"
		printf "ok  \t%s\t%s\n" "$path" "$secs"
		[ ${#flags[@]} -gt 0 ] || echo "$path ${secs%s}" >>"$work/times"
	else
		cat "$out"
		printf "FAIL\t%s\t%s\n" "$path" "$secs"
		[ ${#flags[@]} -gt 0 ] || echo "$path ${secs%s}" >>"$work/times"
		exit 1
	fi
' "$work" "$bin" "$@" <"$work/order" || status=1
# Keep the times of packages not run this time too (a partial run); a
# run with test flags (a -test.run, say) says nothing about the times.
[ ! -s "$work/times" ] || awk 'FILENAME == ARGV[1] { seen[$1] = 1; print; next } !($1 in seen)' "$work/times" "$bin/times" >"$work/alltimes"
[ ! -s "$work/times" ] || mv "$work/alltimes" "$bin/times"
[ "$status" -eq 0 ] || echo "FAIL" >&2
exit "$status"
