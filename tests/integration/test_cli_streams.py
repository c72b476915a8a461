"""Results on stdout, everything else on stderr, through the real CLI with both streams piped.

A user pipes a command's result (``schedsearch show 1 | less``, ``list | grep``, ``tree >
file``): stdout must carry the table, report, tree or summary asked for, whole (not cut at
80 columns) and without colour codes; progress, notes and warnings go to stderr; ``--json``
keeps stdout for its one document.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ANSI = re.compile(r"\x1b\[")

KERNEL = '''from __future__ import annotations

from exo import *


@proc
def scale_rows(N: size, M: size, x: f32[N, M], y: f32[N, M]):
    for i in seq(0, N):
        for j in seq(0, M):
            y[i, j] = x[i, j] * 2.0
'''

#: Whatever would make rich write colour codes into a pipe.
FORCING = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "CLICOLOR_FORCE")


def piped(*args: str, cwd: Path, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``schedsearch ARGS`` with stdout and stderr piped apart, no colour forced, and no
    COLUMNS: rich then takes 80 columns for a pipe."""
    clean = {k: v for k, v in os.environ.items() if k not in FORCING and k != "COLUMNS"}
    clean.update({"SCHEDSEARCH_CACHE_DIR": str(cache), "TERM": "xterm-256color", **env})
    return subprocess.run([sys.executable, "-m", "schedsearch", *args], cwd=cwd, env=clean, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One short search (no Ray) run without --json, so its summary is the result."""
    work = tmp_path_factory.mktemp("streams")
    kern = work / "a_workload_file_with_a_rather_long_name_so_that_table_rows_pass_80_columns.py"
    kern.write_text(KERNEL)
    db = work / "s.db"
    r = piped("run", str(kern), "--size", "N=64,M=64", "--workers", "0", "--max-candidates", "6",
              "--budget", "120", "--db", str(db), cwd=work, cache=work / "cache")
    assert r.returncode == 0, r.stderr
    return {"work": work, "kern": kern, "db": db, "run": r}


def only_on_stdout(r: subprocess.CompletedProcess[str], *needles: str, codes: tuple[int, ...] = (0,)) -> None:
    """Each needle is in the result (stdout) and not on stderr; no escape codes anywhere,
    no trailing blanks on stdout; the exit code one of ``codes``."""
    assert r.returncode in codes, r.stderr
    for n in needles:
        assert n in r.stdout, (n, r.stdout)
        assert n not in r.stderr, (n, r.stderr)
    assert not ANSI.search(r.stdout), r.stdout
    assert not ANSI.search(r.stderr), r.stderr
    assert all(line == line.rstrip() for line in r.stdout.splitlines()), r.stdout  # no padding to the widest row


@pytest.mark.slow
def test_run_puts_its_summary_on_stdout_and_its_progress_on_stderr(searched: dict) -> None:
    r = searched["run"]
    only_on_stdout(r, "baseline (unscheduled):", "schedsearch show 1")
    assert re.search(r"^completed: candidate limit reached", r.stdout.lstrip(), re.M), r.stdout
    # the log lines of a search outside a terminal: started, the baseline, finished
    assert re.search(r"^\[\s*\d+\.\ds\] started ", r.stderr, re.M), r.stderr
    # where the start's seconds went, once the workers were ready
    assert re.search(r"^\[start\s+\d+\.\ds\] ready: Python and imports .*; checking the C compiler \(gcc\) \d",
                     r.stderr, re.M), r.stderr
    assert "finished" in r.stderr and not re.search(r"^\[(start|\s*\d)", r.stdout, re.M), r.stdout


@pytest.mark.slow
def test_list_show_tree_best_print_their_results_on_stdout_whole(searched: dict) -> None:
    work, db, kern = searched["work"], str(searched["db"]), searched["kern"]
    cache = work / "cache"
    listed = piped("list", "--db", db, cwd=work, cache=cache)
    only_on_stdout(listed, "searches in", "scale_rows")
    row = next(line for line in listed.stdout.splitlines() if "scale_rows" in line)
    assert len(row) > 80 and "N=64" in row and "M=64" in row  # the row is whole, not cut at 80

    shown = piped("show", "1", "--db", db, cwd=work, cache=cache)
    only_on_stdout(shown, "top ", "best schedule" if "best schedule" in shown.stdout else "the best",
                   str(kern))  # the workload's long path, whole

    nodes = json.loads(piped("tree", "1", "--db", db, "--json", cwd=work, cache=cache).stdout)
    tree = piped("tree", "1", "--db", db, cwd=work, cache=cache)
    only_on_stdout(tree, "search 1:")
    for n in nodes:  # every node on a line of its own with its whole step
        line = next(line for line in tree.stdout.splitlines() if f"#{n['candidate_id']} " in line)
        assert line.rstrip().endswith(n["step"]) or n["step"] + "  (" in line, (line, n["step"])

    best = piped("best", str(kern), "--size", "N=64,M=64", "--db", db, cwd=work, cache=cache)
    only_on_stdout(best, "best known schedules", "* best: search 1")


@pytest.mark.slow
def test_an_empty_list_says_so_on_stderr_and_leaves_stdout_empty(tmp_path: Path) -> None:
    from schedsearch.store import open_store

    db = tmp_path / "none.db"
    open_store(str(db)).close()
    r = piped("list", "--db", str(db), cwd=tmp_path, cache=tmp_path / "cache")
    assert r.returncode == 0 and r.stdout == "" and "no searches" in r.stderr, (r.stdout, r.stderr)


@pytest.mark.slow
def test_json_stays_the_only_thing_on_stdout(searched: dict) -> None:
    work, db = searched["work"], str(searched["db"])
    for args in (["list"], ["show", "1"], ["tree", "1"]):
        r = piped(*args, "--db", db, "--json", cwd=work, cache=work / "cache")
        assert r.returncode == 0, r.stderr
        json.loads(r.stdout)  # one document, nothing else
        assert r.stderr == ""


@pytest.mark.slow
def test_forced_colour_reaches_a_pipe_only_when_asked(searched: dict) -> None:
    work, db = searched["work"], str(searched["db"])
    r = piped("show", "1", "--db", db, cwd=work, cache=work / "cache", FORCE_COLOR="1")
    assert r.returncode == 0 and ANSI.search(r.stdout), r.stdout


@pytest.mark.slow
def test_export_and_regress_results_on_stdout_notes_on_stderr(searched: dict) -> None:
    work, db = searched["work"], str(searched["db"])
    cache = work / "cache"
    printed = piped("export", "1", "--format", "json", "--db", db, cwd=work, cache=cache)
    assert printed.returncode == 0 and json.loads(printed.stdout)["format"], printed.stderr
    written = piped("export", "1", "--format", "json", "-o", str(work / "best.json"), "--db", db, cwd=work,
                    cache=cache)
    assert written.returncode == 0 and written.stdout == "" and "wrote" in written.stderr

    # A 64x64 kernel's speedup is near 1x and noisy on a busy machine: pass or FAIL, the
    # verdict table is the result either way.
    r = piped("regress", str(work / "best.json"), cwd=work, cache=cache)
    only_on_stdout(r, "schedsearch regress", "recorded", codes=(0, 1))  # the table's title and a column
    assert re.search(r"best\.json.*│ (pass|FAIL)", r.stdout), r.stdout
    # the per-file progress is on stderr; the verdict table (pass or FAIL rows) on stdout
    assert re.search(r"^\[1/1\] (pass|FAIL|skip) ", r.stderr, re.M), r.stderr
    assert not re.search(r"^\[1/1\]", r.stdout, re.M)
    as_json = piped("regress", str(work / "best.json"), "--json", cwd=work, cache=cache)
    assert json.loads(as_json.stdout)["results"][0]["name"] and "schedsearch regress" in as_json.stderr
