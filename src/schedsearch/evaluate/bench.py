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
from enum import StrEnum
from pathlib import Path

from schedsearch.core import BenchConfig, Measurement, Status, Timing, Workload
from schedsearch.evaluate.process import ChildResult, run_child

#: Share of ``run_timeout`` the driver may spend timing; the rest covers process start-up,
#: loading the reference and the verification calls.
TIMING_BUDGET_SHARE = 0.5
#: Characters of a child's message kept in a measurement's error.
_STDERR_TAIL = 1500
#: How many ``run_timeout``s the reference mode may take: per input set it calls the
#: unscheduled proc on magnitudes (integer kernels: up to 8 times, while their inputs are
#: narrowed) and then for its answer.
REFERENCE_TIMEOUTS = 4


class Failure(StrEnum):
    """How a kernel failed its verification."""

    WRONG = "wrong"  # an output element beyond its tolerance
    CLOBBERED = "clobbered"  # bytes written in the guard zone before or after an argument
    CHANGED = "changed"  # an argument it only reads was changed


@dataclass(frozen=True, slots=True)
class Verdict:
    """Verification of one kernel against the reference outputs."""

    ok: bool
    max_error: float
    arg: str = ""  # the argument at fault, when not ok
    index: int = -1  # WRONG, CHANGED: flat index of its first bad element; CLOBBERED: bytes from it
    value: float = 0.0  # WRONG: the kernel's value
    expected: float = 0.0  # WRONG: the reference's
    failure: Failure | None = None
    tolerance: float = 0.0  # WRONG: the largest error allowed there
    input_set: int = 0  # the input set it failed on
    round: int = 0  # WRONG: which of its verification rounds (a parallel kernel has several)
    before: bool = False  # CLOBBERED: in the zone before the argument (else after it)
    worst: float = 0.0  # ok: the largest share of its tolerance any float element used

    def message(self, workload: Workload) -> str:
        """What went wrong, in one sentence naming the element or the bytes."""
        on = f"input set {self.input_set + 1}"
        if self.failure is Failure.CLOBBERED:
            # index: how far from the argument the nearest changed byte is
            if self.before:
                where = "right before" if self.index <= 1 else f"{self.index} bytes before"
                return f"the kernel wrote outside its arguments, {where} the start of {self.arg} ({on})"
            where = "right after" if self.index == 0 else f"{self.index} bytes after"
            return f"the kernel wrote outside its arguments, {where} the end of {self.arg} ({on})"
        where = index_text(workload, self.arg, self.index)
        if self.failure is Failure.CHANGED:
            return f"the kernel changed {where}, an input it only reads ({on})"
        again = f", its run {self.round + 1} on the same inputs: a data race?" if self.round else ""
        return (
            f"{where} is {self.value:.9g}, expected {self.expected:.9g}: off by "
            f"{abs(self.value - self.expected):.3g}, beyond its tolerance {self.tolerance:.3g} "
            f"({on}{again}; max error {self.max_error:.3g})"
        )


def index_text(workload: Workload, arg: str, flat: int) -> str:
    """``C[3, 17]`` for a flat index into argument ``arg``."""
    shape = next((a.shape for a in workload.args if a.name == arg), ())
    if not shape:
        return arg
    idx = []
    for dim in reversed(shape):
        idx.append(flat % dim)
        flat //= dim
    return f"{arg}[{', '.join(str(i) for i in reversed(idx))}]"


def _verdict(parts: list[str]) -> Verdict:
    """One ``verify <k> ok|wrong|clobbered|changed <max error> ...`` line."""
    maxerr = float(parts[3])
    if parts[2] == "ok":
        return Verdict(True, maxerr, worst=float(parts[4]) if len(parts) > 4 else 0.0)
    failure, arg = Failure(parts[2]), parts[4]
    if failure is Failure.WRONG:
        return Verdict(
            False,
            maxerr,
            arg,
            int(parts[5]),
            float(parts[6]),
            float(parts[7]),
            failure,
            tolerance=float(parts[8]),
            input_set=int(parts[9]),
            round=int(parts[10]),
        )
    if failure is Failure.CLOBBERED:
        return Verdict(
            False, maxerr, arg, int(parts[6]), failure=failure, input_set=int(parts[7]), before=parts[5] == "before"
        )
    return Verdict(False, maxerr, arg, int(parts[5]), failure=failure, input_set=int(parts[6]))


@dataclass(frozen=True, slots=True)
class KernelReport:
    """Everything the driver said about one kernel."""

    first: float | None = None  # seconds of the first (verification) call
    verdict: Verdict | None = None
    slow: bool = False  # one call is too long to time within the budget
    inner: int = 1
    samples: tuple[float, ...] = ()


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
        elif tag == "verify":
            fields[i]["verdict"] = _verdict(parts)
        elif tag == "slow":
            fields[i]["slow"] = True
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


def thread_cpus(threads: int) -> list[int]:
    """The CPUs a kernel on ``threads`` threads is pinned to: the last ``threads`` this
    process may use (the one-thread kernel's is the last), all of them when there are fewer."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []
    return allowed[-max(1, threads) :]


def openmp_env(threads: int) -> dict[str, str]:
    """The environment a kernel with parallel loops is timed in: exactly ``threads`` OpenMP
    threads, each bound to one of ``thread_cpus``. Set explicitly because a worker's own
    environment says otherwise: Ray sets ``OMP_NUM_THREADS=1`` in every worker it starts."""
    env = dict(os.environ, OMP_NUM_THREADS=str(max(1, threads)), OMP_PROC_BIND="close")
    cpus = thread_cpus(threads)
    if len(cpus) >= threads:
        env["OMP_PLACES"] = ",".join(f"{{{c}}}" for c in cpus)
    else:
        env.pop("OMP_PLACES", None)
    return env


def run_argv(
    driver: Path,
    reference_file: Path,
    kernels: Sequence[Path],
    config: BenchConfig,
    pin: bool,
    scale: float,
    rounds: int = 1,
    timeout: float | None = None,
    cutoff: float | None = None,
    gated: bool = False,
) -> list[str]:
    """The driver's ``run`` command line (``run_kernels`` says what the arguments do);
    with ``driver`` a program linked with its kernel, run under an emulator, too."""
    timeout = config.run_timeout if timeout is None else timeout
    return [
        str(driver),
        "run",
        str(reference_file),
        str(bench_cpu(pin)),
        repr(float(config.rtol)),
        repr(float(scale)),
        str(max(1, rounds)),
        repr(float(config.warmup_seconds)),
        repr(float(config.min_sample_seconds)),
        str(max(1, config.samples)),
        repr(timeout * TIMING_BUDGET_SHARE),
        repr(float(cutoff or 0.0)),
        repr(float(config.settle)),
        "1" if gated else "0",
        *(str(k) for k in kernels),
    ]


def run_kernels(
    driver: Path,
    reference_file: Path,
    kernels: Sequence[Path],
    config: BenchConfig,
    pin: bool,
    scale: float,
    rounds: int = 1,
    timeout: float | None = None,
    cutoff: float | None = None,
    gate: Callable[[], AbstractContextManager[object]] | None = None,
) -> ChildResult:
    """Verify and time ``kernels`` in one driver process (interleaved rounds when several).

    ``scale``: the float tolerance's scale (``verification.atol_scale``); ``rounds``: how
    many times each input set is run and checked (``verification.verification_rounds``).
    ``cutoff``: a kernel whose verification call takes longer than this many seconds is
    timed by that one call (it cannot be among the fastest; timing it fully would cost
    ``samples`` more calls). ``gate``: the timing proper (from the first warm-up on) runs
    inside ``gate()``; loading, verification and one-call timings run before it."""
    timeout = config.run_timeout if timeout is None else timeout
    argv = run_argv(driver, reference_file, kernels, config, pin, scale, rounds, timeout, cutoff, gate is not None)
    # A pinned run is one thread's; an unpinned one holds a kernel with parallel loops.
    return run_child(argv, timeout=timeout, gate=gate, env=None if pin else openmp_env(config.threads))


def reference_kernel(driver: Path, kernel: Path, reference_file: Path, config: BenchConfig) -> ChildResult:
    """Write the answer key (every input set and the outputs ``kernel``, the unscheduled
    proc, gives for it) to ``reference_file``."""
    argv = [str(driver), "reference", str(config.seed), str(kernel), str(reference_file)]
    return run_child(argv, timeout=config.run_timeout * REFERENCE_TIMEOUTS)


def dump_kernel(
    driver: Path, kernel: Path, inputs_file: Path | str, outputs_file: Path, config: BenchConfig
) -> ChildResult:
    """Call ``kernel`` once on the first input set (drawn with it); write all inputs and then
    its outputs."""
    argv = [str(driver), "dump", str(config.seed), str(kernel), str(inputs_file), str(outputs_file)]
    return run_child(argv, timeout=config.run_timeout * REFERENCE_TIMEOUTS)


def stderr_tail(text: str) -> str:
    """The end of what a child printed, as much as a measurement's error keeps."""
    return text.strip()[-_STDERR_TAIL:]


#: What a benchmark killed by SIGKILL reads as. Nothing of ours sends it one (a run past its
#: timeout reads as a timeout), and a kernel does not: it came from outside - the node going
#: down, the OOM killer, an operator (``killed_from_outside``).
_KILLED = "the benchmark was killed by SIGKILL"


def child_failure(res: ChildResult, what: str, timeout: float) -> tuple[Status, str] | None:
    """Status and message when the child did not finish normally, else None."""
    if res.timed_out:
        return Status.TIMEOUT, f"{what} gave no result within {timeout:g} s and was killed"
    if res.signal_name is not None:
        msg = f"{what} was killed by {res.signal_name}"
        return Status.RUN_ERROR, msg + (f": {stderr_tail(res.stderr)}" if res.stderr.strip() else "")
    if res.returncode != 0:
        msg = f"{what} exited with status {res.returncode}"
        return Status.RUN_ERROR, msg + (f": {stderr_tail(res.stderr)}" if res.stderr.strip() else "")
    return None


def killed_from_outside(m: Measurement) -> bool:
    """Whether ``m`` says its benchmark was killed by SIGKILL (``_KILLED``): maybe the
    machine's fault, so a Ray executor measures it again before blaming the candidate."""
    return m.status is Status.RUN_ERROR and m.error.startswith(_KILLED)
