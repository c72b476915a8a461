"""Integration fixtures: one private Ray cluster for the whole session (it takes seconds to start)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from schedsearch.core import BenchConfig, ExpandOptions

#: Quick timing settings: integration tests check plumbing, not performance.
FAST_BENCH = BenchConfig(warmup_seconds=0.001, min_sample_seconds=0.001, samples=3)


@pytest.fixture(scope="session")
def ray_executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A RayExecutor on a private 2-worker local cluster, shut down after the session.

    Other RayExecutors made in the same process reuse this connection (and leave it open).
    """
    from schedsearch.evaluate.ray_backend import RayExecutor
    from schedsearch.transforms import Expander

    executor = RayExecutor(Expander, ExpandOptions(), FAST_BENCH, workers=2,
                           cache_dir=tmp_path_factory.mktemp("ray-build-cache"))
    try:
        yield executor
    finally:
        executor.close()
