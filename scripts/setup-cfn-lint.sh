#!/usr/bin/env bash
# Makes sure cfn-lint (and the AWS SAM translator it brings) is on this
# machine, for `make lint` (cfn-lint template.yaml) and the translated-
# template checks in internal/devstack/samtemplate. A cfn-lint already on
# PATH whose Python has the translator is used as is (a version other than
# the pinned one gets a note); otherwise the pinned version is installed
# with pip into its own virtual environment, so the system's Python stays
# untouched (Debian refuses `pip install` outside one).
#
# It prints the cfn-lint to run on its last line, for the Makefile.
set -euo pipefail

PIN="1.51.0"
VENV="${XDG_DATA_HOME:-$HOME/.local/share}/webhook-inbox/cfn-lint"

usable() { # $1: cfn-lint, $2: its Python
  "$1" --version >/dev/null 2>&1 && "$2" -c 'import samtranslator, cfnlint' >/dev/null 2>&1
}

python_of() { # the interpreter a cfn-lint runs with: python3 for a shim
  local first
  first=$(head -n1 "$1" 2>/dev/null || true)
  case "$first" in
    '#!'*python*) first=${first#\#!}; first=${first%% *}
                  if [ "$(basename "$first")" = env ]; then echo python3; else echo "$first"; fi ;;
    *) echo python3 ;;
  esac
}

if lint=$(command -v cfn-lint 2>/dev/null) && usable "$lint" "$(python_of "$lint")"; then
  version=$("$lint" --version 2>/dev/null | awk '{print $2}')
  if [ "$version" != "$PIN" ]; then
    echo "setup: using cfn-lint $version from $lint (the project pins $PIN)" >&2
  fi
  echo "$lint"
  exit 0
fi
if [ -x "$VENV/bin/cfn-lint" ] && usable "$VENV/bin/cfn-lint" "$VENV/bin/python"; then
  echo "$VENV/bin/cfn-lint"
  exit 0
fi

if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "setup: installing python3-venv (apt-get install python3-venv) ..." >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >&2
fi
if command -v python3 >/dev/null 2>&1; then
  echo "setup: installing cfn-lint $PIN into $VENV ..." >&2
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  if python3 -m venv "$VENV" >&2 && "$VENV/bin/pip" install --quiet "cfn-lint==$PIN" >&2 &&
     usable "$VENV/bin/cfn-lint" "$VENV/bin/python"; then
    echo "$VENV/bin/cfn-lint"
    exit 0
  fi
fi

cat >&2 <<MSG
setup: cfn-lint $PIN (with the AWS SAM translator) could not be installed.
  It needs Python 3 with venv and pip, and access to PyPI:
    python3 -m venv "$VENV" && "$VENV/bin/pip" install cfn-lint==$PIN
  or install it any way you like (pipx install cfn-lint==$PIN) and re-run make.
MSG
exit 1
