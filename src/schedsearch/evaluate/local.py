"""An in-process Executor: expansion and evaluation run one by one in the calling process.

Used by ``--workers 0`` and by fast tests. Native code still runs in child processes (see
``bench``), so a crashing kernel cannot take the caller down.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from schedsearch.core import (
    BenchConfig,
    Candidate,
    ExpandOptions,
    Expansion,
    MachineInfo,
    Measurement,
    Workload,
)
from schedsearch.errors import SchedsearchError
from schedsearch.evaluate.machine import default_cache_dir, machine_info
from schedsearch.evaluate.pipeline import evaluate_candidate, remeasure


class LocalExecutor:
    """``core.Executor`` running everything in this process, results yielded one by one."""

    def __init__(
        self,
        expander_factory: Callable[[Workload, ExpandOptions], Any],
        expand_options: ExpandOptions,
        bench: BenchConfig,
        cache_dir: Path | None = None,
    ) -> None:
        self._factory = expander_factory
        self._options = expand_options
        self._bench = bench
        self._cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        # One expander per workload, kept: it caches replayed schedule prefixes.
        self._expanders: dict[str, Any] = {}
        self._machine: MachineInfo | None = None

    @property
    def cache_dir(self) -> Path:
        return self._cache_dir

    def _expander(self, workload: Workload) -> Any:
        exp = self._expanders.get(workload.key)
        if exp is None:
            exp = self._factory(workload, self._options)
            self._expanders[workload.key] = exp
        return exp

    def expand(self, workload: Workload, parents: Sequence[Candidate]) -> Iterator[Expansion]:
        """One Expansion per parent, in input order; a parent that cannot be expanded
        yields an Expansion with ``error`` set instead of raising."""
        expander = self._expander(workload)
        for parent in parents:
            start = time.perf_counter()
            try:
                yield expander.expand(parent)
            except SchedsearchError as e:
                yield Expansion(parent.fingerprint, (), seconds=time.perf_counter() - start, error=str(e))
            except Exception as e:  # noqa: BLE001 - an Exo internal error on one parent must not end the search
                yield Expansion(
                    parent.fingerprint, (), seconds=time.perf_counter() - start, error=f"{type(e).__name__}: {e}"
                )

    def evaluate(
        self, workload: Workload, reference: Candidate, candidates: Sequence[Candidate]
    ) -> Iterator[Measurement]:
        """One Measurement per candidate, in input order."""
        for cand in candidates:
            yield evaluate_candidate(workload, reference, cand, self._bench, self._cache_dir)

    def remeasure(self, workload: Workload, reference: Candidate, candidates: Sequence[Candidate]) -> list[Measurement]:
        """Time the candidates side by side in one process; input order."""
        return remeasure(workload, reference, candidates, self._bench, self._cache_dir)

    def machine(self) -> MachineInfo:
        """The measuring setup (computed once per executor)."""
        if self._machine is None:
            self._machine = machine_info(self._bench)
        return self._machine

    def close(self) -> None:
        """Forget the expanders; nothing else is held."""
        self._expanders.clear()
