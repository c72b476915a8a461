"""``--json`` keeps stdout for its one document: what native code or a child process writes
to file descriptor 1 meanwhile goes to stderr, so a reader of stdout can always parse it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# Writes to file descriptor 1 the way native code does (below Python's sys.stdout), before
# and after the command prints its document, and from a child process that inherits it.
NOISY = """
import os, subprocess, sys
from schedsearch.cli import commands_read
from schedsearch.cli.main import main
real = commands_read.print_json
def noisy(data):
    os.write(1, b"native noise before\\n")
    subprocess.run([sys.executable, "-c", "print('a child process talking')"], check=True)
    real(data)
    os.write(1, b"native noise after\\n")
commands_read.print_json = noisy
main(sys.argv[1:])
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", NOISY, *args], capture_output=True, text=True, timeout=120)


def test_json_output_is_the_only_thing_on_stdout() -> None:
    r = run("explain", str(EXAMPLES / "matmul.py"), "--proc", "matmul_i8", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # one document, nothing before or after it
    assert doc["proc"] == "matmul_i8"
    assert "native noise before" in r.stderr and "native noise after" in r.stderr
    assert "a child process talking" in r.stderr


# The console script's way (``main()`` reads sys.argv), with writers that run while the
# process exits, as a Ray driver's threads print a cluster's last error messages.
LATE = """
import atexit, os, sys
from schedsearch.cli.main import main
atexit.register(lambda: (print("python's last words at exit"), os.write(1, b"native last words at exit\\n")))
sys.argv = ["schedsearch", *sys.argv[1:]]
main()
"""


def test_nothing_written_while_the_process_exits_follows_the_document() -> None:
    r = subprocess.run([sys.executable, "-c", LATE, "explain", str(EXAMPLES / "matmul.py"), "--proc", "matmul_i8",
                        "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["proc"] == "matmul_i8"  # one document, nothing after it
    assert "python's last words at exit" in r.stderr and "native last words at exit" in r.stderr
