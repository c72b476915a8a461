#!/usr/bin/env bash
# Set up everything schedsearch needs on a fresh machine: a C compiler (apt-get when
# missing), an AArch64 cross compiler and qemu-user for the NEON tests (apt-get when
# missing), a Python 3.11/3.12 virtual environment in .venv, and the package with its test
# and documentation extras (dev, docs). Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
# tests/integration/test_neon_qemu.py cross-compiles NEON kernels -static (hence the
# target's libc.a) and runs them under qemu-aarch64.
need_cross=()
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need_cross+=(gcc-aarch64-linux-gnu)
[ -f /usr/aarch64-linux-gnu/lib/libc.a ] || need_cross+=(libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null 2>&1 || need_cross+=(qemu-user)
# tests/integration/test_dashboard_browser.py drives Debian's chromium with Playwright
# (Playwright's own browser download is not used).
need_browser=()
[ -x /usr/bin/chromium ] || need_browser+=(chromium)
if [ $((${#need_apt[@]} + ${#need_cross[@]} + ${#need_browser[@]})) -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  # Wait for another apt-get (a parallel setup) instead of failing on its lock.
  apt=($SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -y -qq)
  wanted=("${need_apt[@]}" "${need_cross[@]}" "${need_browser[@]}")
  echo "setup: installing ${wanted[*]} with apt-get" >&2
  if "${apt[@]}" update; then
    [ ${#need_apt[@]} -eq 0 ] || "${apt[@]}" install --no-install-recommends "${need_apt[@]}" >/dev/null
    # Without the cross tools only the NEON tests fail (saying what to install).
    [ ${#need_cross[@]} -eq 0 ] || "${apt[@]}" install --no-install-recommends "${need_cross[@]}" >/dev/null ||
      echo "setup: could not install ${need_cross[*]}; tests/integration/test_neon_qemu.py will fail until they are installed" >&2
    # Without it only the dashboard's browser test fails (saying what to install).
    [ ${#need_browser[@]} -eq 0 ] || "${apt[@]}" install --no-install-recommends "${need_browser[@]}" >/dev/null ||
      echo "setup: could not install chromium; tests/integration/test_dashboard_browser.py will fail until it is installed" >&2
  elif [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: apt-get update failed; install ${need_apt[*]} and re-run" >&2
    exit 2
  else
    echo "setup: apt-get update failed; install ${need_cross[*]} ${need_browser[*]} for tests/integration/test_neon_qemu.py and test_dashboard_browser.py" >&2
  fi
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
  .venv/bin/python -m pip install -q -e ".[dev,docs]"
  touch "$stamp"
fi

# One-time work a first search would otherwise do while the user waits, and every search
# where bytecode is never written (PYTHONDONTWRITEBYTECODE, read-only installs): byte-compile
# the project (an editable install, which pip does not compile) and anything in the
# environment pip left uncompiled; compileall skips what is up to date. Exo's first import
# writes yapf's grammar cache (~/.cache/YAPF), once.
.venv/bin/python -m compileall -q -j 0 src .venv/lib/python3*/site-packages >/dev/null || true
.venv/bin/python -c 'import exo' >/dev/null 2>&1 || true
