"""``export`` pastes nothing raw: hostile values in every stored text field of a real database.

A real search (SGEMM 64³, real Exo and gcc) makes the database; then every text an export
reads from it - the machine record (compiler, flags, CPU model, host, versions), the
workload's file name, the exported schedule's loop patterns and arguments - is set to text
that would run code if pasted raw: a ``\"\"\"``, a ``*/``, line breaks, backslashes,
``__import__('os').system(...)`` writing a marker file. The exported script, run in a
process of its own, creates nothing; the exported C compiles; or the export refuses with
one line.
"""

from __future__ import annotations

import ast
import contextlib
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, run_cli

pytestmark = pytest.mark.slow


def hostile(marker: Path) -> str:
    """Text that runs ``touch marker`` when pasted raw into a docstring, a comment or C."""
    run = f"__import__('os').system('touch {marker}')"
    return f'x"""\n{run}\n"""\\\n# {run}\n*/ int evil = system("touch {marker}"); /* \\\r\n{run}'


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("searched")
    db = folder / "s.db"
    r = run_cli("run", str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", "M=64,N=64,K=64", "--workers", "0",
                "--max-candidates", "3", "--budget", "300", "--no-warm-start", "--db", str(db), cwd=folder)
    assert r.returncode == 0, r.stderr
    return db


def sql(db: Path, statement: str, *args: object) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        return conn.execute(statement, args).fetchall()


def hostile_machine_and_path(db: Path, text: str) -> None:
    (machine,), = sql(db, "SELECT machine FROM searches WHERE id = 1")
    data = json.loads(machine)
    data.update(cpu_model=text, hostname=text, compiler=text, compiler_version=text, exo_version=text,
                cflags=[*data["cflags"], text, "-DX=*/", "\\"])
    sql(db, "UPDATE searches SET machine = ? WHERE id = 1", json.dumps(data))
    sql(db, "UPDATE workloads SET path = ?", f"/nowhere/{text}.py")


def test_hostile_machine_and_file_name_stay_text(searched: Path, tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    db = tmp_path / "shared.db"
    shutil.copy(searched, db)
    hostile_machine_and_path(db, hostile(marker))
    script = tmp_path / "best.py"
    # The file it names is not here: its stored source (sha256 checked) runs only when trusted.
    r = run_cli("export", "1", "--format", "py", "-o", str(script), "--db", str(db), "--trust-db-source")
    assert r.returncode == 0, r.stderr
    text = script.read_text()
    doc = ast.get_docstring(ast.parse(text))
    assert doc is not None and "__import__('os').system" in doc  # there, as text
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "void sgemm(" in ran.stdout
    assert not marker.exists()
    c_file = tmp_path / "best.c"
    r = run_cli("export", "1", "--format", "c", "-o", str(c_file), "--db", str(db), "--trust-db-source")
    assert r.returncode == 0, r.stderr
    head = c_file.read_text().split("\n", 1)[0]
    assert head.startswith("/* ") and head.endswith(" */") and head.count("*/") == 1
    compiled = subprocess.run(["gcc", "-fsyntax-only", "-Wall", "-Werror=comment", "-march=native", str(c_file)],
                              capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0, compiled.stderr
    assert not marker.exists()


def edit_best_schedule(db: Path, edit) -> None:
    (best,), = sql(db, "SELECT best_candidate_id FROM searches WHERE id = 1")
    (schedule,), = sql(db, "SELECT schedule FROM candidates WHERE id = ?", best)
    steps = json.loads(schedule)["steps"]
    assert steps, "the search's best has a schedule"
    for step in steps:
        edit(step)
    sql(db, "UPDATE candidates SET schedule = ? WHERE id = ?", json.dumps({"steps": steps}), best)


def refused(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert all(n in lines[0] for n in needles), lines[0]


@pytest.mark.parametrize("which", ["target", "names", "every"])
def test_hostile_schedule_strings_are_refused(which: str, searched: Path, tmp_path: Path) -> None:
    """The exported step's target (a loop pattern), the names it gives new loops and
    buffers, or every string argument, set to hostile text: not what schedsearch writes, so
    neither export uses it, and says so in one line."""
    marker = tmp_path / "MARKER"
    db = tmp_path / "shared.db"
    shutil.copy(searched, db)
    text = hostile(marker)
    word = "__import__('os').system('touch${IFS}" + str(marker) + "')#\\*/"  # names are words: no space

    def edit(step: dict) -> None:
        if which in ("target", "every"):
            step["target"] = text
        for pair in step["args"]:
            if which == "names" and "names" in pair[0]:
                pair[1] = " ".join(word for _ in pair[1].split())
            elif which == "every" and isinstance(pair[1], str):
                pair[1] = text

    edit_best_schedule(db, edit)
    script = tmp_path / "best.py"
    refused(run_cli("export", "1", "--format", "py", "-o", str(script), "--db", str(db)), "malformed")
    assert not script.exists()
    refused(run_cli("export", "1", "--format", "c", "--db", str(db)), "step 0")
    assert not marker.exists()
