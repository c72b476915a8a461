"""Whether a workload's buffers fit in this machine's memory, asked before anything allocates."""

from __future__ import annotations

import psutil

from schedsearch.core import ArgSpec, Workload
from schedsearch.errors import LimitError


def memory_needed(args: tuple[ArgSpec, ...]) -> int:
    """Bytes the benchmark driver allocates for one workload: every argument twice (the
    buffer and its initial contents) and the outputs once more (the reference results)."""
    return sum(2 * a.nbytes + (a.nbytes if a.output else 0) for a in args)


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
