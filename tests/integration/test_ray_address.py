"""``schedsearch run --address`` against a separately started Ray cluster (``ray start --head``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, run_cli


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def external_cluster():
    """A head node started the way a user would, in its own process group; stopped after."""
    port = free_port()
    temp = tempfile.mkdtemp(prefix="rs", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    ray = Path(sys.executable).with_name("ray")
    proc = subprocess.Popen(
        [str(ray), "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
         f"--temp-dir={temp}", "--block"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=os.environ.copy(),
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, "ray start exited"
                time.sleep(0.5)
        time.sleep(2)  # the GCS listens a little before the raylet has registered
        yield f"127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)  # `ray start --block` stops its processes on SIGTERM
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.ray
def test_run_on_an_existing_cluster(external_cluster: str, tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    r = run_cli("run", str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", "M=32,N=32,K=32",
                "--address", external_cluster, "--max-candidates", "6", "--db", str(db), "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "completed" and out["candidates"]["evaluated"] >= 6
    assert out["best"]["speedup"] > 0
