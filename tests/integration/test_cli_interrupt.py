"""Interrupting a real search (Ctrl-C, kill -9) and resuming it: nothing is lost or re-measured."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, run_cli

# They time how fast a stop is acknowledged: run alone (scripts/test.sh).
pytestmark = pytest.mark.serial

ARGS = ["--proc", "sgemm", "--size", "M=48,N=48,K=48", "--budget", "600"]


def start_run(db: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "schedsearch", "run", str(EXAMPLES / "matmul.py"), *ARGS,
                             "--db", str(db), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, start_new_session=True)


def measured(db: Path) -> dict[str, float]:
    """fingerprint -> median seconds of every measured candidate (read through the real CLI)."""
    if not db.exists():
        return {}
    listed = run_cli("list", "--db", str(db), "--json")
    if listed.returncode != 0 or not json.loads(listed.stdout):
        return {}
    sid = str(json.loads(listed.stdout)[0]["search_id"])
    nodes = json.loads(run_cli("tree", sid, "--db", str(db), "--json").stdout)
    return {n["fingerprint"]: n["seconds"] for n in nodes if n["status"] != "pending"}


def wait_for_results(db: Path, proc: subprocess.Popen[str], n: int, timeout: float = 240) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        got = measured(db)
        if len(got) >= n:
            return got
        time.sleep(1.0)
    raise AssertionError(f"fewer than {n} results after {timeout}s")


def processes_with(marker: str) -> list[int]:
    """PIDs whose environment carries the marker (the run and everything it started)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if marker.encode() in (d / "environ").read_bytes():
                pids.append(int(d.name))
        except OSError:
            continue
    return pids


def resume_and_check(db: Path, before: dict[str, float], *extra: str) -> None:
    sid = json.loads(run_cli("list", "--db", str(db), "--json").stdout)[0]["search_id"]
    r = run_cli("resume", str(sid), "--db", str(db), "--max-candidates", "3", "--json", *extra, timeout=400)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "completed"
    after = measured(db)
    for fp, seconds in before.items():
        assert after[fp] == seconds, "a candidate measured before the interruption was measured again"
    assert len(after) >= len(before) + 3


@pytest.mark.slow
def test_ctrl_c_leaves_a_resumable_search(tmp_path: Path) -> None:
    db = tmp_path / "int.db"
    proc = start_run(db, "--workers", "0")
    wait_for_results(db, proc, 4)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "schedsearch resume" in out  # the summary, with how to go on, is the result: stdout
    listed = json.loads(run_cli("list", "--db", str(db), "--json").stdout)
    assert listed[0]["status"] == "interrupted"
    resume_and_check(db, measured(db), "--workers", "0")


@pytest.mark.slow
@pytest.mark.ray
def test_kill_9_on_ray_leaves_no_process_and_resumes(tmp_path: Path) -> None:
    db = tmp_path / "kill.db"
    marker = f"SCHEDSEARCH_TEST_RUN={uuid.uuid4().hex}"
    key, value = marker.split("=")
    proc = start_run(db, "--workers", "2", env={key: value})
    wait_for_results(db, proc, 4)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert processes_with(marker) == [], "processes of the killed run are still alive"
    resume_and_check(db, measured(db), "--workers", "0")


def _ray_starting(marker: str) -> bool:
    """Whether the run's private Ray cluster has begun to start (its GCS server is up)."""
    for pid in processes_with(marker):
        try:
            if b"gcs_server" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


@pytest.mark.ray
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_while_the_cluster_starts_is_said_at_once_and_leaves_nothing(tmp_path: Path, signum) -> None:
    # While ray.init runs: its own SIGTERM handler (an exit in the middle of the start) and
    # its C++ failure handler (a stack trace over the terminal) must not take the signal.
    marker = f"SCHEDSEARCH_TEST_RUN={uuid.uuid4().hex}"
    key, value = marker.split("=")
    proc = start_run(tmp_path / "start.db", "--workers", "2", env={key: value})
    deadline = time.monotonic() + 60
    while not _ray_starting(marker):
        assert proc.poll() is None and time.monotonic() < deadline, "the cluster never started"
        time.sleep(0.05)
    lines: list[tuple[float, str]] = []
    sent = time.monotonic()
    proc.send_signal(signum)
    assert proc.stderr is not None
    for line in proc.stderr:  # until the process closes it
        lines.append((time.monotonic() - sent, line.rstrip()))
    proc.wait(timeout=30)
    took = time.monotonic() - sent
    err = "\n".join(text for _, text in lines)
    assert proc.returncode == 130, err
    said = [t for t, text in lines if "stopping" in text]
    assert said and said[0] < 1.0, f"the stop was said {said[:1]} s after the signal: {err}"
    assert took < 15.0, f"exited {took:.1f} s after the signal"
    assert "Traceback" not in err and "SIGTERM received" not in err, err
    assert err.splitlines()[-1] == "schedsearch: error: interrupted", err
    deadline = time.monotonic() + 15
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert processes_with(marker) == [], "processes of the interrupted start are still alive"
    assert not (tmp_path / "start.db").exists() or json.loads(
        run_cli("list", "--db", str(tmp_path / "start.db"), "--json").stdout) == []
