"""Quiet timing with real processes: registered workers (and their children) are paused
while a timing runs, resumed after, and resumed by the next runner if the pauser died."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from schedsearch.evaluate.quiet import quiet, registry, resume_orphans, working

# A busy worker: registers itself, starts a child that spins too, and spins until killed.
WORKER = textwrap.dedent("""
    import subprocess, sys, time
    from schedsearch.evaluate.quiet import working
    with working(sys.argv[1]):
        child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        print(child.pid, flush=True)
        while True:
            pass
""")

# A runner that pauses the others and dies without resuming them.
DYING_RUNNER = textwrap.dedent("""
    import os, sys
    from schedsearch.evaluate.quiet import quiet
    with quiet(sys.argv[1]) as n:
        print(n, flush=True)
        os._exit(9)
""")


def _start_worker(cache: Path) -> tuple[subprocess.Popen[str], psutil.Process, psutil.Process]:
    proc = subprocess.Popen([sys.executable, "-c", WORKER, str(cache)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child = psutil.Process(int(proc.stdout.readline()))
    deadline = time.monotonic() + 10
    while not any(e.name.startswith(f"{proc.pid}-") for e in registry(cache).iterdir()):
        assert time.monotonic() < deadline, "the worker never registered"
        time.sleep(0.01)
    return proc, psutil.Process(proc.pid), child


def _stopped(p: psutil.Process) -> bool:
    """Whether ``p`` is stopped (a stop signal takes effect when the process is next
    scheduled: on a loaded machine /proc may say "running" for a moment)."""
    deadline = time.monotonic() + 2
    while p.status() != psutil.STATUS_STOPPED and time.monotonic() < deadline:
        time.sleep(0.01)
    return p.status() == psutil.STATUS_STOPPED


def _cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


@pytest.fixture
def worker(tmp_path: Path):
    proc, parent, child = _start_worker(tmp_path)
    try:
        yield tmp_path, parent, child
    finally:
        for p in (child, parent):
            try:
                p.kill()  # SIGKILL ends a stopped process too
            except psutil.NoSuchProcess:
                pass
        proc.wait(10)


def test_registered_worker_and_its_child_pause_during_a_timing_and_resume_after(worker) -> None:
    cache, parent, child = worker
    with quiet(cache) as paused:
        assert paused == 2
        assert _stopped(parent) and _stopped(child)
        before = _cpu(parent) + _cpu(child)
        time.sleep(0.3)
        assert _cpu(parent) + _cpu(child) - before < 0.02  # no work while paused
    assert parent.status() != psutil.STATUS_STOPPED
    assert child.status() != psutil.STATUS_STOPPED
    # Working again: it gains CPU time (on a loaded machine, at whatever share it gets).
    before = _cpu(parent)
    deadline = time.monotonic() + 5.0
    while _cpu(parent) - before <= 0.05 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _cpu(parent) - before > 0.05


def test_quiet_off_pauses_nothing(worker) -> None:
    cache, parent, _ = worker
    with quiet(cache, enabled=False) as paused:
        assert paused == 0
        assert parent.status() != psutil.STATUS_STOPPED


def test_a_dead_runners_paused_workers_are_resumed(worker) -> None:
    cache, parent, child = worker
    out = subprocess.run([sys.executable, "-c", DYING_RUNNER, str(cache)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 9 and out.stdout.strip() == "2"
    assert _stopped(parent)  # left paused by the dead runner
    assert resume_orphans(cache) == 2
    assert parent.status() != psutil.STATUS_STOPPED and child.status() != psutil.STATUS_STOPPED
    assert not list(registry(cache).glob("paused-by-*"))


def test_the_next_timing_resumes_what_a_dead_runner_paused(worker) -> None:
    cache, parent, _ = worker
    subprocess.run([sys.executable, "-c", DYING_RUNNER, str(cache)], capture_output=True, timeout=30)
    with quiet(cache):
        pass
    assert parent.status() != psutil.STATUS_STOPPED


def test_the_timing_process_never_pauses_itself_and_stale_entries_go(tmp_path: Path) -> None:
    stale = registry(tmp_path) / "999999999-12.0"  # no such process
    stale.touch()
    with working(tmp_path), working(tmp_path):  # nested: registered once
        assert len([e for e in registry(tmp_path).iterdir() if e != stale]) == 1
        with quiet(tmp_path) as paused:
            assert paused == 0
    assert not stale.exists()
    assert list(registry(tmp_path).iterdir()) == []


@pytest.mark.parametrize(("script", "entered", "code", "timed_out"), [
    ("print('first'); print('ready', flush=True); input(); print('after')", True, 0, False),
    ("import sys; print('first', flush=True); sys.exit(3)", False, 3, False),
    ("import time; time.sleep(30)", False, None, True),
    ("import time; print('ready', flush=True); time.sleep(30)", True, None, True),
])
def test_a_gated_child_runs_the_part_after_ready_inside_the_gate(script: str, entered: bool, code: int | None,
                                                                 timed_out: bool) -> None:
    from schedsearch.evaluate.process import run_child

    seen: list[str] = []

    @contextlib.contextmanager
    def gate():
        seen.append("in")
        yield
        seen.append("out")

    res = run_child([sys.executable, "-c", script], timeout=2.0, gate=gate)
    assert seen == (["in", "out"] if entered else [])
    assert res.returncode == code and res.timed_out is timed_out
    if code == 0:
        assert res.stdout.split() == ["first", "ready", "after"]
    assert res.seconds < 10


def test_compilers_and_expanders_run_at_the_lowest_cpu_priority() -> None:
    from schedsearch.evaluate.process import BACKGROUND_NICENESS, run_child

    script = "import os, time; time.sleep(0.2); print(os.nice(0))"
    assert run_child([sys.executable, "-c", script], timeout=10).stdout.split() == [str(os.nice(0))]
    assert run_child([sys.executable, "-c", script], timeout=10, background=True).stdout.split() == [
        str(BACKGROUND_NICENESS)]
    lowered = subprocess.run([sys.executable, "-c", "import os\nfrom schedsearch.evaluate.process import "
                              "run_in_background\nrun_in_background()\nprint(os.nice(0))"],
                             capture_output=True, text=True, timeout=30)
    assert lowered.stdout.split() == [str(BACKGROUND_NICENESS)]


def test_an_expander_process_collects_cycles_less_and_never_more():
    """A process that hosts expanders raises the collector's thresholds; one already
    higher is kept. In a process of its own: thresholds are process-wide."""
    script = textwrap.dedent("""
        import gc
        from schedsearch.evaluate.process import EXPANDER_GC_THRESHOLDS, collect_cycles_less
        default = gc.get_threshold()
        print(collect_cycles_less() == default, *gc.get_threshold())
        gc.set_threshold(50_000, 5, 500)
        collect_cycles_less()
        print(*gc.get_threshold())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    first, second = done.stdout.splitlines()
    assert first.split() == ["True", "10000", "10", "100"]
    assert second.split() == ["50000", "10", "500"]
