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
