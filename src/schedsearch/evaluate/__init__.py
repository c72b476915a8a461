"""Build, verify and benchmark candidates: the only package that runs a C compiler.

Public API: ``evaluate_candidate``, ``remeasure``, ``machine_info``, ``cpu_flags``, ``check_toolchain``,
``default_cache_dir``, ``private_cache_dir``, ``check_memory`` and ``LocalExecutor``. The module-level
functions take plain records and paths so they can run inside Ray workers (see ``ray_backend``).
"""

from schedsearch.evaluate.cache import private_cache_dir
from schedsearch.evaluate.limits import check_memory, memory_needed
from schedsearch.evaluate.local import LocalExecutor
from schedsearch.evaluate.machine import check_toolchain, cpu_flags, default_cache_dir, machine_info
from schedsearch.evaluate.once import KernelIO, run_once
from schedsearch.evaluate.pipeline import evaluate_candidate
from schedsearch.evaluate.side_by_side import remeasure

__all__ = [
    "KernelIO",
    "LocalExecutor",
    "check_memory",
    "check_toolchain",
    "cpu_flags",
    "default_cache_dir",
    "evaluate_candidate",
    "machine_info",
    "memory_needed",
    "private_cache_dir",
    "remeasure",
    "run_once",
]
