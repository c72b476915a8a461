"""``schedsearch show`` and ``tree --json`` name the cluster nodes that timed a search's
candidates when there were several, and look as before when there was one."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from schedsearch.cli.commands_read import show_command, tree_command
from schedsearch.core import Status
from schedsearch.store import open_store
from schedsearch.testing.builders import make_candidate, make_config, make_machine, make_measurement, make_workload

HEAD, SECOND = "a1" * 28, "b2" * 28  # Ray node ids are 56 hex digits


def _db(tmp_path: Path, nodes: dict[str, str]) -> tuple[str, int]:
    """A search of a root and four children, timed round-robin on ``nodes`` (id -> host name);
    the fourth child failed to build on the last node and was never timed."""
    db = str(tmp_path / "r.db")
    store = open_store(db)
    sid = store.create_search(make_workload(), make_config(), make_machine())
    root = make_candidate("root")
    kids = [make_candidate(t, root) for t in ("a", "b", "c", "d")]
    for c in (root, *kids):
        store.add_candidate(sid, c)
    ids = list(nodes)
    for i, c in enumerate((root, *kids[:3])):
        node = ids[i % len(ids)]
        machine = dataclasses.replace(make_machine(), hostname=nodes[node])
        m = make_measurement(c, 1e-3 / (i + 1))
        store.record_measurement(sid, dataclasses.replace(m, node=node, built_node=node, machine=machine), None, None)
    failed = dataclasses.replace(make_measurement(kids[3], None, Status.BUILD_ERROR), built_node=ids[-1])
    store.record_measurement(sid, failed, None, None)
    store.close()
    return db, sid


def _show(db: str, sid: int, capsys: pytest.CaptureFixture[str], as_json: bool = False) -> str:
    show_command(sid, 10, db, as_json)
    return capsys.readouterr().out


def _columns(out: str) -> list[str]:
    (header,) = [ln for ln in out.splitlines() if "GFLOP/s ┃" in ln]
    return [c.strip() for c in header.split("┃")]


def test_show_names_the_nodes_of_a_search_timed_on_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, sid = _db(tmp_path, {HEAD: "vm-head", SECOND: "vm-second"})
    out = _show(db, sid, capsys)
    assert "timed on 2 nodes: vm-head 2 candidates, vm-second 2" in out
    assert "node" in _columns(out)
    rows = [ln for ln in out.splitlines() if "vm-head" in ln or "vm-second" in ln]
    assert len(rows) == 1 + 4  # the summary line and one row per timed candidate


def test_show_of_a_search_timed_on_one_node_has_no_node_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, sid = _db(tmp_path, {HEAD: "vm-head"})
    out = _show(db, sid, capsys)
    assert "timed on" not in out
    assert "node" not in _columns(out)
    assert "vm-head" not in out


def test_show_json_gives_each_candidate_s_nodes_and_the_count_per_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, sid = _db(tmp_path, {HEAD: "vm-head", SECOND: "vm-second"})
    data = json.loads(_show(db, sid, capsys, as_json=True))
    assert data["nodes"] == {HEAD: 2, SECOND: 2}
    by_fp = {c["candidate_id"]: (c["node"], c["built_node"], c["status"]) for c in data["top"]}
    assert sorted(v for v in by_fp.values() if v[2] == "ok") == sorted(
        [(HEAD, HEAD, "ok"), (SECOND, SECOND, "ok"), (HEAD, HEAD, "ok"), (SECOND, SECOND, "ok")]
    )
    tree_command(sid, None, db, True)
    tree = json.loads(capsys.readouterr().out)
    assert [(c["node"], c["built_node"]) for c in tree if c["status"] != "ok"] == [(None, SECOND)]


def test_show_json_outside_a_cluster_has_null_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "r.db")
    store = open_store(db)
    sid = store.create_search(make_workload(), make_config(), make_machine())
    root = make_candidate("root")
    store.add_candidate(sid, root)
    store.record_measurement(sid, make_measurement(root, 1e-3), None, None)
    store.close()
    data = json.loads(_show(db, sid, capsys, as_json=True))
    assert data["nodes"] == {}
    assert [(c["node"], c["built_node"]) for c in data["top"]] == [(None, None)]
