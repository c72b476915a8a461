#!/usr/bin/env bash
# Build the documentation site (mkdocs.yml, docs/) with `mkdocs build --strict`: any warning -
# a broken link or anchor, a page missing from the nav, a docstring mkdocstrings cannot read -
# fails the build. The site goes to site/, or to the folder given as the first argument.
# Needs the `docs` extra (scripts/setup.sh installs it); uses .venv when there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-site}"
mkdocs=mkdocs
[ -x .venv/bin/mkdocs ] && mkdocs=.venv/bin/mkdocs
# The CLI and API reference document this checkout's code, whatever else is installed.
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export NO_MKDOCS_2_WARNING=1  # Material's notice on every build, not about this site
start=$(date +%s%N)
# Not --quiet: it hides the warnings from --strict, and the build then passes with them.
"$mkdocs" build --strict --site-dir "$out"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "docs: built $out in $((ms / 1000)).$(printf '%03d' $((ms % 1000))) s" >&2
