#!/usr/bin/env bash
# Set up everything schedsearch needs on a fresh machine: a C compiler (apt-get when
# missing), a Python 3.11/3.12 virtual environment in .venv, and the package with its
# test extras. Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} with apt-get" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=""
for cand in python3.11 python3.12 python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] <= (3, 12)))'; then
    PY="$cand"; break
  fi
done
if [ -z "$PY" ]; then
  echo "setup: schedsearch needs Python 3.11 or 3.12 (Exo 1.0.0 does not run on 3.13); install one and re-run" >&2
  exit 2
fi

[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.schedsearch-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".[dev]"
  touch "$stamp"
fi
