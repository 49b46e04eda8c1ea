#!/usr/bin/env bash
# Runs every fuzz target of the repository's main module briefly (FUZZTIME
# each, default 30000 executions) and fails if any finds a failure. `make
# test` calls it; run it longer (e.g. FUZZTIME=2000000x, or FUZZTIME=5m)
# after touching a verifier.
#
# The default is a count, not a duration: on Go 1.26, a duration-based
# -fuzztime can end in a spurious "context deadline exceeded" failure with
# no failing input when the machine is loaded (golang/go#75804, fixed in Go
# 1.27); a count has no deadline to race.
#
# The targets are found, not listed, so a new one cannot be forgotten:
# every `func FuzzXxx(f *testing.F)` in a _test.go file of a package of the
# main module. `go list ./...` gives those packages and stops at nested
# modules (bench/ and tools/ have their own go.mod); its file lists are the
# files `go test` compiles here, so every target found can run (one in a
# file whose build constraint is off is not found).
#
# A failing input is written by go test to
# <package>/testdata/fuzz/<Target>/: fix the bug, keep that file as a
# regression seed. Interesting inputs found on the way go to Go's cache,
# not to the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30000x}

# One line per package with tests: its directory, a tab, its test files.
packages=$("$GO" list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}'$'\t''{{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}{{end}}' ./...)

targets=() # "<package directory, relative> <Target>"
while IFS=$'\t' read -r dir files; do
	[[ -n "$dir" ]] || continue
	case "$dir" in
	"$PWD") rel=. ;;
	"$PWD"/*) rel=./${dir#"$PWD"/} ;;
	*) rel=$dir ;;
	esac
	read -ra names <<<"$files"
	# grep's status 1 is "no target here"; 2, an error, stops the script.
	found=$(cd "$dir" && { grep -hoE '^func Fuzz([A-Z0-9_][A-Za-z0-9_]*)?\(([A-Za-z_][A-Za-z0-9_]* )?\*testing\.F\)' -- "${names[@]}" || [[ $? == 1 ]]; })
	for target in $(sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/' <<<"$found" | sort); do
		targets+=("$rel $target")
	done
done <<<"$packages"

# Finding none means the search broke, not that there is nothing to fuzz.
if ((${#targets[@]} == 0)); then
	echo "fuzz-smoke: found no fuzz target in the main module" >&2
	exit 1
fi

failed=()
for entry in "${targets[@]}"; do
	read -r pkg target <<<"$entry"
	echo "fuzz-smoke: $pkg $target for $FUZZTIME"
	if ! "$GO" test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME"; then
		failed+=("$pkg $target (see its output above; an input the fuzzer found is in $pkg/testdata/fuzz/$target/)")
	fi
done
if ((${#failed[@]})); then
	echo "fuzz-smoke: FAILED:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "fuzz-smoke: ${#targets[@]} targets, no failure"
