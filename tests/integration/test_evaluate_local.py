"""LocalExecutor with a fake expander (real gcc for evaluation)."""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

import pytest

from schedsearch.core import (
    KERNEL_SYMBOL,
    ArgRole,
    ArgSpec,
    BenchConfig,
    Candidate,
    DType,
    Executor,
    ExpandOptions,
    Expansion,
    Job,
    JobKind,
    Rewrite,
    RewriteKind,
    Schedule,
    Status,
    Workload,
    sha256_text,
)
from schedsearch.errors import ReplayError
from schedsearch.evaluate import LocalExecutor

ARGS = (
    ArgSpec("x", ArgRole.TENSOR, DType.F32, (64,)),
    ArgSpec("y", ArgRole.TENSOR, DType.F32, (64,), output=True),
)
FAST = BenchConfig(warmup_seconds=0.001, min_sample_seconds=0.001, samples=3)


def scale_kernel(factor: str, unroll: int = 1) -> Candidate:
    body = "".join(f"y[i + {u}] += {factor} * x[i + {u}]; " for u in range(unroll))
    c = (
        f"void {KERNEL_SYMBOL}(void *ctxt, const float *x, float *y) {{\n"
        f"  for (int i = 0; i < 64; i += {unroll}) {{ {body}}}\n}}\n"
    )
    return Candidate(Schedule(), c, sha256_text(c), proc_text=f"unroll {unroll}")


def make_workload(name: str) -> Workload:
    return Workload(f"{name}.py", name, sha256_text(name), name, (), ARGS)


class FakeExpander:
    """Children: the parent's kernel unrolled by 2 and 4, and one wrong kernel. It runs in
    the executor's worker process: it notes each workload it is made for in ``created``
    (a file), and a parent named "sleeps" or "dies" makes it hang or kill its process."""

    def __init__(self, workload: Workload, options: ExpandOptions, created: Path) -> None:
        with created.open("a") as f:
            f.write(workload.proc + "\n")
        self.options = options

    def expand(self, parent: Candidate) -> Expansion:
        if parent.proc_text == "broken":
            raise ReplayError("step 0 no longer applies", step=0)
        if parent.proc_text == "explodes":
            raise RuntimeError("internal")
        if parent.proc_text == "sleeps":
            time.sleep(600)
        if parent.proc_text == "dies":
            os._exit(3)
        kids = []
        for u in (2, 4):
            k = scale_kernel("2.0f", u)
            step = Rewrite.make(RewriteKind.UNROLL, "i", factor=u)
            kids.append(Candidate(Schedule((step,)), k.c_source, k.fingerprint, k.proc_text, parent.fingerprint, 1))
        return Expansion(parent.fingerprint, tuple(kids), attempted=3, illegal=1)


def executor(tmp_path: Path) -> LocalExecutor:
    factory = functools.partial(FakeExpander, created=tmp_path / "created")
    return LocalExecutor(factory, ExpandOptions(max_unroll=4), FAST, tmp_path)


def test_local_executor_expands_evaluates_and_remeasures(tmp_path: Path) -> None:
    ex = executor(tmp_path)
    assert isinstance(ex, Executor)
    w1, w2 = make_workload("one"), make_workload("two")
    root = scale_kernel("2.0f")
    broken = Candidate(Schedule(), "", "broken-fp", "broken")
    explodes = Candidate(Schedule(), "", "explodes-fp", "explodes")

    exps = list(ex.expand(w1, [root, broken, explodes]))
    assert [e.parent for e in exps] == [root.fingerprint, "broken-fp", "explodes-fp"]
    assert len(exps[0].children) == 2 and exps[0].error == ""
    assert "no longer applies" in exps[1].error and exps[1].children == ()
    assert "RuntimeError" in exps[2].error
    list(ex.expand(w1, [root]))
    list(ex.expand(w2, [root]))
    # one expander per workload, created lazily and kept
    assert (tmp_path / "created").read_text().split() == ["one", "two"]

    wrong = scale_kernel("3.0f")
    kids = list(exps[0].children) + [wrong]
    ms = list(ex.evaluate(w1, root, kids))
    assert [m.fingerprint for m in ms] == [k.fingerprint for k in kids]
    assert [m.status for m in ms] == [Status.OK, Status.OK, Status.WRONG_RESULT]
    assert all(m.machine == ex.machine() for m in ms)

    finals = ex.remeasure(w1, root, [kids[1], root, kids[0]])
    assert [m.fingerprint for m in finals] == [kids[1].fingerprint, root.fingerprint, kids[0].fingerprint]
    assert all(m.status is Status.OK and m.timing is not None for m in finals)

    assert ex.machine() is ex.machine()
    assert any(tmp_path.rglob("*.so"))
    ex.close()


@pytest.mark.serial  # a wall-clock bound on the cancel
def test_cancel_stops_a_running_expansion_at_once_and_the_executor_goes_on(tmp_path: Path) -> None:
    ex = executor(tmp_path)
    w, root = make_workload("one"), scale_kernel("2.0f")
    ex.submit(w, root, [Job(1, JobKind.EXPAND, (Candidate(Schedule(), "", "sleeps-fp", "sleeps"),))])
    assert ex.poll(1.0) == [] and ex.pending() == 1
    started = time.monotonic()
    ex.cancel()
    assert time.monotonic() - started < 3.0 and ex.pending() == 0
    [e] = list(ex.expand(w, [root]))  # a new worker takes over
    assert len(e.children) == 2
    ex.close()


def test_a_dying_worker_fails_only_the_job_it_was_running(tmp_path: Path) -> None:
    ex = executor(tmp_path)
    w, root = make_workload("one"), scale_kernel("2.0f")
    dies = Candidate(Schedule(), "", "dies-fp", "dies")
    exps = list(ex.expand(w, [dies, root]))
    assert [e.parent for e in exps] == ["dies-fp", root.fingerprint]
    assert "died" in exps[0].error and exps[0].children == ()
    assert len(exps[1].children) == 2  # queued behind it, handed to a fresh worker
    ex.close()


def test_cancel_kills_a_spinning_kernel_and_its_worker_quietly(tmp_path: Path) -> None:
    import psutil

    others = {p.pid for p in psutil.Process().children()}  # a Ray cluster an earlier test started
    ex = executor(tmp_path)
    w, root = make_workload("one"), scale_kernel("2.0f")
    spin = f"void {KERNEL_SYMBOL}(void *ctxt, const float *x, float *y) {{ for (;;) {{ y[0] += x[0]; }} }}\n"
    ex.submit(w, root, [Job(1, JobKind.EVALUATE, (Candidate(Schedule(), spin, sha256_text(spin), "spins"),))])
    me = psutil.Process()

    def timing(p: psutil.Process) -> bool:  # the benchmark driver: <cache>/<key>.<ext> run <seed> ...
        try:
            return p.status() != psutil.STATUS_ZOMBIE and p.cmdline()[1:2] == ["run"]
        except (psutil.Error, IndexError):
            return False

    deadline = time.monotonic() + 60
    while not any(timing(p) for p in me.children(recursive=True)):
        assert time.monotonic() < deadline, "the kernel never started"
        assert ex.poll(0.2) == []
    workers = {p.pid for p in me.children()} - others
    ex.cancel()
    time.sleep(0.5)
    left = [p for p in me.children(recursive=True)
            if timing(p) or (p.pid in workers and p.is_running() and p.status() != psutil.STATUS_ZOMBIE)]
    assert not left, [p.cmdline() for p in left]
    [m] = list(ex.evaluate(w, root, [scale_kernel("2.0f", 2)]))  # a new worker takes over
    assert m.status is Status.OK
    ex.close()


def test_a_second_executor_reads_the_first_ones_expansion_from_the_cache(tmp_path: Path) -> None:
    """Expansions are kept in the cache folder: the next search of the same kernel (another
    executor, another process) reads them back instead of asking Exo again."""
    from schedsearch.transforms import Expander, load_workload, root_candidate

    matmul = Path(__file__).resolve().parents[2] / "examples" / "matmul.py"
    workload = load_workload(str(matmul), "sgemm", {"M": 12, "N": 20, "K": 8})
    root = root_candidate(workload)
    got = []
    for _ in range(2):
        with LocalExecutor(Expander, ExpandOptions(), FAST, tmp_path / "cache") as ex:
            (expansion,) = list(ex.expand(workload, [root]))
        got.append(expansion)
    assert not got[0].remembered and got[1].remembered
    assert got[1].children == got[0].children and len(got[0].children) >= 5
    assert list((tmp_path / "cache" / "expansions").rglob("*.json.gz"))
