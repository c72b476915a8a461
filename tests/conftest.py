"""Shared fixtures: paths of the repository and a runner for the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 300, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
    """Run ``python -m schedsearch ARGS`` as a user would, capturing both streams."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "schedsearch", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def tiled_and_costly():
    """A register-tiled SGEMM (24x64x32, AVX-512) and three each of its reorders, sinks and
    packs: the children whose safety checks build the largest effect formulas."""
    from schedsearch.core import ExpandOptions, RewriteKind
    from schedsearch.transforms import build_proc, load_workload, propose, try_apply

    root = build_proc(load_workload(EXAMPLES / "matmul.py", "sgemm", {"M": 24, "N": 64, "K": 32}))
    options = ExpandOptions(target="avx512")
    tile = next(r for r in propose(root, options) if r.kind is RewriteKind.REGISTER_TILE)
    tiled = try_apply(root, tile)
    assert tiled is not None
    proposed = propose(tiled, options)
    costly = [r for kind in (RewriteKind.REORDER, RewriteKind.SINK, RewriteKind.PACK)
              for r in [r for r in proposed if r.kind is kind][:3]]
    assert {r.kind for r in costly} == {RewriteKind.REORDER, RewriteKind.SINK, RewriteKind.PACK}
    return tiled, costly
