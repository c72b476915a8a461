#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite: unit tests, integration tests
# with real Exo, gcc, Ray, SQLite and PostgreSQL, notebooks, and the regression check of
# the committed example schedules. Extra arguments go to pytest (to both passes).
#
# Two passes: everything but the tests marked `serial` runs on every core (pytest-xdist);
# then the `serial` ones, which time the machine (how fast a stop is acknowledged, whether
# a schedule kept its speed), run alone so that other tests cannot skew them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYTHONDONTWRITEBYTECODE=1
# Keep build caches of the test run out of the user's cache.
export SCHEDSEARCH_CACHE_DIR="${SCHEDSEARCH_CACHE_DIR:-$(mktemp -d)}"
# Exo imports yapf, which rewrites its grammar cache (~/.cache/YAPF) whenever the installed
# grammar is newer, as it is after a fresh install, and not atomically: test workers
# importing it at once can read a half-written file. One import first writes it alone.
.venv/bin/python -c 'import exo'
workers=$(.venv/bin/python -c 'import os; print(max(1, min(4, len(os.sched_getaffinity(0)))))')

pass() {
  # pytest exits 5 when a pass selects no test (e.g. a file with only serial tests was named)
  .venv/bin/python -m pytest -q -p no:cacheprovider "$@" || { rc=$?; [ "$rc" -eq 5 ] || return "$rc"; }
}
pass -n "$workers" -m "not serial" "$@"
pass -m serial "$@"
