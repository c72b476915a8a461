"""Call one kernel once on the first seeded input set and hand back the raw buffers."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from schedsearch.core import BenchConfig, Candidate, Workload
from schedsearch.errors import SearchError
from schedsearch.evaluate.bench import REFERENCE_TIMEOUTS, child_failure, dump_kernel, parse_report
from schedsearch.evaluate.build import build_driver, build_kernel, machine_error
from schedsearch.evaluate.cache import private_cache_dir


@dataclass(frozen=True, slots=True)
class KernelIO:
    """Raw bytes of one call: every argument before it and every output after it."""

    inputs: dict[str, bytes]  # every argument's initial contents, by name
    outputs: dict[str, bytes]  # every output argument after one call, by name
    seconds: float  # duration of that call


def run_once(workload: Workload, candidate: Candidate, config: BenchConfig, cache_dir: Path) -> KernelIO:
    """Build ``candidate`` and call it once on the first seeded input set; return the raw
    buffers.

    For checks against an independent implementation (numpy) and for debugging. Raises
    SearchError if the candidate does not build or run (InfrastructureError if that may be
    the machine's fault: there is no known-good code here to tell).
    """
    cache_dir = private_cache_dir(Path(cache_dir))
    driver = build_driver(workload.args, config, cache_dir)
    b = build_kernel(candidate.c_source, config, cache_dir, openmp=candidate.uses_openmp)
    if b.fault:
        raise machine_error(config, b.fault)
    if not b.ok or b.path is None:
        raise SearchError(f"The candidate does not compile: {b.error}")
    tmp = cache_dir / "tmp" / f"io-{os.getpid()}-{secrets.token_hex(6)}"
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        res = dump_kernel(driver, b.path, tmp / "in", tmp / "out", config)
        failure = child_failure(res, "the kernel", config.run_timeout * REFERENCE_TIMEOUTS)
        if failure is not None:
            raise SearchError(failure[1])
        raw_in, raw_out = (tmp / "in").read_bytes(), (tmp / "out").read_bytes()
    finally:
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
    inputs: dict[str, bytes] = {}
    outputs: dict[str, bytes] = {}
    off_in = off_out = 0
    for a in workload.args:
        size = a.nbytes
        inputs[a.name] = raw_in[off_in : off_in + size]
        off_in += size
        if a.output:
            outputs[a.name] = raw_out[off_out : off_out + size]
            off_out += size
    seconds = parse_report(res.stdout, 1)[0].first or 0.0
    return KernelIO(inputs, outputs, seconds)
