"""Real ``schedsearch run``s (no Ray, real Exo and gcc) sharing one database: a second run
reuses the first's measurements and warm-starts from its best schedules; ``--remeasure``,
``--no-warm-start`` and other flags measure again; a run at other sizes replays what
applies."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, run_cli

BUDGET = 6  # candidates each run measures, the root included
# The scalar target keeps the root's rewrites few (register tiles in vector instructions take Exo long).


def _run(db: Path, *extra: str, size: str = "M=16,N=16,K=16") -> dict:
    r = run_cli("run", str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", size, "--workers", "0",
                "--max-candidates", str(BUDGET), "--budget", "240", "--cost-model", "off", "--target", "scalar", "--db", str(db), "--json",
                *extra, cwd=db.parent)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    out["stderr"] = r.stderr
    return out


def _measured_by(db: Path, search_id: int) -> dict[str, tuple[str, int | None, int | None]]:
    """fingerprint -> (status, reused search, reused candidate) of a search's measured candidates."""
    with sqlite3.connect(db) as raw:
        rows = raw.execute("SELECT fingerprint, status, reused_search_id, reused_candidate_id FROM candidates "
                           "WHERE search_id = ? AND status != 'pending'", (search_id,)).fetchall()
    return {fp: (status, rs, rc) for fp, status, rs, rc in rows}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    db = tmp_path_factory.mktemp("reuse") / "r.db"
    first = _run(db)
    second = _run(db)
    return db, first, second


@pytest.mark.slow
def test_a_second_run_reuses_and_warm_starts(runs: tuple[Path, dict, dict]) -> None:
    db, first, second = runs
    c1, c2 = first["candidates"], second["candidates"]
    assert (c1["reused"], c1["warm_started"]) == (0, 0) and "warm start" not in first["stderr"]
    assert c1["evaluated"] == BUDGET
    # The first run's best schedules come first; at the same sizes they give the same C, whose
    # measurements are taken; the budget buys new measurements on top.
    assert c2["warm_started"] >= 1 and c2["reused"] >= c2["warm_started"]
    assert c2["evaluated"] - c2["reused"] == BUDGET
    assert second["warm_start"]["skipped"] == [] and len(second["warm_start"]["seeds"]) == c2["warm_started"]
    assert "warm start:" in second["stderr"] and "reused" in second["stderr"]
    earlier = _measured_by(db, first["search_id"])
    now = _measured_by(db, second["search_id"])
    ids = {fp: cid for fp, cid in _ids(db, first["search_id"]).items()}
    reused = {fp: row for fp, row in now.items() if row[2] is not None}
    assert len(reused) == c2["reused"]
    for fp, (status, source_search, source_candidate) in reused.items():
        assert (source_search, source_candidate) == (first["search_id"], ids[fp])
        assert status == earlier[fp][0]
    # Nothing the first run measured (ok, build_error, wrong_result) was measured again, but the root.
    measured_again = {fp for fp, row in now.items() if row[2] is None} & set(earlier)
    assert all(earlier[fp][0] in ("timeout", "run_error") or _is_root(db, fp) for fp in measured_again)
    shown = json.loads(run_cli("show", str(second["search_id"]), "--db", str(db), "--json").stdout)
    assert shown["candidates"] == c2
    nodes = json.loads(run_cli("tree", str(second["search_id"]), "--db", str(db), "--json").stdout)
    assert sum(n["reused_from"] is not None for n in nodes) == c2["reused"]


def _ids(db: Path, search_id: int) -> dict[str, int]:
    with sqlite3.connect(db) as raw:
        return dict(raw.execute("SELECT fingerprint, id FROM candidates WHERE search_id = ?", (search_id,)))


def _is_root(db: Path, fingerprint: str) -> bool:
    with sqlite3.connect(db) as raw:
        return bool(raw.execute("SELECT 1 FROM candidates WHERE fingerprint = ? AND parent_id IS NULL",
                                (fingerprint,)).fetchall())


@pytest.mark.slow
@pytest.mark.parametrize("extra", [("--remeasure", "--no-warm-start"), ("--cflags", "-O2 -march=native")],
                         ids=["remeasure", "other-flags"])
def test_measured_again_when_asked_or_built_otherwise(runs: tuple[Path, dict, dict], extra: tuple[str, ...]) -> None:
    db, first, _ = runs
    out = _run(db, *extra)
    c = out["candidates"]
    assert c["reused"] == 0 and c["evaluated"] == BUDGET
    assert all(row[2] is None for row in _measured_by(db, out["search_id"]).values())
    if "--no-warm-start" in extra:
        assert c["warm_started"] == 0 and "warm_start" not in out
    else:  # warm-started from the earlier runs' schedules, but measured with these flags
        assert c["warm_started"] >= 1


@pytest.mark.slow
def test_a_run_at_other_sizes_replays_what_still_applies(runs: tuple[Path, dict, dict]) -> None:
    db, _, _ = runs
    out = _run(db, size="M=12,N=12,K=12")
    warm = out["warm_start"]
    assert out["candidates"]["warm_started"] == len(warm["seeds"])
    assert len(warm["seeds"]) + len(warm["skipped"]) + warm["duplicates"] >= 1
    assert all(s["sizes"] == {"M": 16, "N": 16, "K": 16} for s in warm["seeds"] + warm["skipped"])
    assert all(s["reason"] for s in warm["skipped"])
