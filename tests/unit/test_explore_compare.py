"""SearchComparison: two searches of a store (in memory and a real SQLite file) side by side."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from schedsearch.core import (  # noqa: E402
    Candidate,
    Counters,
    MachineInfo,
    Measurement,
    Rewrite,
    RewriteKind,
    Schedule,
    SearchConfig,
    SearchStatus,
    Status,
    Timing,
    sha256_text,
)
from schedsearch.errors import NotFoundError  # noqa: E402
from schedsearch.explore import SearchComparison, compare_searches  # noqa: E402
from schedsearch.store import InMemoryStore, open_store  # noqa: E402
from schedsearch.testing.builders import make_workload  # noqa: E402

BASELINE = 1e-3


def _search(store, label: str, times: list[float | None]) -> int:
    """A completed search of workload ``label``: the unscheduled root at BASELINE, then one
    child of the root per entry of ``times`` (None: it failed to build)."""
    sid = store.create_search(make_workload(label), SearchConfig(), MachineInfo(cpu_model="test cpu"))
    root = None
    for i, seconds in enumerate([BASELINE, *times]):
        steps = () if i == 0 else (Rewrite.make(RewriteKind.SPLIT, f"i #{i}", factor=2),)
        fingerprint = sha256_text(f"{label} {i}")
        store.add_candidate(sid, Candidate(Schedule(steps), f"/* {label} {i} */", fingerprint, f"def p{i}(): pass",
                                           parent=root, depth=len(steps)))
        root = root or fingerprint
        if seconds is None:
            m = Measurement(fingerprint, Status.BUILD_ERROR, error="no", measured_at=float(i))
            store.record_measurement(sid, m, None, None)
        else:
            timing = Timing(median=seconds, min=seconds, q1=seconds, q3=seconds)
            m = Measurement(fingerprint, Status.OK, timing, measured_at=float(i))
            store.record_measurement(sid, m, None, BASELINE / seconds)
    n = len(times) + 1
    store.update_search(sid, baseline_seconds=BASELINE, elapsed_seconds=float(n + 2), status=SearchStatus.COMPLETED,
                        counters=Counters(evaluated=n, ok=sum(t is not None for t in times) + 1))
    return sid


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    st = InMemoryStore() if request.param == "memory" else open_store(str(tmp_path / "compare.db"))
    yield st
    st.close()
    plt.close("all")


def test_the_ratio_of_the_two_declared_bests(store) -> None:
    a = _search(store, "gemm", [8e-4, 5e-4, None])
    b = _search(store, "gemm", [4e-4, 2.5e-4])
    comparison = compare_searches(store, a, b)
    assert comparison.a.search.id == a and comparison.b.search.id == b
    assert comparison.a.declared_best.seconds == 5e-4 and comparison.b.declared_best.seconds == 2.5e-4
    assert comparison.b_speedup_over_a == pytest.approx(2.0)  # b's best is twice as fast
    assert compare_searches(store, b, a).b_speedup_over_a == pytest.approx(0.5)
    assert comparison.same_workload
    summary = comparison.summary()
    assert summary["a"]["best_seconds"] == 5e-4 and summary["b"]["best_seconds"] == 2.5e-4
    assert summary["b_speedup_over_a"] == pytest.approx(2.0) and summary["same_workload"]
    html = comparison._repr_html_()
    assert "2×</b> as fast" in html and html.count('class="schedsearch-tree"') == 2
    assert "different workloads" not in html


def test_a_table_with_one_row_per_search(store) -> None:
    a = _search(store, "gemm", [5e-4])
    b = _search(store, "gemv", [2e-4])
    frame = compare_searches(store, a, b).to_dataframe()
    assert list(frame["id"]) == [a, b]
    assert list(frame["best_seconds"]) == [5e-4, 2e-4]
    assert list(frame["best_numbers"]) == ["search_time", "search_time"]
    comparison = compare_searches(store, a, b)
    assert not comparison.same_workload and "different workloads" in comparison._repr_html_()


def test_both_progress_curves_on_one_plot(store) -> None:
    a = _search(store, "gemm", [8e-4, 9e-4, 5e-4])
    b = _search(store, "gemm", [2.5e-4])
    comparison = compare_searches(store, a, b)
    ax = comparison.plot_progress(x="count")
    lines = {ln.get_gid(): ln for ln in ax.lines}
    # one step per improvement, then the last best held to the last evaluation
    assert list(lines["progress:a"].get_xdata()) == [1.0, 2.0, 4.0]
    assert list(lines["progress:a"].get_ydata()) == pytest.approx([1e-3, 8e-4, 5e-4])
    assert list(lines["progress:b"].get_xdata()) == [1.0, 2.0]
    assert list(lines["progress:b"].get_ydata()) == pytest.approx([1e-3, 2.5e-4])
    assert {"baseline:a", "baseline:b"} <= set(lines)
    assert lines["progress:a"].get_label() == f"search {a} (best-first): 500 µs"
    dots = {c.get_gid(): c for c in ax.collections}
    assert len(dots["dots:a"].get_offsets()) == 4 and len(dots["dots:b"].get_offsets()) == 2
    assert ax.get_yscale() == "log" and lines["progress:a"].get_color() != lines["progress:b"].get_color()
    timed = comparison.plot_progress(x="time", scale="linear")
    (line,) = [ln for ln in timed.lines if ln.get_gid() == "progress:a"]
    assert line.get_xdata()[-1] == comparison.a.search.elapsed_seconds  # held to the end of the search
    with pytest.raises(ValueError, match="time"):
        comparison.plot_progress(x="depth")


def test_a_search_without_a_best_and_unknown_ids(store) -> None:
    a = _search(store, "gemm", [5e-4])
    empty = store.create_search(make_workload("gemm"), SearchConfig(), MachineInfo())
    comparison = compare_searches(store, a, empty)
    assert comparison.b_speedup_over_a is None
    assert "no successful candidate" in comparison._repr_html_()
    assert not [ln for ln in comparison.plot_progress().lines if ln.get_gid() == "progress:b"]
    with pytest.raises(NotFoundError):
        compare_searches(store, a, 999)


def test_loading_without_code(store) -> None:
    a = _search(store, "gemm", [5e-4])
    comparison = SearchComparison.load(store, a, a, code=False)
    assert comparison.b_speedup_over_a == 1.0
    assert all(r.c_source == "" and r.proc_text == "" for r in comparison.a.records)
    assert SearchComparison.load(store, a, a).a.records[0].c_source.startswith("/* gemm")
