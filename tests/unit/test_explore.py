"""SearchTree on a store (in memory and a real SQLite file) filled with a small hand-made search."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import schedsearch.explore  # noqa: E402
from schedsearch.core import (  # noqa: E402
    ArgRole,
    ArgSpec,
    Candidate,
    Counters,
    DType,
    MachineInfo,
    Measurement,
    Rewrite,
    RewriteKind,
    Schedule,
    SearchConfig,
    SearchStatus,
    Status,
    Timing,
    Workload,
    sha256_text,
)
from schedsearch.explore import SearchTree, list_searches, tree_layout  # noqa: E402
from schedsearch.explore.frames import NODE_COLUMNS  # noqa: E402
from schedsearch.store import InMemoryStore, open_store  # noqa: E402

BASELINE = 1e-3

ROOT_TEXT = """def sgemm(A: f32[8, 8] @ DRAM, B: f32[8, 8] @ DRAM, C: f32[8, 8] @ DRAM):
    for i in seq(0, 8):
        for j in seq(0, 8):
            for k in seq(0, 8):
                C[i, j] += A[i, k] * B[k, j]
"""
REORDERED_TEXT = ROOT_TEXT.replace(
    "for j in seq(0, 8):\n            for k", "for k in seq(0, 8):\n            for j"
)


def _workload() -> Workload:
    source = "# sgemm source\n"
    return Workload(
        path="/tmp/matmul.py",
        source=source,
        source_sha256=sha256_text(source),
        proc="sgemm",
        sizes=(("M", 8), ("N", 8), ("K", 8)),
        args=tuple(ArgSpec(n, ArgRole.TENSOR, DType.F32, (8, 8), n == "C") for n in "ABC"),
        flops=2 * 8**3,
    )


def _timing(seconds: float) -> Timing:
    return Timing(median=seconds, min=seconds * 0.95, q1=seconds * 0.98, q3=seconds * 1.02)


def _add(store, sid, steps, parent, text, status, seconds=None):
    schedule = Schedule(tuple(steps))
    fingerprint = sha256_text(schedule.dumps())
    store.add_candidate(
        sid,
        Candidate(schedule, f"/* {fingerprint} */", fingerprint, text, parent=parent, depth=len(steps)),
    )
    timing = _timing(seconds) if seconds is not None else None
    error = "" if status in (Status.OK, Status.PENDING) else f"{status.value}: details\nmore lines"
    if status is not Status.PENDING:
        speedup = BASELINE / seconds if seconds is not None else None
        m = Measurement(fingerprint, status, timing, error, build_seconds=0.25, run_seconds=0.125, measured_at=1.5)
        store.record_measurement(sid, m, None, speedup)
    return fingerprint


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    """root(1) -> ok(2) [-> ok(5) [-> pending(7)], ok(6)], wrong_result(3), build_error(4)."""
    st = InMemoryStore() if request.param == "memory" else open_store(str(tmp_path / "explore.db"))
    sid = st.create_search(_workload(), SearchConfig(), MachineInfo(cpu_model="test cpu"))
    reorder = Rewrite.make(RewriteKind.REORDER, "j #0")
    split = Rewrite.make(RewriteKind.SPLIT, "i #0", factor=4)
    unroll = Rewrite.make(RewriteKind.UNROLL, "k #0")
    root = _add(st, sid, [], None, ROOT_TEXT, Status.OK, BASELINE)
    two = _add(st, sid, [reorder], root, REORDERED_TEXT, Status.OK, BASELINE / 2)
    _add(st, sid, [split], root, ROOT_TEXT + "# split\n", Status.WRONG_RESULT)
    _add(st, sid, [unroll], root, ROOT_TEXT + "# unrolled\n", Status.BUILD_ERROR)
    five = _add(st, sid, [reorder, split], two, REORDERED_TEXT + "# five\n", Status.OK, BASELINE / 4.25)
    _add(st, sid, [reorder, unroll], two, REORDERED_TEXT + "# six\n", Status.OK, BASELINE / 3)
    _add(st, sid, [reorder, split, unroll], five, REORDERED_TEXT + "# seven\n", Status.PENDING)
    st.mark_expanded(sid, 1)
    st.mark_expanded(sid, 2)
    counters = Counters(generated=6, evaluated=6, ok=4, failed=2)
    st.update_search(
        sid, baseline_seconds=BASELINE, elapsed_seconds=30.0, status=SearchStatus.COMPLETED, counters=counters
    )
    yield st
    st.close()


@pytest.fixture
def tree(store) -> SearchTree:
    return SearchTree.load(store, 1)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_dataframe_has_one_row_per_candidate_with_flat_values(tree):
    df = tree.to_dataframe()
    assert list(df.columns) == list(NODE_COLUMNS)
    assert list(df["id"]) == [1, 2, 3, 4, 5, 6, 7]
    rows = df.set_index("id")
    assert pd.isna(rows.loc[1, "parent_id"])
    assert list(rows.loc[[2, 3, 4, 5, 6, 7], "parent_id"]) == [1, 1, 1, 2, 2, 5]
    assert list(rows["depth"]) == [0, 1, 1, 1, 2, 2, 3]
    assert rows.loc[1, "step"] == ""
    assert rows.loc[2, "step"] == "reorder j #0"
    assert rows.loc[5, "step"] == "split i #0 factor=4"
    assert list(rows["status"]) == ["ok", "ok", "wrong_result", "build_error", "ok", "ok", "pending"]
    assert rows.loc[5, "speedup"] == pytest.approx(4.25)
    assert rows.loc[2, "seconds"] == pytest.approx(BASELINE / 2)
    # What measuring each one cost, and when; the pending one has not been measured.
    assert (rows.loc[4, "build_seconds"], rows.loc[4, "run_seconds"], rows.loc[4, "measured_at"]) == (0.25, 0.125, 1.5)
    assert rows.loc[7, "build_seconds"] == 0.0 and pd.isna(rows.loc[7, "measured_at"])
    assert pd.isna(rows.loc[3, "seconds"]) and pd.isna(rows.loc[3, "speedup"])
    assert rows.loc[3, "error"] == "wrong_result: details"
    assert bool(rows.loc[2, "expanded"]) and not bool(rows.loc[5, "expanded"])
    assert rows.loc[4, "fingerprint"] == tree[4].fingerprint


def test_lineage_children_and_lookup(tree):
    assert [r.id for r in tree.lineage(5)] == [1, 2, 5]
    assert [r.id for r in tree.lineage(1)] == [1]
    assert [r.id for r in tree.children(1)] == [2, 3, 4]
    assert [r.id for r in tree.children(2)] == [5, 6]
    assert [r.id for r in tree.lineage(7)] == [1, 2, 5, 7]
    assert tree.children(4) == []
    assert tree.root is not None and tree.root.id == 1
    assert len(tree) == 7 and 7 in tree and 8 not in tree
    with pytest.raises(KeyError, match="#99"):
        tree.lineage(99)


def test_best_and_winner(tree, store):
    assert [r.id for r in tree.best(3)] == [5, 6, 2]
    assert tree.winner.id == 5
    # The declared winner (side-by-side re-measurement) takes precedence over raw timings.
    store.update_search(1, best_candidate_id=6, best_speedup=3.1)
    assert SearchTree.load(store, 1).winner.id == 6
    top = tree.top_dataframe(2)
    assert list(top["id"]) == [5, 6]
    assert top.loc[0, "schedule"] == "reorder j #0 ; split i #0 factor=4"


def test_diff_shows_the_changed_lines(tree):
    text = tree.diff(2)
    assert "--- #1 (unscheduled)" in text and "+++ #2 reorder j #0" in text
    assert "-        for j in seq(0, 8):" in text
    assert "+        for k in seq(0, 8):" in text
    assert "+# five" in tree.diff(5)
    assert "-        for j in seq(0, 8):" in tree.diff(5, against=1)
    assert tree.diff(1) == ""


def test_to_networkx_carries_attributes(tree):
    graph = tree.to_networkx()
    assert graph.number_of_nodes() == 7
    assert sorted(graph.edges) == [(1, 2), (1, 3), (1, 4), (2, 5), (2, 6), (5, 7)]
    assert graph.nodes[3]["status"] == "wrong_result"
    assert graph.nodes[5]["speedup"] == pytest.approx(4.25)
    assert graph.edges[2, 5]["step"] == "split i #0 factor=4"


def _points_by_gid(ax):
    return {
        c.get_gid(): len(c.get_offsets()) for c in ax.collections if (c.get_gid() or "").startswith("nodes:")
    }


def test_plot_draws_every_node_with_failures_marked(tree):
    ax = tree.plot()
    assert _points_by_gid(ax) == {
        "nodes:ok": 4,
        "nodes:wrong_result": 1,
        "nodes:build_error": 1,
        "nodes:pending": 1,
    }
    ok = next(c for c in ax.collections if c.get_gid() == "nodes:ok")
    # Coloured by speedup through a log colour scale from the median ok speedup to the best,
    # so the top candidates get distinct colours.
    assert sorted(ok.get_array()) == pytest.approx([1.0, 2.0, 3.0, 4.25])
    assert ok.norm.vmin == pytest.approx(2.5) and ok.norm.vmax == pytest.approx(4.25)
    assert len(ax.figure.axes) == 2  # the tree and its colorbar
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "wrong_result (1)" in legend and "build_error (1)" in legend and "best #5" in legend
    edges = next(c for c in ax.collections if c.get_gid() == "edges")
    assert len(edges.get_segments()) == 6


def test_plot_draws_and_labels_the_path_to_the_best(tree):
    ax = tree.plot()
    (path,) = [c for c in ax.collections if c.get_gid() == "best-path"]
    assert len(path.get_segments()) == 2  # root -> #2 -> #5
    kinds = [t.get_text() for t in ax.texts if t.get_gid() == "best-path:label"]
    assert kinds == ["reorder", "split"]
    assert [t.get_text() for t in ax.texts if t.get_gid() == "best:label"] == ["best #5: 4.25×"]


def test_plot_on_given_axes_lays_out_by_depth(tree):
    _, given = plt.subplots()
    ax = tree.plot(ax=given, labels=True)
    assert ax is given
    ys = sorted(
        {
            round(y, 6)
            for c in ax.collections
            if (c.get_gid() or "").startswith("nodes:")
            for _, y in c.get_offsets()
        }
    )
    assert ys == [-3.0, -2.0, -1.0, 0.0]
    assert {t.get_text() for t in ax.texts if t.get_gid() == "id"} == {str(i) for i in range(1, 8)}


def test_plot_progress_has_one_point_per_improvement(tree):
    ax = tree.plot_progress(x="count")
    (line,) = [ln for ln in ax.lines if ln.get_gid() == "progress"]
    assert list(line.get_xdata()) == [1.0, 2.0, 5.0]
    assert list(line.get_ydata()) == pytest.approx([1.0, 2.0, 4.25])
    (tail,) = [ln for ln in ax.lines if ln.get_gid() == "progress:tail"]
    assert list(tail.get_xdata()) == [5.0, 6.0]  # carried on to the last evaluation
    # every measured ok candidate is drawn behind the curve, at its place in the measuring order
    (dots,) = [c for c in ax.collections if c.get_gid() == "candidates"]
    assert [float(x) for x, _ in dots.get_offsets()] == [1.0, 2.0, 5.0, 6.0]
    assert [float(y) for _, y in dots.get_offsets()] == pytest.approx([1.0, 2.0, 4.25, 3.0])
    timed = tree.plot_progress(x="time")
    (line,) = [ln for ln in timed.lines if ln.get_gid() == "progress"]
    assert len(line.get_xdata()) == 3
    assert list(line.get_xdata()) == sorted(line.get_xdata())
    with pytest.raises(ValueError, match="time"):
        tree.plot_progress(x="depth")


def test_plot_progress_scales_and_zooms(tree):
    assert tree.plot_progress().get_yscale() == "linear"
    assert tree.plot_progress(scale="log").get_yscale() == "log"
    low, high = tree.plot_progress(x="count", zoom=0.5).get_ylim()
    assert low == pytest.approx(0.5 * 4.25) and high == pytest.approx(4.25 * 1.05)
    with pytest.raises(ValueError, match="zoom"):
        tree.plot_progress(zoom=2.0)


def test_tables_show_readable_times_and_the_spread(tree):
    top = tree.top_dataframe(2)
    assert list(top["time"]) == ["235 µs", "333 µs"]
    assert list(top["spread"]) == ["±2.0%", "±2.0%"]  # q1 and q3 are 2% either side
    assert top.loc[0, "seconds"] == pytest.approx(BASELINE / 4.25)
    nodes = tree.to_dataframe().set_index("id")
    assert nodes.loc[1, "time"] == "1 ms" and nodes.loc[3, "time"] == "—"


def test_kinds_table_counts_what_each_rewrite_kind_did(tree):
    kinds = tree.kinds_dataframe().set_index("kind")
    # reorder: #2 (ok, 2x over the root); split: #3 (wrong result) and #5 (ok, 2.1x over #2);
    # unroll: #4 (build error), #6 (ok, 1.5x over #2) and #7 (pending)
    assert kinds.loc["reorder", ["tried", "legal", "ok", "faster", "on_best_path"]].tolist() == [1, 1, 1, 1, 1]
    assert kinds.loc["split", ["tried", "legal", "ok", "faster", "on_best_path"]].tolist() == [2, 2, 1, 1, 1]
    assert kinds.loc["unroll", ["tried", "legal", "ok", "faster", "on_best_path"]].tolist() == [3, 3, 1, 1, 0]
    assert kinds.loc["split", "best_gain"] == pytest.approx(2.125)
    assert list(kinds.index) == ["unroll", "split", "reorder"]  # most tried first


def test_html_summary_shows_best_speedup_and_top_table(tree, store):
    page = tree._repr_html_()
    assert "sgemm[M=8,N=8,K=8]" in page
    assert "4.25×" in page and "#5" in page
    assert page.count("<tr>") == 1 + 4  # header + the four ok candidates
    assert "wrong_result 1" in page
    assert "search-time median, not re-measured" in page and "finalists re-measured" not in page
    assert "235 µs ±2.0%" in page  # times with their spread
    store.update_search(1, best_candidate_id=6, best_seconds=3.2e-4, best_speedup=3.1)
    remeasured = SearchTree.load(store, 1)._repr_html_()
    assert "3.1×" in remeasured and "#6" in remeasured and "finalists re-measured side by side" in remeasured
    assert "320 µs" in remeasured


def test_the_declared_best_and_its_kind_of_numbers(tree, store):
    best = tree.declared_best
    assert best.record.id == 5 and best.kind.value == "search_time" and best.speedup == pytest.approx(4.25)
    assert best.spread == pytest.approx(0.04)
    # A re-measurement that could not run stores the winner's own numbers: still search-time.
    five = tree[5]
    store.update_search(1, best_candidate_id=5, best_seconds=five.seconds, best_speedup=five.speedup)
    assert SearchTree.load(store, 1).declared_best.kind.value == "search_time"
    # The finalists re-measured side by side: the stored numbers, whoever ranked first before.
    store.update_search(1, best_candidate_id=6, best_seconds=3.2e-4, best_speedup=3.1)
    again = SearchTree.load(store, 1)
    best = again.declared_best
    assert (best.record.id, best.seconds, best.speedup, best.kind.value) == (6, 3.2e-4, 3.1, "remeasured")
    assert again.winner.id == 6 and again.summary()["best_numbers"] == "remeasured"
    assert list_searches(store).loc[0, ["best_candidate_id", "best_speedup", "best_numbers"]].tolist() == [
        6, 3.1, "remeasured"]


def test_nodes_carry_spread_gain_and_noise(tree):
    nodes = tree.to_dataframe().set_index("id")
    assert nodes.loc[2, "spread"] == "±2.0%"
    assert nodes.loc[2, "gain"] == pytest.approx(2.0) and not nodes.loc[2, "within_noise"]
    assert pd.isna(nodes.loc[1, "gain"]) and pd.isna(nodes.loc[1, "within_noise"])  # the root has no parent


def test_list_searches_table(store):
    store.create_search(_workload(), SearchConfig(seed=1), MachineInfo())
    table = list_searches(store)
    assert list(table["id"]) == [1, 2]
    assert list(table["status"]) == ["completed", "running"]
    assert table.loc[0, "workload"] == "sgemm[M=8,N=8,K=8]"
    assert table.loc[0, "baseline_seconds"] == pytest.approx(BASELINE)


def test_layout_spaces_leaves_in_dfs_order_and_centres_parents():
    layout = tree_layout({1: None, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 9: 42})
    pos = layout.positions
    assert [pos[n][0] for n in (4, 5, 6, 9)] == [0.0, 1.0, 2.0, 3.0]  # leaves, DFS order
    assert pos[2] == (0.5, -1.0) and pos[3] == (2.0, -1.0)
    assert pos[1] == (1.25, 0.0)
    assert pos[9] == (3.0, 0.0)  # unknown parent: drawn as another root
    assert (layout.leaves, layout.depth) == (4, 2)


def test_empty_search_still_renders(store):
    sid = store.create_search(_workload(), SearchConfig(seed=2), MachineInfo())
    empty = SearchTree.load(store, sid)
    assert empty.root is None and empty.winner is None and empty.best() == []
    assert "no successful candidates" in empty._repr_html_()
    assert empty.to_dataframe().empty
    assert not _points_by_gid(empty.plot())
    assert "no progress recorded" in [t.get_text() for t in empty.plot_progress().texts]


def test_explore_imports_only_core_errors_and_notebook_libraries():
    allowed = {"schedsearch.core", "schedsearch.errors", "schedsearch.numbers", "schedsearch.explore"}
    forbidden = {"exo", "ray", "sqlalchemy", "rich", "click"}
    package = Path(schedsearch.explore.__file__).parent
    for module in package.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in forbidden, f"{module.name} imports {name}"
                if name.startswith("schedsearch"):
                    assert any(name == a or name.startswith(a + ".") for a in allowed), (
                        f"{module.name}: {name}"
                    )


def test_importing_explore_leaves_the_notebook_libraries_unloaded():
    # A CLI or worker that only needs SearchTree's data should not pay for pandas/matplotlib.
    libraries = "{'pandas', 'matplotlib', 'networkx'}"
    probe = f"import sys, schedsearch.explore; print(sorted({libraries} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
