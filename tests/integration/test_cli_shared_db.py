"""Searches sharing one SQLite file through the real CLI, as users running several at once do.

Two ``run``s and a ``resume`` of a third search write one file together for half a minute:
none fails, every result each one reported is in the file. A ``resume`` of a search whose
driver is alive is refused with one line and exit code 2, leaving the search running; a
killed driver's search is taken over at once, one from another host once its lease lapsed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, run_cli

MATMUL = str(EXAMPLES / "matmul.py")
# Matrix-vector products: their first expansion takes ~3 s where a matmul's takes ~15 s, so
# every search measures candidates soon even on a loaded 2-core machine.
GEMV = str(EXAMPLES / "gemv.py")
BUDGET = "25"  # seconds each of the three concurrent searches runs for


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "SCHEDSEARCH_CACHE_DIR": str(tmp_path / "cache")}


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "schedsearch", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(tmp_path), start_new_session=True)


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={"SCHEDSEARCH_CACHE_DIR": str(tmp_path / "cache")}, timeout=300)


def _query(db: Path, sql: str, *params: object) -> list[tuple]:
    if not db.exists():
        return []
    with sqlite3.connect(db, timeout=30) as raw:
        try:
            return raw.execute(sql, params).fetchall()
        except sqlite3.OperationalError:  # no tables yet: the run is still creating them
            return []


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _check_search(db: Path, out: dict, events: list[dict]) -> None:
    """Everything the search reported is in the file, and its lease is free."""
    sid = out["search_id"]
    c = out["candidates"]
    rows = dict(_query(db, "SELECT id, status FROM candidates WHERE search_id = ?", sid))
    # Every candidate it made (the root, each new child, each warm-start seed) has its row...
    assert len(rows) == 1 + c["generated"] - c["duplicates"] - c["illegal"] + c["warm_started"], (sid, c)
    # ... and every measurement it announced is there as announced.
    measured = {e["record"]["id"]: e["record"]["status"] for e in events
                if e["kind"] in ("evaluated", "baseline") and e.get("record")}
    assert measured and all(rows.get(cid) == status for cid, status in measured.items()), sid
    assert _query(db, "SELECT status, lease_token FROM searches WHERE id = ?", sid) == [("completed", None)]


@pytest.mark.slow
def test_two_runs_and_a_resume_write_one_file_together(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    first = _run(tmp_path, "run", GEMV, "--proc", "gemv", "--size", "M=48,N=48", "--workers", "0",
                 "--max-candidates", "3", "--db", str(db), "--json")
    assert first.returncode == 0, first.stderr
    third = json.loads(first.stdout)["search_id"]
    common = ("--workers", "0", "--budget", BUDGET, "--max-candidates", "1000", "--db", str(db), "--json")
    jobs = {
        "run A": ("run", GEMV, "--proc", "gemv", "--size", "M=64,N=64", *common),
        "run B": ("run", GEMV, "--proc", "gemv_t", "--size", "M=64,N=48", *common),
        "resume": ("resume", str(third), *common),
    }
    procs = {name: _start(tmp_path, *args, "--events", str(tmp_path / f"{name}.jsonl"))
             for name, args in jobs.items()}
    done = {name: p.communicate(timeout=300) for name, p in procs.items()}
    for name, p in procs.items():
        out, err = done[name]
        assert p.returncode == 0 and "Traceback" not in err and "locked" not in err, (name, err[-2000:])
        _check_search(db, json.loads(out), _events(tmp_path / f"{name}.jsonl"))
    listed = json.loads(_run(tmp_path, "list", "--db", str(db), "--json").stdout)
    assert sorted(s["search_id"] for s in listed) == [1, 2, 3]


def _wait_for(condition, what: str, proc: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.25)


@pytest.mark.slow
def test_resume_refuses_a_live_driver_and_takes_over_a_stopped_one(tmp_path: Path) -> None:
    db = tmp_path / "one.db"
    host = socket.gethostname()
    driver = _start(tmp_path, "run", MATMUL, "--proc", "sgemm", "--size", "M=32,N=32,K=32", "--workers", "0",
                    "--budget", "300", "--db", str(db))
    try:
        _wait_for(lambda: _query(db, "SELECT lease_pid FROM searches WHERE id = 1") == [(driver.pid,)],
                  "lease", driver)
        _wait_for(lambda: len(_query(db, "SELECT id FROM candidates WHERE status != 'pending'")) >= 2,
                  "measurement", driver)
        refused = _run(tmp_path, "resume", "1", "--db", str(db), "--workers", "0", "--max-candidates", "2")
        err = refused.stderr.strip()
        assert refused.returncode == 2 and "\n" not in err, refused.stderr
        assert err.startswith(f"schedsearch: error: search 1 in {db} is being run by pid {driver.pid} on host {host} "
                              "since ") and err.endswith("; wait for it or stop it"), err
        assert driver.poll() is None  # the driver runs on, untouched
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(timeout=30)
    before = _query(db, "SELECT id, status, time_median FROM candidates WHERE status != 'pending' ORDER BY id")
    assert _query(db, "SELECT lease_pid, status FROM searches") == [(driver.pid, "running")]  # as killed

    # The killed driver's process is gone: its search is taken over at once, with one line.
    taken = _run(tmp_path, "resume", "1", "--db", str(db), "--workers", "0", "--max-candidates", "2", "--json")
    assert taken.returncode == 0, taken.stderr
    assert (f"search 1: taking it over from its last driver, pid {driver.pid} on host {host}, whose process no "
            "longer exists") in taken.stderr.splitlines()
    after = _query(db, "SELECT id, status, time_median FROM candidates WHERE status != 'pending' ORDER BY id")
    assert set(before) <= set(after) and len(after) >= len(before) + 2  # nothing lost, nothing measured twice
    assert _query(db, "SELECT status, lease_token FROM searches") == [("completed", None)]

    # A driver on another host: its lease holds while it beats, and is taken over once it lapsed.
    def lease_elsewhere(heartbeat: float) -> None:
        with sqlite3.connect(db) as raw:
            raw.execute("UPDATE searches SET lease_token = 'far', lease_host = 'another-host.invalid', lease_pid = 77, "
                        "lease_acquired_at = ?, lease_heartbeat_at = ?, lease_timeout = 60.0", (heartbeat, heartbeat))

    lease_elsewhere(time.time())
    busy = _run(tmp_path, "resume", "1", "--db", str(db), "--workers", "0", "--max-candidates", "1")
    assert busy.returncode == 2 and "is being run by pid 77 on host another-host.invalid" in busy.stderr, busy.stderr
    lease_elsewhere(time.time() - 125)
    late = _run(tmp_path, "resume", "1", "--db", str(db), "--workers", "0", "--max-candidates", "1")
    assert late.returncode == 0, late.stderr
    assert any(line.startswith("search 1: taking it over from its last driver, pid 77 on host another-host.invalid, "
                               "silent for 12") and line.endswith("s (its lease times out after 60 s)")
               for line in late.stderr.splitlines()), late.stderr
    assert _query(db, "SELECT lease_token FROM searches") == [(None,)]
