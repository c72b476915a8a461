"""Build -> verify -> benchmark one candidate (or several finalists side by side).

These are plain module-level functions over records so that they can run anywhere: in the
search process, in a subprocess, or inside a Ray worker on another node.

The answer key (the unscheduled proc run on every seeded input set, ``harness``) is cached
on disk per (reference C, seed, compiler, flags, CPU, harness version): the unscheduled
kernel can be hundreds of times slower than a good one and must not run once per candidate.
How strictly outputs are checked is ``verification``'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedsearch.core import (
    ArgSpec,
    BenchConfig,
    Candidate,
    MachineInfo,
    Measurement,
    Paired,
    Status,
    TimingMode,
    Workload,
    sha256_text,
)
from schedsearch.errors import InfrastructureError, SearchError
from schedsearch.evaluate.bench import (
    REFERENCE_TIMEOUTS,
    KernelReport,
    bench_lock,
    child_failure,
    parse_report,
    reference_kernel,
    run_kernels,
    stderr_tail,
    timing_from_samples,
)
from schedsearch.evaluate.build import (
    BuildResult,
    build_driver,
    build_kernel,
    machine_error,
    prepare_builds,
    settle_fault,
)
from schedsearch.evaluate.cache import install, private_cache_dir, verified
from schedsearch.evaluate.interference import evidence_of, of_node
from schedsearch.evaluate.machine import machine_info
from schedsearch.evaluate.process import ChildResult
from schedsearch.evaluate.quiet import quiet, working
from schedsearch.evaluate.verification import atol_scale, verification_rounds
from schedsearch.targets import reference_flags


@contextlib.contextmanager
def _infrastructure_errors(cache_dir: Path) -> Iterator[None]:
    """A cache directory we cannot use or write (full, read-only, someone else's) or a
    driver we cannot start is broken infrastructure, not a candidate's fault: raise one
    clear InfrastructureError."""
    private_cache_dir(cache_dir)
    try:
        yield
    except OSError as e:
        raise InfrastructureError(
            f"cannot build or run kernels with the cache directory {cache_dir} ({e.strerror or e})"
        ) from e


#: The slowest rate (FLOP/s) the unscheduled kernel is given time for: at large sizes one
#: call of it takes longer than ``run_timeout``, which is meant for scheduled candidates.
SLOWEST_REFERENCE_RATE = 1e8
#: The driver gives up on a kernel whose one call takes over a quarter of its timeout.
_CALLS_PER_TIMEOUT = 4
#: An unscheduled kernel whose one call takes longer is timed by that call: its baseline
#: needs no more precision than one call of a second gives, and each call more costs the
#: search that much of its budget.
ONE_CALL_SECONDS = 1.0


def for_reference(workload: Workload, config: BenchConfig) -> BenchConfig:
    """``config`` with the unscheduled kernel's run timeout: ``run_timeout``, or long enough
    for calls at ``SLOWEST_REFERENCE_RATE``, whichever is longer."""
    needed = _CALLS_PER_TIMEOUT * (workload.flops or 0) / SLOWEST_REFERENCE_RATE
    return config if needed <= config.run_timeout else dataclasses.replace(config, run_timeout=needed)


def _build_both(
    workload: Workload, reference: Candidate, candidate: Candidate, config: BenchConfig, cache_dir: Path
) -> tuple[Path, BuildResult, BuildResult]:
    driver = build_driver(workload.args, config, cache_dir)
    cand = _built(candidate, reference, config, cache_dir)
    if candidate.fingerprint == reference.fingerprint and reference_config(config) == config:
        return driver, cand, cand
    return driver, cand, build_reference(reference, config, cache_dir)


def _built(candidate: Candidate, reference: Candidate, config: BenchConfig, cache_dir: Path) -> BuildResult:
    """``candidate`` built, a suspected machine fault settled by building ``reference``
    afresh (``build.settle_fault``); a fault on the reference itself is the machine's."""
    result = build_kernel(candidate.c_source, config, cache_dir, openmp=candidate.uses_openmp)
    if result.fault and candidate.fingerprint == reference.fingerprint:
        raise machine_error(config, result.fault)
    return settle_fault(result, reference.c_source, config, cache_dir, openmp=candidate.uses_openmp)


def reference_config(config: BenchConfig) -> BenchConfig:
    """``config`` as the reference is built with: without the float mode's own flags."""
    flags = reference_flags(config.cflags, config.float_mode)
    return config if flags == tuple(config.cflags) else dataclasses.replace(config, cflags=flags)


def build_reference(reference: Candidate, config: BenchConfig, cache_dir: Path) -> BuildResult:
    """Build the unscheduled proc whose outputs are the answer key (strict float arithmetic).
    It is the known-good code: a suspected machine fault building it is the machine's."""
    result = build_kernel(reference.c_source, reference_config(config), cache_dir, openmp=reference.uses_openmp)
    if result.fault:
        raise machine_error(config, result.fault)
    return result


def answer_key(
    driver: Path, ref_build: BuildResult, args: Sequence[ArgSpec], config: BenchConfig, cache_dir: Path
) -> tuple[Path | None, tuple[Status, str] | None]:
    """The answer key for ``args``: the path of the file the driver's ``run`` checks
    kernels against (``harness``), computed with ``ref_build`` (the unscheduled proc) if
    the cache has none, or why it could not be. Call with the bench lock held."""
    path, failure, _ = timed_answer_key(driver, ref_build, args, config, cache_dir)
    return path, failure


def timed_answer_key(
    driver: Path, ref_build: BuildResult, args: Sequence[ArgSpec], config: BenchConfig, cache_dir: Path
) -> tuple[Path | None, tuple[Status, str] | None, float | None]:
    """``answer_key``, and the seconds the unscheduled proc's call on the first input set
    took when the key was computed now (None when it came from the cache)."""
    assert ref_build.path is not None
    # The argument list decides which buffers are outputs and how the inputs are drawn.
    signature = sha256_text(json.dumps([a.to_json() for a in args], sort_keys=True))[:16]
    path = Path(cache_dir) / "reference" / f"{ref_build.key}-{signature}-{config.seed}.out"
    if verified(path):
        return path, None, None
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(6)}")
    try:
        res = reference_kernel(driver, ref_build.path, tmp, config)
        failure = child_failure(res, "the reference kernel", config.run_timeout * REFERENCE_TIMEOUTS)
        if failure is not None:
            return None, failure, None
        install(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path, None, _first_call(res.stdout)


def _first_call(stdout: str) -> float | None:
    """The seconds of the ``first 0 <seconds>`` line the driver's ``reference`` mode prints."""
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[:2] == ["first", "0"]:
            with contextlib.suppress(ValueError):
                return float(parts[2])
    return None


def _measurement_from_report(
    workload: Workload,
    candidate: Candidate,
    report_index: int,
    res: ChildResult,
    count: int,
    config: BenchConfig,
    build_seconds: float,
    machine: MachineInfo,
) -> Measurement:
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


def _quiet_gate(config: BenchConfig, cache_dir: Path) -> Callable[[], AbstractContextManager[object]] | None:
    """What a timing that must be quiet runs inside: the node's builds and expansions paused
    (``evaluate.quiet``) unless timing is shared; verification and one-call timings run
    before it."""
    if config.timing is TimingMode.SHARED:
        return None
    return lambda: quiet(cache_dir)


class _Gate:
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

    def record(self, report: KernelReport, yardstick: KernelReport | None, fingerprint: str) -> None:
        """Tell the node what this timing showed (auto timing only)."""
        if self.config.timing is not TimingMode.AUTO or self.quiet is None:
            return
        paired = yardstick.samples if yardstick is not None else ()
        of_node(self.cache_dir).record(evidence_of(report.samples, paired, fingerprint if paired else "", self.quiet))


@dataclass(frozen=True, slots=True)
class Built:
    """A candidate compiled and ready to run on the node that built it (the paths are
    in that node's cache directory): the hand-off from a builder to the benchmark runner."""

    fingerprint: str
    driver: Path
    kernel: BuildResult
    reference: BuildResult
    yardstick: BuildResult | None = None  # the kernel to time it beside (``core.Paired``)
    yardstick_fingerprint: str = ""


def evaluate_candidate(
    workload: Workload,
    reference: Candidate,
    candidate: Candidate,
    config: BenchConfig,
    cache_dir: Path,
    cutoff: float | None = None,
    contend: float | None = None,
    yardstick: Candidate | None = None,
    quiet: bool = False,
) -> Measurement:
    """Build ``candidate``, then (holding the node's benchmark lock) verify it against
    ``reference`` and time it: ``build_candidate`` followed by ``run_candidate``. With a
    ``yardstick``, the candidate is timed beside it in one process and the measurement
    carries the yardstick's times (``Measurement.paired``); with ``quiet``, the node's other
    work is paused for the timing whatever auto timing found (``Job.quiet``).

    Never raises for anything the candidate does: the result's status is ``ok``,
    ``build_error`` (with the tail of the compiler's message), ``run_error`` (with the signal
    name), ``timeout`` or ``wrong_result`` (with the max error and the first bad element).
    Raises ToolchainError if the compiler is unusable, InfrastructureError when a build
    fails for the machine's reasons (a full disk, a killed compiler, an unusable cache),
    and SearchError if the reference
    itself cannot be built or run (when ``candidate`` is the reference, that is reported as
    its status instead).
    """
    built = build_candidate(workload, reference, candidate, config, cache_dir, yardstick)
    if isinstance(built, Measurement):
        return built
    return run_candidate(workload, reference, candidate, built, config, cache_dir, cutoff, contend, quiet)


def prepare_node(config: BenchConfig, cache_dir: Path, header: str | None) -> bool:
    """Make ready what this node's builds of kernels including ``header`` share, ahead of
    them (``build.prepare_builds``), as a build: paused while a kernel is timed. Returns
    whether something was made ready."""
    with _infrastructure_errors(cache_dir), working(cache_dir):
        return prepare_builds(config, Path(cache_dir), header)


def build_candidate(
    workload: Workload,
    reference: Candidate,
    candidate: Candidate,
    config: BenchConfig,
    cache_dir: Path,
    yardstick: Candidate | None = None,
) -> Built | Measurement:
    """Compile ``candidate`` (and the reference, the driver and the ``yardstick``, usually
    cache hits): a ``Built`` for the benchmark runner, or the ``build_error`` Measurement.
    Runs no kernel, so any number of builds may run beside a benchmark. A yardstick that
    does not build is left out (the candidate is timed alone). Raises as
    ``evaluate_candidate`` does."""
    with _infrastructure_errors(cache_dir), working(cache_dir):
        driver, cand, ref = _build_both(workload, reference, candidate, config, Path(cache_dir))
        if not cand.ok:
            return Measurement(
                candidate.fingerprint,
                Status.BUILD_ERROR,
                error=cand.error,
                build_seconds=cand.seconds,
                machine=machine_info(config),
            )
        if not ref.ok:
            raise SearchError(f"The unscheduled proc {workload.label} does not compile: {ref.error}")
        yard = None
        if yardstick is not None and yardstick.fingerprint != candidate.fingerprint:
            yard = _built(yardstick, reference, config, Path(cache_dir))
            if not yard.ok or yardstick.uses_openmp != candidate.uses_openmp:
                yard = None  # a yardstick is only worth its time run the same way as the candidate
        return Built(
            candidate.fingerprint,
            driver,
            cand,
            ref,
            yard,
            yardstick.fingerprint if yard and yardstick is not None else "",
        )


def run_candidate(
    workload: Workload,
    reference: Candidate,
    candidate: Candidate,
    built: Built,
    config: BenchConfig,
    cache_dir: Path,
    cutoff: float | None = None,
    contend: float | None = None,
    quiet: bool = False,
) -> Measurement:
    """Verify a built candidate against the reference and time it, holding the node's
    benchmark lock (one timing at a time per node); one whose verification call takes more
    than ``cutoff`` seconds is timed by that call alone, one whose warm call takes more than
    ``contend`` seconds with the fewest samples; beside ``built.yardstick`` when it has one;
    ``quiet``: with the node's other work paused whatever auto timing found.
    Raises as ``evaluate_candidate`` does."""
    with _infrastructure_errors(cache_dir):
        return _run(workload, reference, candidate, built, config, Path(cache_dir), cutoff, contend, quiet)


def _run(
    workload: Workload,
    reference: Candidate,
    candidate: Candidate,
    built: Built,
    config: BenchConfig,
    cache_dir: Path,
    cutoff: float | None,
    contend: float | None = None,
    quiet: bool = False,
) -> Measurement:
    machine = machine_info(config)
    cand, ref = built.kernel, built.reference
    assert cand.path is not None
    is_root = candidate.fingerprint == reference.fingerprint
    if is_root:
        config = for_reference(workload, config)
        cutoff = max(cutoff or 0.0, ONE_CALL_SECONDS)
    with bench_lock(cache_dir):
        started = time.perf_counter()
        ref_file, failure, first = timed_answer_key(
            built.driver, ref, workload.args, for_reference(workload, config), cache_dir
        )
        if (
            is_root
            and failure is None
            and first is not None
            and first > (cutoff or ONE_CALL_SECONDS)
            and cand.key == ref.key
        ):
            # The root built as the reference is the reference: its outputs are the answer key
            # itself, and a call this slow is timed by one call, which the key just took.
            return Measurement(
                candidate.fingerprint,
                Status.OK,
                timing=timing_from_samples([first], 1),
                max_error=0.0,
                build_seconds=cand.seconds,
                run_seconds=time.perf_counter() - started,
                machine=machine,
            )
        if failure is not None:
            if is_root:
                return Measurement(
                    candidate.fingerprint,
                    failure[0],
                    error=failure[1],
                    build_seconds=cand.seconds,
                    run_seconds=time.perf_counter() - started,
                    machine=machine,
                )
            raise SearchError(f"The unscheduled proc {workload.label} cannot be run: {failure[1]}")
        assert ref_file is not None
        kernels = [cand.path] + ([built.yardstick.path] if built.yardstick and built.yardstick.path else [])
        gate = _Gate(config, cache_dir, required=quiet)
        res = run_kernels(
            built.driver,
            ref_file,
            kernels,
            config,
            pin=not candidate.uses_openmp,
            scale=atol_scale(workload),
            rounds=verification_rounds(candidate.uses_openmp),
            cutoff=cutoff,
            contend=contend,
            gate=gate,
            pair=len(kernels) == 2,
        )
    m = _measurement_from_report(workload, candidate, 0, res, len(kernels), config, cand.seconds, machine)
    if m.status is Status.OK:
        m = dataclasses.replace(m, quiet=gate.quiet)
    reports = parse_report(res.stdout, len(kernels))
    gate.record(reports[0], reports[1] if len(kernels) == 2 else None, built.yardstick_fingerprint)
    if len(kernels) == 2 and m.status is Status.OK:
        yard = reports[1]
        if yard.samples:
            timing = timing_from_samples(yard.samples, yard.inner)
            m = dataclasses.replace(m, paired=Paired(built.yardstick_fingerprint, timing))
        elif yard.spared:  # an also-ran: the search scales it by its latest pairings (``Paired``)
            m = dataclasses.replace(m, paired=Paired(built.yardstick_fingerprint, None))
    return m


def remeasure(
    workload: Workload,
    reference: Candidate,
    candidates: Sequence[Candidate],
    config: BenchConfig,
    cache_dir: Path,
) -> list[Measurement]:
    """Time finalists side by side in ONE process with interleaved rounds (input order out).

    Each round times one sample of every candidate in turn, so slow drifts of the machine
    hit all of them alike; statistics are the same as ``evaluate_candidate``'s. If the joint
    run fails (a crash or hang cannot be pinned on one kernel), every candidate is
    evaluated on its own instead so each gets its own status.
    """
    if not candidates:
        return []
    with _infrastructure_errors(cache_dir):
        return _remeasure(workload, reference, candidates, config, Path(cache_dir))


def _remeasure(
    workload: Workload,
    reference: Candidate,
    candidates: Sequence[Candidate],
    config: BenchConfig,
    cache_dir: Path,
) -> list[Measurement]:
    machine = machine_info(config)
    driver = build_driver(workload.args, config, cache_dir)
    ref = build_reference(reference, config, cache_dir)
    if not ref.ok:
        raise SearchError(f"The unscheduled proc {workload.label} does not compile: {ref.error}")
    builds = [_built(c, reference, config, cache_dir) for c in candidates]
    results: list[Measurement | None] = [
        None
        if b.ok
        else Measurement(c.fingerprint, Status.BUILD_ERROR, error=b.error, build_seconds=b.seconds, machine=machine)
        for c, b in zip(candidates, builds, strict=True)
    ]
    live = [i for i, b in enumerate(builds) if b.ok]
    if not live:
        return [m for m in results if m is not None]
    pin = not any(candidates[i].uses_openmp for i in live)
    timeout = sum(
        for_reference(workload, config).run_timeout if c.fingerprint == reference.fingerprint else config.run_timeout
        for c in (candidates[i] for i in live)
    )
    with bench_lock(cache_dir):
        ref_file, failure = answer_key(driver, ref, workload.args, for_reference(workload, config), cache_dir)
        if failure is not None:
            raise SearchError(f"The unscheduled proc {workload.label} cannot be run: {failure[1]}")
        assert ref_file is not None
        paths = [builds[i].path for i in live]
        res = run_kernels(
            driver,
            ref_file,
            [p for p in paths if p is not None],
            config,
            pin=pin,
            scale=atol_scale(workload),
            rounds=verification_rounds(not pin),
            timeout=timeout,
            gate=_quiet_gate(config, cache_dir),
        )
    if res.returncode != 0:
        return [
            m if m is not None else evaluate_candidate(workload, reference, c, config, cache_dir)
            for c, m in zip(candidates, results, strict=True)
        ]
    for slot, i in enumerate(live):
        results[i] = _measurement_from_report(
            workload, candidates[i], slot, res, len(live), config, builds[i].seconds, machine
        )
    return [m for m in results if m is not None]
