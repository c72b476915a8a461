#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite: unit tests, integration tests
# with real Exo, gcc, Ray, SQLite and PostgreSQL, notebooks, and the regression check of
# the committed example schedules. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYTHONDONTWRITEBYTECODE=1
# Keep build caches of the test run out of the user's cache.
export SCHEDSEARCH_CACHE_DIR="${SCHEDSEARCH_CACHE_DIR:-$(mktemp -d)}"
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
