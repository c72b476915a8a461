"""A search recorded as running whose driver is gone (killed, a lost machine) says so in
``list`` and ``show``, with how to go on; one whose driver lives does not."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from schedsearch.core import ArgRole, ArgSpec, DType, LeaseOwner, Workload, sha256_text
from schedsearch.store import open_store
from schedsearch.testing.store_contract import make_config, make_machine
from tests.conftest import run_cli

KERNEL = "from exo import *\n\n@proc\ndef kern(N: size, x: f32[N]):\n    for i in seq(0, N):\n        x[i] = 0.0\n"


def dead_pid() -> int:
    """The pid of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_list_and_show_say_when_a_running_search_has_no_driver(tmp_path: Path) -> None:
    kern = tmp_path / "kern.py"
    kern.write_text(KERNEL)
    workload = Workload(str(kern), KERNEL, sha256_text(KERNEL), "kern", (("N", 16),),
                        (ArgSpec("x", ArgRole.TENSOR, DType.F32, (16,), output=True),), 16)
    db = tmp_path / "r.db"
    store = open_store(str(db))
    host = socket.gethostname()
    gone = store.create_search(workload, make_config(), make_machine(), lease=LeaseOwner(host, dead_pid(), "t1"))
    live = store.create_search(workload, make_config(), make_machine(), lease=LeaseOwner(host, os.getpid(), "t2"))
    store.close()
    listed = json.loads(run_cli("list", "--db", str(db), "--json").stdout)
    assert {s["search_id"]: s["driver_gone"] for s in listed} == {gone: True, live: False}
    table = run_cli("list", "--db", str(db)).stdout
    assert table.count("(no driver)") == 1
    shown = run_cli("show", str(gone), "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    assert f"schedsearch resume {gone}" in " ".join(shown.stdout.split())
    assert json.loads(run_cli("show", str(gone), "--db", str(db), "--json").stdout)["driver_gone"] is True
    assert "no driver runs it" not in run_cli("show", str(live), "--db", str(db)).stdout
