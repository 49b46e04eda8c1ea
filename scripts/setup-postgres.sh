#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries (initdb, pg_ctl, postgres) are on
# this machine, for the tests and the dev stack. It installs Debian/Ubuntu's
# postgresql package when they are missing, and otherwise says what to do.
# With DATABASE_URL set, nothing is needed: tests and `make dev` use it.
set -euo pipefail

have_server() {
  if [ -n "${PG_BINDIR:-}" ] && [ -x "$PG_BINDIR/initdb" ]; then return 0; fi
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then return 0; fi
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}

if [ -n "${DATABASE_URL:-}" ] || have_server; then
  exit 0
fi

if command -v apt-get >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "setup: installing PostgreSQL (apt-get install postgresql) ..."
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends postgresql postgresql-contrib >/dev/null
  # The package starts a system cluster we do not use; tests start their own.
  $sudo systemctl disable --now postgresql >/dev/null 2>&1 || true
  have_server && exit 0
fi

cat >&2 <<'MSG'
setup: PostgreSQL server binaries (initdb, pg_ctl) were not found.
  Debian/Ubuntu: apt-get install postgresql
  macOS:         brew install postgresql
  or point the tests and `make dev` at a server: export DATABASE_URL=postgres://...
MSG
exit 1
