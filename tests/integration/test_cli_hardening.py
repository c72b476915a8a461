"""Hostile or broken input met through the real CLI: data never runs as code, damaged or
read-only databases, hostile sizes, unwritable targets, in-memory databases.

Every test asserts the exit code, the one line on stderr, and that nothing was changed,
created or executed that should not have been. Databases are built with the store's own
API (no search needed); workload files that must never run write a marker file when
imported, so "never executed" is checked directly.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedsearch.core import (
    ArgRole,
    ArgSpec,
    Candidate,
    DType,
    Schedule,
    SearchStatus,
    Workload,
    sha256_text,
)
from schedsearch.store import open_store
from schedsearch.testing.store_contract import make_config, make_machine, make_measurement
from tests.conftest import EXAMPLES, run_cli

KERNEL = '''from __future__ import annotations

from exo import *


@proc
def kern(N: size, x: f32[N]):
    for i in seq(0, N):
        x[i] = 0.0
'''


def evil_source(marker: Path) -> str:
    """A workload file whose import leaves ``marker`` behind."""
    return f"open({str(marker)!r}, 'w').write('ran')\n" + KERNEL


def one_line_error(result: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.returncode == code, (result.returncode, result.stderr)
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for n in needles:
        assert n.lower() in lines[0].lower(), lines[0]
    return lines[0]


def search_error(result: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    """Like one_line_error for a search: progress lines may come first, then one error line, last."""
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("schedsearch: error:")]
    assert result.returncode == code, (result.returncode, result.stderr)
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in result.stderr, result.stderr
    for n in needles:
        assert n.lower() in errors[0].lower(), errors[0]
    return errors[0]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def make_db(db: Path, workload_file: Path, *, padding: int = 0) -> Workload:
    """A results database holding one interrupted search of ``workload_file`` (proc
    ``kern``, N=16) with a measured root and child; ``padding`` bytes of C per candidate
    make the file span many pages."""
    text = workload_file.read_text()
    workload = Workload(str(workload_file), text, sha256_text(text), "kern", (("N", 16),),
                        (ArgSpec("x", ArgRole.TENSOR, DType.F32, (16,), output=True),), 16)
    store = open_store(str(db))
    sid = store.create_search(workload, make_config(), make_machine())
    parent = None
    for i in range(6):
        c = f"void schedsearch_kernel(void *ctxt, float *x) {{ /* {i} {'p' * padding} */ }}\n"
        cand = Candidate(Schedule(), c, sha256_text(c), "kern", parent, 0 if parent is None else 1)
        store.add_candidate(sid, cand)
        rec = store.record_measurement(sid, make_measurement(cand, 1e-3 / (i + 1)), None, float(i + 1))
        parent = parent or cand.fingerprint
    store.update_search(sid, status=SearchStatus.INTERRUPTED, best_candidate_id=rec.id, baseline_seconds=1e-3)
    store.close()
    return workload


@contextlib.contextmanager
def small_filesystem(where: Path, size: str = "64k") -> Iterator[bool]:
    """Mount a tmpfs of ``size`` at ``where`` when this process may (root); yield whether it did."""
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        yield False
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
                             capture_output=True).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def make_read_only(folder: Path, mounted: bool) -> None:
    """Read-only media: a read-only remount when ``folder`` is a mount, else permissions."""
    if mounted:
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    else:
        for p in [*folder.iterdir(), folder]:
            p.chmod(0o555 if p.is_dir() else 0o444)


# --------------------------------------------------------------------------- data is never code


@pytest.mark.slow
def test_schedule_files_never_run_a_workload_from_elsewhere_or_a_different_one(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "evil.py").write_text(evil_source(marker))
    sched = tmp_path / "schedules"
    sched.mkdir()
    (sched / "evil.py").write_text(evil_source(marker))  # inside, but not the recorded text
    recorded = sha256_text(evil_source(marker))
    other = sha256_text(KERNEL)

    def schedule(name: str, file: str, source_sha: str) -> None:
        data = {"format": "schedsearch-schedule", "version": 1, "steps": [], "fingerprint": "",
                "workload": {"file": file, "proc": "kern", "sizes": {"N": 16}, "source_sha256": source_sha}}
        (sched / name).write_text(json.dumps(data))

    schedule("relative.json", "../elsewhere/evil.py", recorded)        # escapes with ../
    schedule("absolute.json", str(elsewhere / "evil.py"), recorded)    # escapes by an absolute path
    schedule("mismatch.json", "evil.py", other)                        # inside, wrong text
    schedule("unhashed.json", "evil.py", "")                           # inside, nothing recorded
    r = run_cli("regress", str(sched), "--json")
    assert r.returncode == 1, r.stderr
    reasons = {Path(x["path"]).name: x["reason"] for x in json.loads(r.stdout)["results"]}
    assert "outside the schedule file's folder" in reasons["relative.json"]
    assert "outside the schedule file's folder" in reasons["absolute.json"]
    assert "--workloads" in reasons["relative.json"]
    assert "sha256" in reasons["mismatch.json"] and "not run" in reasons["mismatch.json"]
    assert "records no source_sha256" in reasons["unhashed.json"]
    assert not marker.exists()
    # Naming the folder allows the path, but the text must still be the recorded one.
    schedule("relative.json", "../elsewhere/evil.py", other)
    r = run_cli("regress", str(sched / "relative.json"), "--workloads", str(elsewhere), "--json")
    assert r.returncode == 1 and "sha256" in json.loads(r.stdout)["results"][0]["reason"]
    assert not marker.exists()


@pytest.mark.slow
def test_a_tampered_database_source_is_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    kern = tmp_path / "kern.py"
    kern.write_text(KERNEL)
    db = tmp_path / "shared.db"
    make_db(db, kern)
    evil = evil_source(marker)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:  # someone with write access to a shared database
        conn.execute("UPDATE workloads SET source = ?", (evil,))
    before = sha(db)
    for args in (["resume", "1", "--budget", "5"], ["export", "1", "--format", "c"]):
        one_line_error(run_cli(*args, "--db", str(db)), 2, "does not match its recorded sha256", "not run")
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:  # ... who also fixes up the hash
        conn.execute("UPDATE workloads SET source_sha256 = ?", (sha256_text(evil),))
    before = sha(db)
    for args in (["resume", "1", "--budget", "5"], ["export", "1", "--format", "c"]):
        one_line_error(run_cli(*args, "--db", str(db)), 2, "kern.py changed since search 1", "--trust-db-source")
    kern.unlink()  # the file is not on this machine: stored code alone never runs
    one_line_error(run_cli("resume", "1", "--budget", "5", "--db", str(db)), 2, "not on this machine",
                   "--trust-db-source")
    assert not marker.exists()
    assert sha(db) == before
    # A proc name pasted into the exported script must be a name.
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("""UPDATE workloads SET proc = 'cond; __import__("os").system("id") #'""")
    one_line_error(run_cli("export", "1", "--format", "py", "--db", str(db)), 2, "not an identifier")


def test_a_forged_loop_of_parents_is_refused_not_followed(tmp_path: Path) -> None:
    kern = tmp_path / "kern.py"
    kern.write_text(KERNEL)
    db = tmp_path / "shared.db"
    make_db(db, kern)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:  # the root names its own child as its parent
        conn.execute("UPDATE candidates SET parent_id = 2 WHERE id = 1")
    before = sha(db)
    one_line_error(run_cli("show", "1", "--db", str(db), timeout=60), 2, "broken line of parents")
    for args in (["tree", "1"], ["list"]):  # views that do not follow the line of parents still work
        assert run_cli(*args, "--db", str(db), timeout=60).returncode == 0, args
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:  # ... or a parent that is not there
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("UPDATE candidates SET parent_id = 999 WHERE id = 1")
    one_line_error(run_cli("show", "1", "--db", str(db), timeout=60), 2, "999")
    assert sha(db) != before  # (the second forgery) - and no command wrote to the file:
    after = sha(db)
    run_cli("show", "1", "--db", str(db), timeout=60)
    assert sha(db) == after


# --------------------------------------------------------------------------- damaged databases


def test_a_damaged_database_is_refused_by_every_command_and_left_untouched(tmp_path: Path) -> None:
    kern = tmp_path / "kern.py"
    kern.write_text(KERNEL)
    db = tmp_path / "results.db"
    make_db(db, kern, padding=6000)
    size = db.stat().st_size
    assert size > 64 * 1024
    with open(db, "r+b") as fh:  # 8 KiB of noise in the middle of a real results file
        fh.seek(size // 2 // 4096 * 4096)
        fh.write(os.urandom(8192))
    before, names = sha(db), listing(tmp_path)
    for args in (["list"], ["show", "1"], ["tree", "1"], ["export", "1", "--format", "json"],
                 ["resume", "1", "--budget", "5"]):
        line = one_line_error(run_cli(*args, "--db", str(db)), 2, "damaged", ".recover")
        assert str(db) in line
        assert sha(db) == before and listing(tmp_path) == names, args


# --------------------------------------------------------------------------- limits


def test_hostile_sizes_are_refused_before_anything_allocates(tmp_path: Path) -> None:
    matmul, db = str(EXAMPLES / "matmul.py"), tmp_path / "r.db"
    one_line_error(run_cli("explain", matmul, "--proc", "sgemm", "--size", f"M={2**63},N=8,K=8"), 2,
                   "does not fit in a 64-bit integer")
    r = run_cli("run", matmul, "--proc", "sgemm", "--size", "M=100000000000,N=100000,K=100000", "--db", str(db))
    one_line_error(r, 2, "needs", "available", "--size")
    assert not db.exists()


@pytest.mark.slow
def test_hostile_schedule_files_fail_fast_without_growing(tmp_path: Path) -> None:
    sched = tmp_path / "schedules"
    sched.mkdir()
    (sched / "kern.py").write_text(KERNEL)

    def schedule(name: str, n: int) -> None:
        data = {"format": "schedsearch-schedule", "version": 1, "fingerprint": "",
                "steps": [{"kind": "unroll", "target": "i #0", "args": {}}],
                "workload": {"file": "kern.py", "proc": "kern", "sizes": {"N": n},
                             "source_sha256": sha256_text(KERNEL)}}
        (sched / name).write_text(json.dumps(data))

    schedule("huge.json", 10**13)          # 40 TB of buffers
    schedule("unrolled.json", 100_000)     # fits in memory, but 100000 statements
    schedule("overflow.json", 2**64)       # not a 64-bit integer
    r = run_cli("regress", str(sched), "--json", timeout=120)
    assert r.returncode == 1, r.stderr
    reasons = {Path(x["path"]).name: x["reason"] for x in json.loads(r.stdout)["results"]}
    assert "needs" in reasons["huge.json"] and "available" in reasons["huge.json"]
    assert "over the limit" in reasons["unrolled.json"]
    assert "64-bit" in reasons["overflow.json"]


# --------------------------------------------------------------------------- small ones


@pytest.mark.parametrize("url", ["sqlite:///", "sqlite://", ":memory:", "sqlite:///:memory:"])
def test_run_refuses_an_in_memory_database(url: str, tmp_path: Path) -> None:
    one_line_error(run_cli("run", str(EXAMPLES / "matmul.py"), "--db", url, cwd=tmp_path), 2,
                   "in-memory database", "file path")
    assert listing(tmp_path) == []


def test_export_to_a_missing_folder_or_read_only_target(tmp_path: Path) -> None:
    kern = tmp_path / "kern.py"
    kern.write_text(KERNEL)
    db = tmp_path / "r.db"
    make_db(db, kern)
    before = sha(db)
    one_line_error(run_cli("export", "1", "--format", "py", "-o", str(tmp_path / "no/such/dir/x.py"), "--db", str(db)),
                   2, "does not exist")
    target = tmp_path / "ro"
    with small_filesystem(target) as mounted:
        make_read_only(target, mounted)
        if not mounted and os.geteuid() == 0:
            pytest.skip("root ignores permissions and cannot mount here")
        for fmt in ("py", "json"):
            one_line_error(run_cli("export", "1", "--format", fmt, "-o", str(target / f"x.{fmt}"), "--db", str(db)),
                           2, "cannot write", "writable")
    assert sha(db) == before


def test_read_commands_work_on_read_only_media(tmp_path: Path) -> None:
    media = tmp_path / "media"
    with small_filesystem(media, "4m") as mounted:
        if not mounted and os.geteuid() == 0:
            pytest.skip("root ignores permissions and cannot mount here")
        kern = media / "kern.py"
        kern.write_text(KERNEL)
        db = media / "r.db"
        make_db(db, kern)
        make_read_only(media, mounted)
        before, names = sha(db), listing(media)
        listed = run_cli("list", "--db", str(db), "--json")
        assert listed.returncode == 0, listed.stderr
        assert [s["search_id"] for s in json.loads(listed.stdout)] == [1]
        for args in (["show", "1"], ["tree", "1"], ["export", "1", "--format", "json"]):
            r = run_cli(*args, "--db", str(db))
            assert r.returncode == 0, (args, r.stderr)
        assert sha(db) == before and listing(media) == names


# --------------------------------------------------------------------------- infrastructure faults

FAULTY_CC = """#!/bin/sh
# gcc, except that kernel builds (-shared) fail the way the mode file says.
case " $* " in *" -shared "*)
  case "$(cat '{mode}' 2>/dev/null)" in
    enospc) echo "/usr/bin/ld: final link failed: No space left on device" >&2
            echo "collect2: error: ld returned 1 exit status" >&2; exit 1;;
    killed) kill -9 $$;;
    nolinker) echo "collect2: fatal error: cannot find 'ld'" >&2; exit 1;;
  esac;;
esac
exec gcc "$@"
"""


def _statuses(db: Path) -> tuple[str, list[str]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        status, failure = conn.execute("SELECT status, failure FROM searches WHERE id = 1").fetchone()
        assert bool(failure) == (status == "failed"), failure  # a failed search records why
        return status, [r[0] for r in conn.execute("SELECT status FROM candidates")]


@pytest.mark.slow
@pytest.mark.parametrize("fault, says", [("enospc", "No space left on device"), ("killed", "killed by signal 9"),
                                         ("nolinker", "cannot find")])
def test_a_broken_machine_stops_the_search_and_blames_no_candidate(fault: str, says: str, tmp_path: Path) -> None:
    """Faults injected by a compiler wrapper (the compiler sees a full disk, is killed by
    SIGKILL, or lacks its linker); the real full disk is the tmpfs test below."""
    kern = tmp_path / "kern.py"
    kern.write_text(KERNEL)
    mode = tmp_path / "mode"
    mode.write_text(fault)
    cc = tmp_path / "cc.sh"
    cc.write_text(FAULTY_CC.format(mode=mode))
    cc.chmod(0o755)
    db = tmp_path / "r.db"
    r = run_cli("run", str(kern), "--size", "N=64", "--workers", "0", "--max-candidates", "4", "--budget", "120",
                "--db", str(db), "--cc", str(cc))
    search_error(r, 2, says, f"schedsearch resume 1 --db {db} --cc {cc}")  # the command that goes on
    status, candidates = _statuses(db)
    assert status == "failed" and "build_error" not in candidates and "pending" in candidates
    shown = run_cli("show", "1", "--db", str(db), "--json")
    assert says in json.loads(shown.stdout)["failure"], shown.stdout
    if fault == "enospc":  # once the disk has room again, the same search goes on
        mode.write_text("ok")
        r = run_cli("resume", "1", "--db", str(db), "--max-candidates", "3", "--json", "--cc", str(cc))
        assert r.returncode == 0, r.stderr
        status, candidates = _statuses(db)
        assert status == "completed" and "build_error" not in candidates


@pytest.mark.slow
def test_a_full_disk_under_the_build_cache_stops_the_search(tmp_path: Path) -> None:
    """A real full disk: the build cache on a 64 KiB tmpfs (needs root to mount it; the
    injected ENOSPC above covers machines where that is not allowed)."""
    kern = tmp_path / "kern.py"
    kern.write_text(KERNEL)
    db = tmp_path / "r.db"
    cache = tmp_path / "cache"
    with small_filesystem(cache, "64k") as mounted:
        if not mounted:
            pytest.skip("mounting a small tmpfs needs root; the injected ENOSPC test covers this case")
        r = run_cli("run", str(kern), "--size", "N=64", "--workers", "0", "--max-candidates", "40", "--budget", "120",
                    "--db", str(db), env={"SCHEDSEARCH_CACHE_DIR": str(cache)})
    search_error(r, 2, "No space left on device", "schedsearch resume 1")
    status, candidates = _statuses(db)
    assert status == "failed" and "build_error" not in candidates
