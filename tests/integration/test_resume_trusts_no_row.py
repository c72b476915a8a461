"""``resume`` runs nothing a database says: probed as a user sharing a results database would.

A real search (SGEMM 64³, real Exo and gcc, in this process's workers) makes the database;
its rows are then edited as someone with write access to the file could: a compiler command
and a ``-wrapper`` flag that would create a marker file, candidate C with a constructor that
would create one, forged fast times. Every test checks the exit code, the one line on
stderr, that no marker exists, and what the database says afterwards.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from schedsearch.core import sha256_text
from tests.conftest import EXAMPLES, run_cli

pytestmark = pytest.mark.slow

SIZES = "M=64,N=64,K=64"


def one_line_error(result: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.returncode == code, (result.returncode, result.stderr)
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for n in needles:
        assert n.lower() in lines[0].lower(), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database holding one small real search (some rows measured, most left pending)."""
    folder = tmp_path_factory.mktemp("searched")
    db = folder / "s.db"
    r = run_cli("run", str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", SIZES, "--workers", "0",
                "--max-candidates", "5", "--budget", "300", "--no-warm-start", "--db", str(db), cwd=folder)
    assert r.returncode == 0, r.stderr
    return db


@pytest.fixture
def db(searched: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "shared.db"
    shutil.copy(searched, copy)
    return copy


def sql(db: Path, statement: str, *args: object) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        return conn.execute(statement, args).fetchall()


def edit_bench(db: Path, **fields: object) -> None:
    (text,), = sql(db, "SELECT config FROM searches WHERE id = 1")
    config = json.loads(text)
    config["bench"].update(fields)
    sql(db, "UPDATE searches SET config = ? WHERE id = 1", json.dumps(config))


def run_python(code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def constructor_c(c_source: str, marker: Path) -> str:
    """``c_source`` with a constructor that leaves ``marker`` behind when the kernel is loaded."""
    return ("#include <stdio.h>\n__attribute__((constructor)) static void schedsearch_evil(void) {\n"
            f"    FILE *f = fopen({json.dumps(str(marker))}, \"w\"); if (f) fclose(f);\n}}\n" + c_source)


def test_a_stored_compiler_or_flag_is_never_run(db: Path, tmp_path: Path) -> None:
    marker, wrapped = tmp_path / "MARKER", tmp_path / "WRAPPED"
    (cflags,), = sql(db, "SELECT json_extract(config, '$.bench.cflags') FROM searches WHERE id = 1")
    edit_bench(db, cc=f'sh -c "touch {marker}" sh', cflags=[*json.loads(cflags), "-wrapper", f"/bin/sh,-c,touch {wrapped}"])
    line = one_line_error(run_cli("resume", "1", "--db", str(db), "--workers", "0", "--max-candidates", "1"), 2,
                          "search 1 was built with the compiler", "-wrapper", "never run", "--cc and --cflags",
                          "--trust-db-config")
    assert "sh -c \"touch /" in line and "(this resume: gcc)" in line
    assert not marker.exists() and not wrapped.exists()
    # The same from Python: the keyword is trust_db_config=.
    probe = ("import schedsearch, sys\ntry:\n    schedsearch.resume(1, db=sys.argv[1], max_candidates=1)\n"
             "except schedsearch.SchedsearchError as e:\n    print(type(e).__name__, e)\n")
    r = run_python(probe, str(db))
    assert r.startswith("UntrustedConfigError") and "trust_db_config=True" in r and "cc= and cflags=" in r, r
    # Going on with the command line's toolchain: the search runs and is recorded with it.
    r = run_cli("resume", "1", "--db", str(db), "--workers", "0", "--max-candidates", "1", "--trust-db-config",
                "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "completed"
    assert not marker.exists() and not wrapped.exists()
    (cc, stored), = sql(db, "SELECT json_extract(config, '$.bench.cc'), json_extract(config, '$.bench.cflags') "
                            "FROM searches WHERE id = 1")
    assert cc == "gcc" and "-wrapper" not in json.loads(stored)


def test_a_search_run_with_its_own_compiler_resumes_with_it(db: Path, tmp_path: Path) -> None:
    cc = tmp_path / "my-cc"
    cc.write_text('#!/bin/sh\nexec gcc "$@"\n')
    cc.chmod(0o755)
    edit_bench(db, cc=str(cc))  # as if the search had been run with --cc my-cc
    one_line_error(run_cli("resume", "1", "--db", str(db), "--workers", "0", "--max-candidates", "1"), 2,
                   f"the compiler {cc} (this resume: gcc)", "pass the same --cc")
    r = run_cli("resume", "1", "--db", str(db), "--workers", "0", "--max-candidates", "1", "--cc", str(cc), "--json")
    assert r.returncode == 0, r.stderr


def test_stored_c_is_never_built_and_forged_rows_are_never_best(db: Path, tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    pending = [row for row in sql(db, "SELECT id, fingerprint, c_source FROM candidates WHERE status = 'pending' "
                                      "ORDER BY id")]
    ok = sql(db, "SELECT id, fingerprint, c_source, time_median FROM candidates WHERE status = 'ok' AND parent_id "
                 "IS NOT NULL ORDER BY time_median")
    assert len(pending) >= 2 and len(ok) >= 2
    # 1. A pending row's C edited, its fingerprint kept: the C does not hash to it.
    edited = pending[0][0]
    sql(db, "UPDATE candidates SET c_source = ? WHERE id = ?", constructor_c(pending[0][2], marker), edited)
    # 2. A pending row's C and fingerprint edited together: its schedule gives other C.
    swapped = pending[1][0]
    evil = constructor_c(pending[1][2], marker)
    sql(db, "UPDATE candidates SET c_source = ?, fingerprint = ? WHERE id = ?", evil, sha256_text(evil), swapped)
    # 3. The slowest measured row made the fastest by far, with hostile C under its fingerprint.
    forged = ok[-1][0]
    evil = constructor_c(ok[-1][2], marker)
    sql(db, "UPDATE candidates SET c_source = ?, fingerprint = ?, time_median = 1e-12, time_min = 1e-12, "
            "time_q1 = 1e-12, time_q3 = 1e-12, speedup = 1e8 WHERE id = ?", evil, sha256_text(evil), forged)
    # 4. The fastest measured row's time forged, its C and fingerprint as they were: rebuilt
    # from its schedule, then re-measured among the finalists, which tell its real time.
    timed = ok[0][0]
    sql(db, "UPDATE candidates SET time_median = 2e-12, time_min = 2e-12, time_q1 = 2e-12, time_q3 = 2e-12 "
            "WHERE id = ?", timed)
    r = run_cli("resume", "1", "--db", str(db), "--workers", "0", "--max-candidates", "2", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert not marker.exists()
    status = dict(sql(db, "SELECT id, status FROM candidates"))
    assert status[swapped] == status[forged] == status[edited] == "tampered"
    assert status[timed] == "ok"
    assert out["candidates"]["ok"] == sum(s == "ok" for s in status.values())  # the counts follow
    error = dict(sql(db, "SELECT id, error FROM candidates"))
    assert "replays to C" in error[swapped] and "not used" in error[swapped]
    assert "does not hash to its fingerprint" in error[edited] and "replays to C" in error[forged]
    assert "marked tampered" in r.stderr and f"#{swapped}" in r.stderr
    assert out["best"]["candidate_id"] not in (swapped, forged)
    assert out["best"]["seconds"] > 1e-9 and out["best"]["remeasured"]
    best = sql(db, "SELECT best_candidate_id, best_seconds FROM searches WHERE id = 1")[0]
    assert best[0] not in (swapped, forged) and best[1] > 1e-9
    # The views say so, and nothing reads the forged rows as measured.
    tree = run_cli("tree", "1", "--db", str(db))
    assert tree.returncode == 0 and "3 tampered" in tree.stdout + tree.stderr
    shown = json.loads(run_cli("show", "1", "--db", str(db), "--json").stdout)
    assert shown["best"]["candidate_id"] == out["best"]["candidate_id"]
    # Resumed again: the tampered rows stay as they are, and still nothing is loaded.
    r = run_cli("resume", "1", "--db", str(db), "--workers", "0", "--max-candidates", "1", "--json")
    assert r.returncode == 0, r.stderr
    assert not marker.exists()
    assert dict(sql(db, "SELECT id, status FROM candidates"))[forged] == "tampered"
