"""The live view in a real pseudo-terminal, and stopping a real search during an expansion.

Expanding the unscheduled 48³ SGEMM takes many seconds (every register tile of the
target is tried), which is exactly the phase that used to freeze the panel.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES

# They time how fast a stop is acknowledged: run alone (scripts/test.sh).
pytestmark = pytest.mark.serial

ARGS = ["--proc", "sgemm", "--size", "M=48,N=48,K=48", "--budget", "600", "--workers", "0"]
CLOCK = re.compile(r"(\d+\.\d)s / 600s")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def fresh_cache(folder: Path) -> dict[str, str]:
    """A cache folder of the test's own: a root expanded by another test, kept in a shared
    cache, would be read back at once and leave no expansion to interrupt."""
    return {"SCHEDSEARCH_CACHE_DIR": str(folder / "cache")}


class Terminal:
    """``schedsearch run`` attached to a pseudo-terminal; collects what it draws."""

    def __init__(self, db: Path) -> None:
        master, slave = os.openpty()
        env = {**os.environ, "COLUMNS": "120", "LINES": "40", "TERM": "xterm-256color", **fresh_cache(db.parent)}
        env.pop("NO_COLOR", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "schedsearch", "run", str(EXAMPLES / "matmul.py"), *ARGS, "--db", str(db)],
            stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True, close_fds=True,
            preexec_fn=lambda: __import__("fcntl").ioctl(0, __import__("termios").TIOCSCTTY, 0),
        )
        os.close(slave)
        self.master = master
        self.raw = ""
        self.screen = ""

    def read(self, seconds: float) -> str:
        """Everything drawn within ``seconds``."""
        got = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.master], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(self.master, 65536).decode("utf-8", "replace")
            except OSError:  # the child closed the terminal
                break
            got.append(chunk)
        self.raw += "".join(got)
        self.screen = ANSI.sub("", self.raw)  # whole, so no escape sequence is cut in two
        return "".join(got)

    def wait_for(self, pattern: str, timeout: float) -> float:
        """Seconds until ``pattern`` appears on the screen (AssertionError after ``timeout``)."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if re.search(pattern, self.screen):
                return time.monotonic() - start
            self.read(0.1)
        raise AssertionError(f"{pattern!r} did not appear within {timeout} s; screen ends with {self.screen[-800:]!r}")

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        os.close(self.master)


@pytest.mark.slow
def test_the_panel_keeps_time_during_an_expansion_and_acknowledges_ctrl_c_at_once(tmp_path: Path) -> None:
    term = Terminal(tmp_path / "live.db")
    try:
        term.wait_for(r"expanding\s+expanding #1", timeout=120)
        term.read(3.5)
        clocks = sorted({float(c) for c in CLOCK.findall(term.screen)})
        assert len(clocks) >= 3, "the clock did not advance while the root was expanded"
        assert "ETA" in term.screen and "%" in term.screen
        assert term.proc.poll() is None, "the expansion must still be running for this test"
        before = len(term.screen)
        os.write(term.master, b"\x03")  # Ctrl-C, as typed
        acknowledged = term.wait_for(r"stopping", timeout=5)
        assert acknowledged < 1.5, f"Ctrl-C acknowledged after {acknowledged:.1f} s"
        assert "stopping" in term.screen[before:]
        started = time.monotonic()
        term.proc.wait(timeout=15)
        assert time.monotonic() - started < 10
        term.read(0.5)
        assert term.proc.returncode == 130
        assert "Traceback" not in term.screen
        assert "schedsearch resume" in term.screen
    finally:
        term.close()


@pytest.mark.slow
def test_sigterm_during_an_expansion_stops_a_real_search_within_seconds(tmp_path: Path) -> None:
    db = tmp_path / "term.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "schedsearch", "run", str(EXAMPLES / "matmul.py"), *ARGS, "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, **fresh_cache(tmp_path)},
    )
    try:
        lines: list[str] = []
        deadline = time.monotonic() + 120
        assert proc.stderr is not None
        while time.monotonic() < deadline:  # plain log lines: wait for the root's expansion
            line = proc.stderr.readline()
            lines.append(line)
            if line.startswith("[") and " baseline " in line:
                break
        else:
            raise AssertionError("".join(lines))
        time.sleep(2.0)  # well inside the expansion
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - started
        assert took < 5.0, f"stopped {took:.1f} s after SIGTERM"
        assert proc.returncode == 130
        assert "stopping" in err and "Traceback" not in err
        assert "interrupted" in out and "schedsearch resume" in out  # the summary is the result: stdout
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
