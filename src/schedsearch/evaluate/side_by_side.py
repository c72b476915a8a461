"""Finalists timed side by side in one process, with interleaved rounds.

Guarantees: one Measurement per candidate, in input order; each round times one sample of
every candidate in turn, so slow drifts of the machine hit all of them alike; a failure of
the joint run that cannot be pinned on one kernel falls back to timing each on its own, so
each gets its own status.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from schedsearch.core import BenchConfig, Candidate, Measurement, Status, Workload
from schedsearch.errors import SearchError
from schedsearch.evaluate.bench import bench_lock, run_kernels
from schedsearch.evaluate.build import build_driver
from schedsearch.evaluate.machine import machine_info
from schedsearch.evaluate.pipeline import build_settled, evaluate_candidate, infrastructure_errors
from schedsearch.evaluate.reference import answer_key, build_reference, for_reference
from schedsearch.evaluate.timing import measurement_from_report, quiet_gate
from schedsearch.evaluate.verification import atol_scale, verification_rounds


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
    with infrastructure_errors(cache_dir):
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
    builds = [build_settled(c, reference, config, cache_dir) for c in candidates]
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
            gate=quiet_gate(config, cache_dir),
        )
    if res.returncode != 0:
        return [
            m if m is not None else evaluate_candidate(workload, reference, c, config, cache_dir)
            for c, m in zip(candidates, results, strict=True)
        ]
    for slot, i in enumerate(live):
        results[i] = measurement_from_report(
            workload, candidates[i], slot, res, len(live), config, builds[i].seconds, machine
        )
    return [m for m in results if m is not None]
