"""The unscheduled proc as the reference: how it is built, how long it is given, and the
answer key every candidate is checked against.

The answer key (the unscheduled proc run on every seeded input set, ``harness``) is cached
on disk per (reference C, seed, compiler, flags, CPU, harness version): the unscheduled
kernel can be hundreds of times slower than a good one and must not run once per candidate.
Guarantees: the reference is built with strict float arithmetic (without the float mode's own
flags), a suspected machine fault building it is the machine's (it is the known-good code),
and a key is installed whole or not at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from schedsearch.core import ArgSpec, BenchConfig, Candidate, Status, Workload, sha256_text
from schedsearch.evaluate.bench import REFERENCE_TIMEOUTS, child_failure, reference_kernel
from schedsearch.evaluate.build import BuildResult, build_kernel, machine_error
from schedsearch.evaluate.cache import install, verified
from schedsearch.targets import reference_flags

#: The slowest rate (FLOP/s) the unscheduled kernel is given time for: at large sizes one
#: call of it takes longer than ``run_timeout``, which is meant for scheduled candidates.
SLOWEST_REFERENCE_RATE = 1e8
#: The driver gives up on a kernel whose one call takes over a quarter of its timeout.
_CALLS_PER_TIMEOUT = 4


def for_reference(workload: Workload, config: BenchConfig) -> BenchConfig:
    """``config`` with the unscheduled kernel's run timeout: ``run_timeout``, or long enough
    for calls at ``SLOWEST_REFERENCE_RATE``, whichever is longer."""
    needed = _CALLS_PER_TIMEOUT * (workload.flops or 0) / SLOWEST_REFERENCE_RATE
    return config if needed <= config.run_timeout else dataclasses.replace(config, run_timeout=needed)


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
