"""Whether a workload's buffers fit in this machine's memory, asked before anything allocates."""

from __future__ import annotations

import psutil

from schedsearch.core import ArgSpec, Workload
from schedsearch.errors import LimitError
from schedsearch.evaluate.harness import GUARD_BYTES, INPUT_SETS


def memory_needed(args: tuple[ArgSpec, ...]) -> int:
    """Bytes the benchmark driver holds for one workload (``harness``): every argument once,
    between its guard zones, and for each input set every argument's contents, the outputs'
    reference results and the float outputs' magnitudes (8 bytes an element)."""

    def one_set(a: ArgSpec) -> int:
        if not a.output:
            return a.nbytes
        return 2 * a.nbytes + (8 * max(1, a.elements) if a.dtype.is_float else 0)

    return sum(a.nbytes + 2 * GUARD_BYTES + INPUT_SETS * one_set(a) for a in args)


def check_memory(workload: Workload) -> None:
    """LimitError (one sentence) when the workload's buffers need more memory than is available now."""
    needed = memory_needed(workload.args)
    available = psutil.virtual_memory().available
    if needed > available:
        raise LimitError(
            f"{workload.label} needs {_bytes(needed)} for its buffers but this machine has {_bytes(available)} "
            "available; choose smaller sizes with --size"
        )


def _bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000:
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} EB"
