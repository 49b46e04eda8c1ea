#!/usr/bin/env bash
# Makes sure Chromium is on this machine for the console's browser tests
# (internal/console, driven by chromedp). It installs Debian's chromium
# package when it is missing. Without it the browser tests skip, except
# in CI (CI set), where they fail: make test must run them there.
set -euo pipefail

have_chromium() {
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1
}

if have_chromium; then
  exit 0
fi

if command -v apt-get >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "setup: installing Chromium (apt-get install chromium) for the console's browser tests ..."
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
  have_chromium && exit 0
fi

cat >&2 <<'MSG'
setup: Chromium was not found; the console's browser tests will skip (and fail under CI).
  Debian/Ubuntu: apt-get install chromium
MSG
exit 1
