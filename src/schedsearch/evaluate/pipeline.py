"""Build -> verify -> benchmark one candidate.

These are plain module-level functions over records so that they can run anywhere: in the
search process, in a subprocess, or inside a Ray worker on another node. Guarantees: a
candidate's failure is its Measurement's status, never an exception; broken infrastructure (an
unusable compiler or cache, a reference that does not build or run) raises; the builder's half
(``build_candidate``) runs no kernel, and the benchmark runner's half (``run_candidate``) holds
the node's benchmark lock, so one kernel is timed at a time per node.

The reference and its answer key are ``reference``'s; what a timing runs inside and how its
report reads, ``timing``'s; finalists side by side, ``side_by_side``'s; how strictly outputs
are checked, ``verification``'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from schedsearch.core import BenchConfig, Candidate, Measurement, Status, Workload
from schedsearch.errors import InfrastructureError, SearchError
from schedsearch.evaluate.bench import bench_lock, parse_report, run_kernels, timing_from_samples
from schedsearch.evaluate.build import (
    BuildResult,
    build_driver,
    build_kernel,
    machine_error,
    prepare_builds,
    settle_fault,
)
from schedsearch.evaluate.cache import private_cache_dir
from schedsearch.evaluate.machine import machine_info
from schedsearch.evaluate.quiet import working
from schedsearch.evaluate.reference import build_reference, for_reference, reference_config, timed_answer_key
from schedsearch.evaluate.timing import Gate, measurement_from_report
from schedsearch.evaluate.verification import atol_scale, verification_rounds

#: An unscheduled kernel whose one call takes longer is timed by that call: its baseline
#: needs no more precision than one call of a second gives, and each call more costs the
#: search that much of its budget.
ONE_CALL_SECONDS = 1.0


@contextlib.contextmanager
def infrastructure_errors(cache_dir: Path) -> Iterator[None]:
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


def _build_both(
    workload: Workload, reference: Candidate, candidate: Candidate, config: BenchConfig, cache_dir: Path
) -> tuple[Path, BuildResult, BuildResult]:
    driver = build_driver(workload.args, config, cache_dir)
    cand = build_settled(candidate, reference, config, cache_dir)
    if candidate.fingerprint == reference.fingerprint and reference_config(config) == config:
        return driver, cand, cand
    return driver, cand, build_reference(reference, config, cache_dir)


def build_settled(candidate: Candidate, reference: Candidate, config: BenchConfig, cache_dir: Path) -> BuildResult:
    """``candidate`` built, a suspected machine fault settled by building ``reference``
    afresh (``build.settle_fault``); a fault on the reference itself is the machine's."""
    result = build_kernel(candidate.c_source, config, cache_dir, openmp=candidate.uses_openmp)
    if result.fault and candidate.fingerprint == reference.fingerprint:
        raise machine_error(config, result.fault)
    return settle_fault(result, reference.c_source, config, cache_dir, openmp=candidate.uses_openmp)


@dataclass(frozen=True, slots=True)
class Built:
    """A candidate compiled and ready to run on the node that built it (the paths are
    in that node's cache directory): the hand-off from a builder to the benchmark runner."""

    fingerprint: str
    driver: Path
    kernel: BuildResult
    reference: BuildResult


def evaluate_candidate(
    workload: Workload,
    reference: Candidate,
    candidate: Candidate,
    config: BenchConfig,
    cache_dir: Path,
    cutoff: float | None = None,
) -> Measurement:
    """Build ``candidate``, then (holding the node's benchmark lock) verify it against
    ``reference`` and time it: ``build_candidate`` followed by ``run_candidate``.

    Never raises for anything the candidate does: the result's status is ``ok``,
    ``build_error`` (with the tail of the compiler's message), ``run_error`` (with the signal
    name), ``timeout`` or ``wrong_result`` (with the max error and the first bad element).
    Raises ToolchainError if the compiler is unusable, InfrastructureError when a build
    fails for the machine's reasons (a full disk, a killed compiler, an unusable cache),
    and SearchError if the reference
    itself cannot be built or run (when ``candidate`` is the reference, that is reported as
    its status instead).
    """
    built = build_candidate(workload, reference, candidate, config, cache_dir)
    if isinstance(built, Measurement):
        return built
    return run_candidate(workload, reference, candidate, built, config, cache_dir, cutoff)


def prepare_node(config: BenchConfig, cache_dir: Path, header: str | None) -> bool:
    """Make ready what this node's builds of kernels including ``header`` share, ahead of
    them (``build.prepare_builds``), as a build: paused while a kernel is timed. Returns
    whether something was made ready."""
    with infrastructure_errors(cache_dir), working(cache_dir):
        return prepare_builds(config, Path(cache_dir), header)


def build_candidate(
    workload: Workload,
    reference: Candidate,
    candidate: Candidate,
    config: BenchConfig,
    cache_dir: Path,
) -> Built | Measurement:
    """Compile ``candidate`` (and the reference and the driver, usually cache hits): a
    ``Built`` for the benchmark runner, or the ``build_error`` Measurement. Runs no kernel,
    so any number of builds may run beside a benchmark. Raises as ``evaluate_candidate``
    does."""
    with infrastructure_errors(cache_dir), working(cache_dir):
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
        return Built(candidate.fingerprint, driver, cand, ref)


def run_candidate(
    workload: Workload,
    reference: Candidate,
    candidate: Candidate,
    built: Built,
    config: BenchConfig,
    cache_dir: Path,
    cutoff: float | None = None,
) -> Measurement:
    """Verify a built candidate against the reference and time it, holding the node's
    benchmark lock (one timing at a time per node); one whose verification call takes more
    than ``cutoff`` seconds is timed by that call alone. Raises as ``evaluate_candidate``
    does."""
    with infrastructure_errors(cache_dir):
        return _run(workload, reference, candidate, built, config, Path(cache_dir), cutoff)


def _run(
    workload: Workload,
    reference: Candidate,
    candidate: Candidate,
    built: Built,
    config: BenchConfig,
    cache_dir: Path,
    cutoff: float | None,
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
        # A kernel on several threads is timed with nothing of the node's beside it: the
        # builds would take its cores.
        gate = Gate(config, cache_dir, required=candidate.uses_openmp)
        res = run_kernels(
            built.driver,
            ref_file,
            [cand.path],
            config,
            pin=not candidate.uses_openmp,
            scale=atol_scale(workload),
            rounds=verification_rounds(candidate.uses_openmp),
            cutoff=cutoff,
            gate=gate,
        )
    m = measurement_from_report(workload, candidate, 0, res, 1, config, cand.seconds, machine)
    if m.status is Status.OK:
        m = dataclasses.replace(m, quiet=gate.quiet)
    gate.record(parse_report(res.stdout, 1)[0])
    return m
