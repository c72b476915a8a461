#!/usr/bin/env bash
# Set up (scripts/setup.sh), check src/ with ruff and mypy, build the documentation
# (scripts/docs.sh) and run the whole test suite: unit tests, integration tests with real
# Exo, gcc, Ray, SQLite and PostgreSQL, notebooks, and the regression check of the committed
# example schedules. Extra arguments go to pytest (to both passes).
#
# Two passes: everything but the tests marked `serial` runs on every core (pytest-xdist);
# then the `serial` ones, which time the machine (how fast a stop is acknowledged, whether
# a schedule kept its speed), run alone so that other tests cannot skew them. A whole run
# (no arguments) then runs the rewrite-space tests again on Exo as it is, without
# schedsearch's patches of its internals (SCHEDSEARCH_EXO_PATCHES=off).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYTHONDONTWRITEBYTECODE=1
# Lint, formatting and types of src/ (settings in pyproject.toml): any finding fails the run.
# Seconds for ruff; mypy about 20 s on two cores, its cache in a temporary folder.
.venv/bin/ruff check src
.venv/bin/ruff format --check src
mypy_cache=$(mktemp -d)
.venv/bin/mypy --cache-dir="$mypy_cache"
rm -rf "$mypy_cache"
# The documentation site, strictly: a warning (a broken link, a page left out of the nav, a
# docstring mkdocstrings cannot read) fails the run. Seconds; built into a temporary folder.
docs_out=$(mktemp -d)
bash scripts/docs.sh "$docs_out/site"
rm -rf "$docs_out"
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
# worksteal: a worker that runs out of tests takes some of those queued for another, so the
# lane does not end on one worker while the other idles.
pass -n "$workers" --dist worksteal -m "not serial" "$@"
pass -m serial "$@"
if [ "$#" -eq 0 ]; then
  SCHEDSEARCH_EXO_PATCHES=off pass -n "$workers" tests/unit/test_rules.py tests/unit/test_rewrites.py \
    tests/unit/test_register_tile.py tests/unit/test_replay.py tests/unit/test_vectorize.py tests/unit/test_compute_at.py
fi
