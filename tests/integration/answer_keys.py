"""Helpers for the verification tests: the answer key as arrays, a kernel's verdict with the
driver's own words, and candidates made by editing a real candidate's C."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from schedsearch.core import BenchConfig, Candidate, Schedule, Workload, sha256_text
from schedsearch.evaluate.bench import KernelReport, bench_lock, parse_report, run_kernels
from schedsearch.evaluate.harness import INPUT_SETS
from schedsearch.evaluate.pipeline import Built, build_candidate
from schedsearch.evaluate.reference import answer_key
from schedsearch.evaluate.verification import atol_scale, verification_rounds


def key_file(workload: Workload, root: Candidate, config: BenchConfig, cache: Path) -> Path:
    """The answer key a search of ``workload`` checks candidates against."""
    built = build_candidate(workload, root, root, config, cache)
    assert isinstance(built, Built), built
    with bench_lock(cache):
        path, failure = answer_key(built.driver, built.reference, workload.args, config, cache)
    assert path is not None, failure
    return path


def read_key(workload: Workload, root: Candidate, config: BenchConfig, cache: Path) -> list[dict[str, np.ndarray]]:
    """Each input set of the answer key: every argument by name, each output's reference
    values as ``<name>.ref`` and each float output's magnitudes as ``<name>.mag``."""
    data = key_file(workload, root, config, cache).read_bytes()
    sets, off = [], _padded(data.index(b"\n") + 1)
    for _ in range(INPUT_SETS):
        arrays: dict[str, np.ndarray] = {}
        for a in workload.args:
            shape = a.shape or (1,)
            for suffix, dtype, size in [("", a.dtype.numpy_name, a.nbytes)] + (
                    [(".ref", a.dtype.numpy_name, a.nbytes)] if a.output else []) + (
                    [(".mag", "float64", 8 * max(1, a.elements))] if a.output and a.dtype.is_float else []):
                arrays[a.name + suffix] = np.frombuffer(data[off:off + size], dtype).reshape(shape)
                off += _padded(size)
        sets.append(arrays)
    assert off == len(data)
    return sets


def _padded(size: int) -> int:
    """Every piece of the answer key starts at a multiple of 64 bytes."""
    return (size + 63) // 64 * 64


def tolerance(workload: Workload, arrays: dict[str, np.ndarray], output: str, config: BenchConfig) -> np.ndarray:
    """The elementwise tolerance the driver allows ``output`` on one input set
    (``verification``): scale * u * mag + rtol * |ref|."""
    u = float(np.finfo(arrays[output].dtype).eps) / 2
    return atol_scale(workload) * u * arrays[output + ".mag"] + config.rtol * np.abs(arrays[output + ".ref"].astype(np.float64))


def report_of(workload: Workload, root: Candidate, cand: Candidate, config: BenchConfig,
              cache: Path) -> tuple[KernelReport, str]:
    """What the driver says of ``cand``, verified and timed as a search would, and its output."""
    built = build_candidate(workload, root, cand, config, cache)
    assert isinstance(built, Built), built
    assert built.kernel.path is not None
    key = key_file(workload, root, config, cache)
    with bench_lock(cache):
        res = run_kernels(built.driver, key, [built.kernel.path], config, pin=not cand.uses_openmp,
                          scale=atol_scale(workload), rounds=verification_rounds(cand.uses_openmp))
    return parse_report(res.stdout, 1)[0], res.stdout


def from_c(c: str) -> Candidate:
    return Candidate(Schedule(), c, sha256_text(c), proc_text="")


def edited(cand: Candidate, old: str, new: str) -> Candidate:
    """``cand`` with one piece of its C replaced."""
    assert cand.c_source.count(old) == 1, old
    return from_c(cand.c_source.replace(old, new))


def appended(cand: Candidate, statement: str) -> Candidate:
    """``cand`` with ``statement`` run after everything else the kernel does."""
    c = cand.c_source.rstrip()
    assert c.endswith("}")
    return from_c(c[:-1] + statement + "\n}\n")


def prepended(cand: Candidate, statement: str) -> Candidate:
    """``cand`` with ``statement`` run before everything else the kernel does."""
    c = cand.c_source
    head = c.rindex("void schedsearch_kernel(")
    body = c.index("{", head) + 1
    return from_c(c[:body] + "\n" + statement + c[body:])
