"""Plain core records for store tests, built without Exo: a workload, a machine, a config,
candidates (a tree of them by tag), timings and measurements; and ``stored_tree``, a small
tree of candidates added to a store."""

from __future__ import annotations

from typing import Any

from schedsearch.core import (
    ArgRole,
    ArgSpec,
    BenchConfig,
    Candidate,
    CandidateRecord,
    DType,
    MachineInfo,
    Measurement,
    Rewrite,
    RewriteKind,
    Schedule,
    SearchConfig,
    Status,
    StrategyKind,
    Timing,
    Workload,
    sha256_text,
)


def make_workload(proc: str = "sgemm", n: int = 64, path: str = "/work/examples/matmul.py") -> Workload:
    """A matmul-shaped workload; different ``proc`` or ``n`` give different keys."""
    source = f"# {proc}\n@proc\ndef {proc}(N: size, A: f32[N, N] @ DRAM, C: f32[N, N] @ DRAM):\n    pass  # é ✓\n"
    return Workload(
        path=path,
        source=source,
        source_sha256=sha256_text(source),
        proc=proc,
        sizes=(("N", n), ("K", n * 2)),
        args=(
            ArgSpec("A", ArgRole.TENSOR, DType.F32, (n, n)),
            ArgSpec("alpha", ArgRole.SCALAR, DType.F64),
            ArgSpec("C", ArgRole.TENSOR, DType.F32, (n, n), output=True),
        ),
        flops=2 * n**3 * 1_000_000,  # above 2**31 on purpose
    )


def make_machine() -> MachineInfo:
    return MachineInfo(
        cpu_model="AMD EPYC 9R14",
        cpu_flags_sha="abc123",
        cores=2,
        hostname="node-1",
        compiler="gcc",
        compiler_version="12.2.0",
        cflags=("-O3", "-march=native"),
        exo_version="1.0.0",
    )


def make_config(seed: int = 7) -> SearchConfig:
    return SearchConfig(
        strategy=StrategyKind.BEAM,
        seed=seed,
        max_seconds=None,
        max_candidates=500,
        bench=BenchConfig(cflags=("-O2",), samples=9),
    )


def make_schedule(tag: str, depth: int) -> Schedule:
    """A schedule of ``depth`` steps whose arguments exercise every ArgValue type."""
    steps = tuple(
        Rewrite.make(RewriteKind.SPLIT, f"{tag} #{i}", factor=8 + i, perfect=bool(i % 2), inner=f"{tag}i")
        for i in range(depth)
    )
    return Schedule(steps)


def make_candidate(tag: str, parent: Candidate | None = None) -> Candidate:
    """A candidate named ``tag``; with a parent it is one step deeper than the parent."""
    depth = 0 if parent is None else parent.depth + 1
    c_source = f"void schedsearch_kernel(void *ctxt) {{ /* {tag} — µs */ }}\n"
    return Candidate(
        schedule=make_schedule(tag, depth),
        c_source=c_source,
        fingerprint=sha256_text(c_source),
        proc_text=f"def sgemm():\n    # {tag}\n    pass",
        parent=None if parent is None else parent.fingerprint,
        depth=depth,
    )


def make_timing(seconds: float) -> Timing:
    return Timing(
        median=seconds,
        min=seconds * 0.9,
        q1=seconds * 0.95,
        q3=seconds * 1.1,
        samples=(seconds * 0.9, seconds, seconds * 1.1, 0.1 + 0.2, 1e-9),
        inner=37,
    )


def make_measurement(candidate: Candidate, seconds: float | None = None, status: Status = Status.OK) -> Measurement:
    """``ok`` with a timing when ``seconds`` is given, else a failure with error text."""
    if seconds is None:
        return Measurement(
            candidate.fingerprint,
            status,
            error=f"{status.value}: boom\nline 2",
            build_seconds=0.5,
            machine=make_machine(),
        )
    return Measurement(
        candidate.fingerprint,
        status,
        timing=make_timing(seconds),
        build_seconds=0.25,
        run_seconds=1.5,
        max_error=3.5e-7,
        machine=make_machine(),
    )


def stored_tree(store: Any) -> tuple[int, dict[str, CandidateRecord]]:
    """root -> a -> a1, root -> b: returns the search id and records by tag."""
    sid = store.create_search(make_workload(), make_config(), make_machine())
    root = make_candidate("root")
    a = make_candidate("a", root)
    b = make_candidate("b", root)
    a1 = make_candidate("a1", a)
    recs = {}
    for tag, cand in (("root", root), ("a", a), ("b", b), ("a1", a1)):
        recs[tag] = store.add_candidate(sid, cand)
    return sid, recs
