"""Run the driver in a child process, one benchmark per node at a time, and read its report.

The driver (see ``harness``) runs in its own process group with a hard time limit, so a
kernel that crashes or hangs takes only its child with it. Benchmarks take an exclusive
``flock`` on a node-local lock file in the cache directory: Ray tasks on one node queue for
it while compiles go on in parallel on the other cores. Single-threaded kernels are pinned
to one CPU to cut noise; OpenMP kernels are left free to use every core.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import statistics
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from schedsearch.core import BenchConfig, Timing
from schedsearch.evaluate.process import ChildResult, run_child

#: Share of ``run_timeout`` the driver may spend timing; the rest covers process start-up,
#: input generation, loading the reference and the verification call.
TIMING_BUDGET_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class Verdict:
    """Verification of one kernel against the reference outputs."""

    ok: bool
    max_error: float
    arg: str = ""  # first mismatching output, when not ok
    index: int = -1  # flat index of its first mismatching element
    value: float = 0.0
    expected: float = 0.0


@dataclass(frozen=True, slots=True)
class KernelReport:
    """Everything the driver said about one kernel."""

    first: float | None = None  # seconds of the first (verification) call
    verdict: Verdict | None = None
    slow: bool = False  # one call is too long to time within the budget
    inner: int = 1
    samples: tuple[float, ...] = ()
    spared: bool = False  # a yardstick not run: its subject cannot be the new best


def parse_report(stdout: str, count: int) -> list[KernelReport]:
    """Read the driver's line protocol into one KernelReport per kernel, in order."""
    fields: list[dict[str, object]] = [{} for _ in range(count)]
    samples: list[list[float]] = [[] for _ in range(count)]
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) < 3 or not parts[1].isdigit() or int(parts[1]) >= count:
            continue
        i, tag = int(parts[1]), parts[0]
        if tag == "first":
            fields[i]["first"] = float(parts[2])
        elif tag == "verify" and parts[2] == "ok":
            fields[i]["verdict"] = Verdict(True, float(parts[3]))
        elif tag == "verify" and parts[2] == "wrong":
            fields[i]["verdict"] = Verdict(
                False, float(parts[3]), parts[4], int(parts[5]), float(parts[6]), float(parts[7])
            )
        elif tag == "slow":
            fields[i]["slow"] = True
        elif tag == "spared":
            fields[i]["spared"] = True
        elif tag == "inner":
            fields[i]["inner"] = int(parts[2])
        elif tag == "sample":
            samples[i].append(float(parts[2]))
    return [KernelReport(samples=tuple(s), **f) for f, s in zip(fields, samples, strict=True)]  # type: ignore[arg-type]


def timing_from_samples(samples: Sequence[float], inner: int) -> Timing:
    """Robust statistics of per-call seconds: median, min and quartiles (inclusive method)."""
    xs = sorted(samples)
    if len(xs) == 1:
        q1 = q3 = xs[0]
    else:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return Timing(median=statistics.median(xs), min=xs[0], q1=q1, q3=q3, samples=tuple(samples), inner=inner)


@contextlib.contextmanager
def bench_lock(cache_dir: Path) -> Iterator[None]:
    """Hold this node's exclusive benchmark lock (blocks until it is free).

    The host name is part of the file name so that a cache directory shared between nodes
    (NFS) still gives one lock per node, not one for the whole cluster.
    """
    lock_dir = Path(cache_dir) / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / f"bench-{socket.gethostname()}.lock"
    with open(path, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def bench_cpu(pin: bool) -> int:
    """The CPU to pin a single-threaded benchmark to, or -1 for no pinning."""
    if not pin:
        return -1
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return -1
    # The last allowed CPU: schedulers tend to start other work on the first ones.
    return allowed[-1] if allowed else -1


def run_kernels(
    driver: Path,
    reference_file: Path,
    kernels: Sequence[Path],
    config: BenchConfig,
    pin: bool,
    timeout: float | None = None,
    cutoff: float | None = None,
    gate: Callable[[], AbstractContextManager[object]] | None = None,
    contend: float | None = None,
    pair: bool = False,
) -> ChildResult:
    """Verify and time ``kernels`` in one driver process (interleaved rounds when several).

    ``cutoff``: a kernel whose verification call takes longer than this many seconds is
    timed by that one call (it cannot be among the fastest; timing it fully would cost
    ``samples`` more calls). ``contend`` (one kernel): a kernel whose warm call takes longer
    is timed with the fewest samples (it cannot be the new best). ``gate``: the timing proper (from the first warm-up on) runs
    inside ``gate()``; loading, verification and one-call timings run before it. ``pair``
    (two kernels): the second is a yardstick timed beside the first (``core.Paired``); the
    first alone is held to the budget, ``cutoff`` and ``contend``."""
    timeout = config.run_timeout if timeout is None else timeout
    argv = [
        str(driver),
        "run",
        str(config.seed),
        str(reference_file),
        str(bench_cpu(pin)),
        repr(float(config.rtol)),
        repr(float(config.warmup_seconds)),
        repr(float(config.min_sample_seconds)),
        str(max(1, config.samples)),
        repr(timeout * TIMING_BUDGET_SHARE),
        repr(float(cutoff or 0.0)),
        repr(float(contend or 0.0)),
        repr(float(config.settle)),
        "1" if gate is not None else "0",
        "1" if pair and len(kernels) == 2 else "0",
        *(str(k) for k in kernels),
    ]
    return run_child(argv, timeout=timeout, gate=gate)


def dump_kernel(
    driver: Path, kernel: Path, inputs_file: Path | str, outputs_file: Path, config: BenchConfig
) -> ChildResult:
    """Call ``kernel`` once on the seeded inputs; write all inputs and then its outputs."""
    argv = [str(driver), "dump", str(config.seed), str(kernel), str(inputs_file), str(outputs_file)]
    return run_child(argv, timeout=config.run_timeout)
