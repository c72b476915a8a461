"""How one timing of kernels runs and reads: what it runs inside (the node's other work
paused or not: ``evaluate.quiet``, ``evaluate.interference``) and how the driver's report of
it becomes a ``Measurement``.

Guarantees: a timing that must be quiet is quiet, shared timing never pauses the node, and
each kernel of a report reads as one Measurement - ``ok`` with its timing, or the status and
error text of what went wrong (a wrong result, a call too slow to time, a crash or hang).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from schedsearch.core import BenchConfig, Candidate, MachineInfo, Measurement, Status, TimingMode, Workload
from schedsearch.evaluate.bench import KernelReport, child_failure, parse_report, stderr_tail, timing_from_samples
from schedsearch.evaluate.interference import evidence_of, of_node
from schedsearch.evaluate.process import ChildResult
from schedsearch.evaluate.quiet import quiet


def measurement_from_report(
    workload: Workload,
    candidate: Candidate,
    report_index: int,
    res: ChildResult,
    count: int,
    config: BenchConfig,
    build_seconds: float,
    machine: MachineInfo,
) -> Measurement:
    """The Measurement of ``candidate``, the ``report_index``-th of the ``count`` kernels the
    driver run ``res`` timed."""
    reports = parse_report(res.stdout, count)
    r = reports[report_index]
    base: dict[str, Any] = {
        "fingerprint": candidate.fingerprint,
        "build_seconds": build_seconds,
        "run_seconds": res.seconds,
        "machine": machine,
    }
    if r.verdict is not None and not r.verdict.ok:
        v = r.verdict
        return Measurement(status=Status.WRONG_RESULT, error=v.message(workload), max_error=v.max_error, **base)
    if r.slow:
        msg = f"one call takes {r.first:.3g} s, too slow to time within run_timeout={config.run_timeout:g} s"
        return Measurement(status=Status.TIMEOUT, error=msg, **base)
    if r.verdict is None or not r.samples:
        failure = child_failure(res, "the benchmark", config.run_timeout) or (
            Status.RUN_ERROR,
            f"the benchmark stopped without a result: {stderr_tail(res.stderr or res.stdout)}",
        )
        return Measurement(status=failure[0], error=failure[1], **base)
    timing = timing_from_samples(r.samples, r.inner)
    return Measurement(status=Status.OK, timing=timing, max_error=r.verdict.max_error, **base)


def quiet_gate(config: BenchConfig, cache_dir: Path) -> Callable[[], AbstractContextManager[object]] | None:
    """What a timing that must be quiet runs inside: the node's builds and expansions paused
    (``evaluate.quiet``) unless timing is shared; verification and one-call timings run
    before it."""
    if config.timing is TimingMode.SHARED:
        return None
    return lambda: quiet(cache_dir)


class Gate:
    """What one candidate's timing runs inside, decided when the timing starts: quiet
    (``evaluate.quiet``) for quiet timing, for a timing that must be quiet (``required``) and
    whenever the node's evidence says so (``TimingMode.AUTO``, ``evaluate.interference``);
    never for shared timing.
    ``quiet`` says afterwards what it was (None: the kernel was not timed past its first call)."""

    def __init__(self, config: BenchConfig, cache_dir: Path, required: bool) -> None:
        self.config, self.cache_dir, self.required = config, cache_dir, required
        self.quiet: bool | None = None

    def __call__(self) -> AbstractContextManager[object]:
        mode = self.config.timing
        if mode is TimingMode.SHARED:
            self.quiet = False
        elif mode is TimingMode.AUTO and not self.required:
            self.quiet = of_node(self.cache_dir).quiet_next()
        else:
            self.quiet = True
        return quiet(self.cache_dir) if self.quiet else contextlib.nullcontext()

    def record(self, report: KernelReport) -> None:
        """Tell the node what this timing showed (auto timing only)."""
        if self.config.timing is not TimingMode.AUTO or self.quiet is None:
            return
        of_node(self.cache_dir).record(evidence_of(report.samples, self.quiet))
