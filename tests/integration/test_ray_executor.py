"""RayExecutor on a real private Ray cluster with real Exo and gcc (sgemm at 32^3)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from schedsearch.core import (
    BenchConfig,
    Candidate,
    EventKind,
    Executor,
    ExpandOptions,
    Expansion,
    SearchConfig,
    SearchStatus,
    Status,
)
from schedsearch.errors import ClusterError
from schedsearch.search import make_strategy, run_search
from schedsearch.store import InMemoryStore

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]
MATMUL = REPO / "examples" / "matmul.py"


@pytest.fixture(scope="module")
def sgemm():
    from schedsearch.transforms import load_workload, root_candidate

    workload = load_workload(str(MATMUL), "sgemm", {"M": 32, "N": 32, "K": 32})
    return workload, root_candidate(workload)


def test_is_an_executor(ray_executor) -> None:
    assert isinstance(ray_executor, Executor)
    info = ray_executor.machine()
    assert info.cores >= 1 and info.compiler_version


def test_a_private_cluster_describes_the_machine_its_workers_see(ray_executor) -> None:
    # The executor answers for the cluster it started without asking a worker (that would
    # wait for a worker process to start); the answer must be the one a worker gives.
    import ray

    from schedsearch.evaluate.ray_worker import _machine_task

    from tests.integration.conftest import FAST_BENCH

    seen_by_a_worker = ray.get(ray.remote(num_cpus=0)(_machine_task).remote(FAST_BENCH), timeout=120)
    assert ray_executor.machine() == seen_by_a_worker
    assert seen_by_a_worker.fingerprint == ray_executor.machine().fingerprint


def test_the_targets_header_is_precompiled_before_any_kernel_is_built(ray_executor, tmp_path) -> None:
    # A search of an AVX2 target has its header precompiled on a build core while the root
    # is expanded, not by the first builds of the root's children after that.
    from schedsearch.evaluate.ray_backend import RayExecutor
    from schedsearch.transforms import Expander

    from tests.integration.conftest import FAST_BENCH

    cache = tmp_path / "cache"
    executor = RayExecutor(Expander, ExpandOptions(target="avx2"), FAST_BENCH, workers=2, cache_dir=cache)
    try:
        deadline = time.monotonic() + 120
        while not list(cache.glob("build/*/*.h.gch")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(list(cache.glob("build/*/*.h.gch"))) == 1
        assert not list(cache.glob("build/*/*.so"))  # no kernel was asked for
    finally:
        executor.close()


def test_expands_and_streams_evaluations_of_a_real_matmul(ray_executor, sgemm) -> None:
    workload, root = sgemm
    (expansion,) = list(ray_executor.expand(workload, [root]))
    assert expansion.parent == root.fingerprint and not expansion.error
    assert len(expansion.children) >= 4
    assert all(c.parent == root.fingerprint and c.depth == 1 for c in expansion.children)
    assert len({c.fingerprint for c in expansion.children}) == len(expansion.children)

    # The children of two parents at once: one Expansion each, whatever the completion order.
    parents = list(expansion.children[:2])
    both = list(ray_executor.expand(workload, parents))
    assert sorted(e.parent for e in both) == sorted(p.fingerprint for p in parents)

    batch = [root, *expansion.children[:6]]
    started = time.perf_counter()
    arrivals = []
    results = []
    for m in ray_executor.evaluate(workload, root, batch):
        arrivals.append(time.perf_counter() - started)
        results.append(m)
    assert sorted(m.fingerprint for m in results) == sorted(c.fingerprint for c in batch)
    by_fp = {m.fingerprint: m for m in results}
    assert by_fp[root.fingerprint].status is Status.OK and by_fp[root.fingerprint].seconds > 0
    assert sum(m.status is Status.OK for m in results) >= 4
    assert all(m.status is not Status.OK or m.timing.median > 0 for m in results)
    # Streamed: the first result is in hand well before the last one.
    assert arrivals[0] < arrivals[-1]


def test_a_child_is_expanded_by_the_actor_that_made_it(ray_executor) -> None:
    """The actor that made a child holds its proc: expanded there, nothing is replayed. The
    root alone is sharded over both actors (even proposals on one, odd on the other); two
    children from different actors submitted together each go home, in either order
    (a plain rotation over the actors would send one of the two pairs the wrong way)."""
    from schedsearch.transforms import load_workload, root_candidate

    # sizes no other test expands: an expansion read back from the disk cache holds no procs
    workload = load_workload(str(MATMUL), "sgemm", {"M": 32, "N": 32, "K": 24})
    root = root_candidate(workload)
    (expansion,) = list(ray_executor.expand(workload, [root]))
    assert not expansion.error and not expansion.remembered and expansion.replayed == 0
    even = [c for c, pos in zip(expansion.children, expansion.order, strict=True) if pos % 2 == 0]
    odd = [c for c, pos in zip(expansion.children, expansion.order, strict=True) if pos % 2 == 1]
    assert len(even) >= 2 and len(odd) >= 2
    for pair in ([even[0], odd[0]], [odd[1], even[1]]):
        done = {e.parent: e for e in ray_executor.expand(workload, pair)}
        assert [done[c.fingerprint].error for c in pair] == ["", ""]
        assert [done[c.fingerprint].replayed for c in pair] == [0, 0]


def test_an_idle_actor_takes_an_expansion_waiting_for_a_busy_one(ray_executor) -> None:
    """Three children made by one actor, submitted together, all queue at that actor (it
    holds their procs); the other actor, idle, does not wait: it rebuilds one of the
    parents (``replayed`` > 0) and expands it meanwhile."""
    from schedsearch.transforms import load_workload, root_candidate

    # sizes no other test expands: an expansion read back from the disk cache holds no procs
    workload = load_workload(str(MATMUL), "sgemm", {"M": 24, "N": 32, "K": 32})
    root = root_candidate(workload)
    (expansion,) = list(ray_executor.expand(workload, [root]))
    assert not expansion.error and expansion.replayed == 0
    even = [c for c, pos in zip(expansion.children, expansion.order, strict=True) if pos % 2 == 0]
    assert len(even) >= 3
    done = {e.parent: e for e in ray_executor.expand(workload, even[:3])}
    assert [done[c.fingerprint].error for c in even[:3]] == ["", "", ""]
    assert sum(1 for c in even[:3] if done[c.fingerprint].replayed > 0) >= 1


@pytest.mark.parametrize("all_heavy_first", [False, True])
def test_a_streamed_expansion_comes_back_shard_by_shard(ray_executor, all_heavy_first) -> None:
    """A ``stream`` job is cut into STREAM_SHARDS_PER_ACTOR shards per actor (and
    STREAM_LEADS_PER_ACTOR more with ``all_heavy_first``), each sent back as it finishes,
    ``final`` on the last; together they hold the unstreamed children. The first shard of
    each actor holds one of the first register tiles alone - with ``all_heavy_first`` its
    first STREAM_LEADS_PER_ACTOR shards do, one tile each."""
    from schedsearch.core import Job, JobKind, RewriteKind
    from schedsearch.evaluate.ray_backend import STREAM_LEADS_PER_ACTOR, STREAM_SHARDS_PER_ACTOR
    from schedsearch.transforms import load_workload, root_candidate

    workload = load_workload(str(MATMUL), "sgemm", {"M": 32, "N": 32, "K": 16})
    root = root_candidate(workload)
    job_id = 7001 + all_heavy_first
    ray_executor.submit(workload, root, [Job(job_id, JobKind.EXPAND, (root,), stream=True,
                                             all_heavy_first=all_heavy_first)])
    results = []
    deadline = time.monotonic() + 300
    while not (results and results[-1].final) and time.monotonic() < deadline:
        results += [r for r in ray_executor.poll(0.25) if r.job.id == job_id]
    actors = len(ray_executor._actors)
    lead = actors * (STREAM_LEADS_PER_ACTOR if all_heavy_first else 1)
    shards = actors * STREAM_SHARDS_PER_ACTOR + (lead if all_heavy_first else 0)
    assert len(results) == shards
    assert [r.final for r in results] == [False] * (shards - 1) + [True]
    assert all(not r.expansion.error for r in results)
    streamed = {c.fingerprint for r in results for c in r.expansion.children}
    (whole,) = list(ray_executor.expand(workload, [root]))
    assert streamed == {c.fingerprint for c in whole.children}
    positions = sorted(p for r in results for p in r.expansion.order)
    assert positions == sorted(whole.order) or set(whole.order) <= set(positions)
    # the leading shards held one register tile alone each: the first ones proposed (this
    # root has more tiles than actors, fewer than four leading shards per actor)
    tiles = [c.fingerprint for c in whole.children if c.schedule.steps[-1].kind is RewriteKind.REGISTER_TILE]
    assert actors < len(tiles) <= actors * STREAM_LEADS_PER_ACTOR
    leading = [r.expansion for r in results if r.expansion.leading]
    assert all(e.leads == min(lead, len(tiles)) for e in (r.expansion for r in results))
    assert sorted(c.fingerprint for e in leading for c in e.children) == sorted(tiles[:lead])
    assert all(len(e.children) == 1 for e in leading)


def test_an_expansion_asked_for_meanwhile_goes_ahead_of_a_streamed_ones_remaining_shards(ray_executor) -> None:
    """While the root's streamed expansion is shared out, the search asks for a child's
    expansion (the next round, grown from the first likely winner): each actor starts it
    as soon as its current shard is done, before the root's remaining shards."""
    from schedsearch.core import Job, JobKind
    from schedsearch.transforms import load_workload, root_candidate

    # sizes no other test expands: a kept expansion would come back at once
    workload = load_workload(str(MATMUL), "sgemm", {"M": 32, "N": 24, "K": 16})
    root = root_candidate(workload)
    ray_executor.submit(workload, root, [Job(7101, JobKind.EXPAND, (root,), stream=True)])
    order: list[tuple[int, bool]] = []
    child = None
    deadline = time.monotonic() + 300
    while not any(job == 7101 and final for job, final in order) and time.monotonic() < deadline:
        for r in ray_executor.poll(0.25):
            order.append((r.job.id, r.final))
            if child is None and r.job.id == 7101 and r.expansion.children:
                child = r.expansion.children[0]
                ray_executor.submit(workload, root, [Job(7102, JobKind.EXPAND, (child,))])
    while not any(job == 7102 and final for job, final in order) and time.monotonic() < deadline:
        order += [(r.job.id, r.final) for r in ray_executor.poll(0.25)]
    assert child is not None
    root_final = order.index((7101, True))
    child_final = order.index((7102, True))
    assert child_final < root_final, order
    assert ray_executor.pending() == 0


def test_remeasure_returns_input_order(ray_executor, sgemm) -> None:
    workload, root = sgemm
    (expansion,) = list(ray_executor.expand(workload, [root]))
    picks = [root, *expansion.children[:2]]
    ms = ray_executor.remeasure(workload, root, picks)
    assert [m.fingerprint for m in ms] == [c.fingerprint for c in picks]
    assert ms[0].status is Status.OK


def test_closing_a_stream_early_abandons_the_rest(ray_executor, sgemm) -> None:
    workload, root = sgemm
    (expansion,) = list(ray_executor.expand(workload, [root]))
    stream = ray_executor.evaluate(workload, root, list(expansion.children[:6]))
    first = next(stream)
    stream.close()
    assert first.fingerprint in {c.fingerprint for c in expansion.children[:6]}
    # The executor is still usable afterwards.
    (again,) = list(ray_executor.evaluate(workload, root, [root]))
    assert again.status is Status.OK, again.error


def test_a_crashing_expansion_worker_is_an_error_expansion(ray_executor, sgemm, tmp_path) -> None:
    from schedsearch.evaluate.ray_backend import RayExecutor

    workload, root = sgemm

    class Crasher:  # defined here so Ray ships it by value
        def __init__(self, workload, options) -> None:
            pass

        def expand(self, parent: Candidate) -> Expansion:
            os._exit(3)

    executor = RayExecutor(lambda w, o: Crasher(w, o), ExpandOptions(), BenchConfig(), workers=1,
                           cache_dir=tmp_path)
    try:
        (expansion,) = list(executor.expand(workload, [root]))
        assert expansion.children == () and "failed" in expansion.error
    finally:
        executor.close()  # does not shut down the shared session cluster
    (again,) = list(ray_executor.expand(workload, [root]))
    assert again.children


def _runner_class(flag: Path, every_time: bool):
    """A benchmark runner that reports its benchmark killed by SIGKILL: the first time only
    (a node going down, as its runner still reports), or ``every_time`` (an OOM killer's
    doing). Otherwise it times for real."""
    import ray

    from schedsearch.core import Measurement
    from schedsearch.evaluate.ray_worker import _Runner

    class Runner(_Runner):  # defined here so Ray ships it by value
        def run(self, workload, reference, candidate, built, bench, cache_dir, cutoff=None):
            if flag.exists() and not every_time:
                return _Runner.run(self, workload, reference, candidate, built, bench, cache_dir, cutoff)
            flag.touch()
            return Measurement(candidate.fingerprint, Status.RUN_ERROR, error="the benchmark was killed by SIGKILL")

    return ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)(Runner)


@pytest.mark.parametrize("every_time", [False, True])
def test_a_benchmark_killed_from_outside_is_measured_again_before_it_is_blamed(
        ray_executor, sgemm, tmp_path, every_time: bool) -> None:
    from schedsearch.evaluate.ray_backend import RayExecutor
    from schedsearch.transforms import Expander
    from tests.integration.conftest import FAST_BENCH

    workload, root = sgemm
    executor = RayExecutor(Expander, ExpandOptions(), FAST_BENCH, workers=1, cache_dir=tmp_path / "cache")
    try:
        executor._runners.actor_cls = _runner_class(tmp_path / "flag", every_time)
        (m,) = list(executor.evaluate(workload, root, [root]))
        assert executor.requeued == 1  # measured twice, never more
        if every_time:  # killed again: the candidate's after all
            assert m.status is Status.RUN_ERROR and "killed by SIGKILL" in m.error
        else:
            assert m.status is Status.OK, m.error
    finally:
        executor.close()  # does not shut down the shared session cluster


def _expander_processes() -> int:
    import psutil

    count = 0
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        count += cmd.startswith("ray::_ExpanderHost")
    return count


def test_a_cancelled_expander_is_started_anew_only_when_there_is_work_for_it(ray_executor, sgemm, tmp_path) -> None:
    """A busy expander killed by ``cancel`` is not replaced at once: a new actor's start (a
    process importing Exo) would run beside the finalists' timing, which comes next."""
    from schedsearch.core import Job, JobKind
    from schedsearch.evaluate.ray_backend import RayExecutor

    workload, root = sgemm
    list(ray_executor.expand(workload, [root]))  # the session's own expanders are up: not counted below

    class Slow:  # defined here so Ray ships it by value
        def __init__(self, workload, options) -> None:
            pass

        def expand(self, parent: Candidate) -> Expansion:
            time.sleep(30)
            return Expansion(parent.fingerprint, ())

    before = _expander_processes()
    executor = RayExecutor(lambda w, o: Slow(w, o), ExpandOptions(), BenchConfig(), workers=1, cache_dir=tmp_path)
    try:
        executor.submit(workload, root, [Job(1, JobKind.EXPAND, (root,))])
        deadline = time.monotonic() + 30
        while _expander_processes() < before + 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _expander_processes() == before + 1
        time.sleep(1.0)  # the expansion is under way
        executor.cancel()
        time.sleep(3.0)  # what a replacement started at once would need to appear
        assert _expander_processes() == before
        executor.submit(workload, root, [Job(2, JobKind.EXPAND, (root,))])
        deadline = time.monotonic() + 30
        while _expander_processes() < before + 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _expander_processes() == before + 1  # work came: a new expander took it
    finally:
        executor.close()


@pytest.mark.slow
def test_run_search_end_to_end_on_ray(ray_executor, sgemm) -> None:
    workload, root = sgemm
    config = SearchConfig(max_seconds=120, max_candidates=12, max_depth=3, finalists=2, workers=2)
    store = InMemoryStore()
    events = []
    outcome = run_search(workload, root, make_strategy(config), ray_executor, store, config, events.append)
    assert outcome.status is SearchStatus.COMPLETED
    assert outcome.counters.evaluated == 12
    rows = store.candidates(outcome.search_id)
    assert sum(r.status is not Status.PENDING for r in rows) == 12
    assert outcome.best is not None and outcome.best.status is Status.OK
    assert outcome.best_speedup and outcome.best_speedup > 0
    assert any(e.kind is EventKind.FINALISTS for e in events)


def test_unreachable_address_is_a_quick_cluster_error(ray_executor) -> None:
    from schedsearch.evaluate.ray_backend import RayExecutor
    from schedsearch.transforms import Expander

    started = time.monotonic()
    with pytest.raises(ClusterError, match="127.0.0.1:1"):
        RayExecutor(Expander, ExpandOptions(), BenchConfig(), address="127.0.0.1:1")
    assert time.monotonic() - started < 30  # minutes when it hangs; seconds when it refuses


def test_a_malformed_address_is_a_cluster_error() -> None:
    from schedsearch.evaluate.ray_backend import RayExecutor

    with pytest.raises(ClusterError, match="host:port"):
        RayExecutor(None, ExpandOptions(), BenchConfig(), address="no-port-here")


DRIVER = textwrap.dedent("""
    import sys, time
    from schedsearch.core import BenchConfig, ExpandOptions
    from schedsearch.evaluate.ray_backend import RayExecutor
    ex = RayExecutor(None, ExpandOptions(), BenchConfig(), workers=1)
    print(ex.machine().cores, flush=True)
    print("READY", flush=True)
    time.sleep(300)
""")


def processes_with(marker: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries ``marker``."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if marker.encode() in (d / "environ").read_bytes() and b") Z " not in (d / "stat").read_bytes():
                found.append(int(d.name))
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_no_process_outlives_a_driver_killed_with_sigkill() -> None:
    marker = f"SCHEDSEARCH_TEST_{uuid.uuid4().hex}"
    env = {**os.environ, marker: "1"}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        ready = threading.Event()
        threading.Thread(target=lambda: [ready.set() for line in driver.stdout if "READY" in line],
                         daemon=True).start()
        assert ready.wait(90), "driver did not start its cluster"
        time.sleep(1.0)  # let the watchdog see the whole cluster
        assert len(processes_with(marker)) >= 5  # driver, gcs, raylet, agents, worker, watchdog
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 10
        while processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.25)
        left = processes_with(marker)
        assert not left, f"left behind: {left}"
    finally:
        for pid in processes_with(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
