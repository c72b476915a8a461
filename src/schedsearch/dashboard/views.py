"""What each page shows, read from an open store: frozen records of plain values.

Every function here only reads (``Store`` getters); numbers come out formatted as the CLI
words them, the best being ``numbers.declared_best`` - the same candidate and numbers
``schedsearch list``/``show`` report. The search and compare pages read their searches as
explore's ``SearchTree`` (the data a notebook plots), without the candidates' code
(``code=False``): a tree of thousands of candidates is then a few megabytes less to read.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from schedsearch.core import CandidateRecord, Rewrite, SearchRecord, SearchStatus, Status, Store
from schedsearch.dashboard import fmt
from schedsearch.dashboard.plot import Curve, Plot, curve_of, progress_plot
from schedsearch.dashboard.tree import TreeView, build_tree, last_step
from schedsearch.errors import NotFoundError
from schedsearch.explore import SearchComparison, SearchTree
from schedsearch.nodes import SHORT_ID, node_labels, several_nodes, timed_on, timed_on_text
from schedsearch.numbers import DeclaredBest, best_among, ending, load_declared_best, step

Describe = Callable[[Rewrite], str]
#: Rows of a search page's table of fastest candidates.
TOP_ROWS = 20


@dataclass(frozen=True, slots=True)
class SearchSummary:
    """A search in one line: what the list shows and its JSON endpoint returns."""

    id: int
    label: str
    path: str
    status: str
    running: bool
    ending: str
    failure: str
    strategy: str
    target: str
    started: str
    elapsed: str
    evaluated: int
    generated: int  # rewrites tried: with ``evaluated``, what a live page watches for change
    ok: int
    failed: int
    baseline: str
    best_id: int | None
    best_seconds: float | None
    best_time: str
    best_gflops: str
    best_speedup: str
    numbers: str  # which kind of numbers the best's are ("" when there is no best)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def summary_of(search: SearchRecord, best: DeclaredBest | None) -> SearchSummary:
    """``search`` with its declared best."""
    c = search.counters
    return SearchSummary(
        id=search.id,
        label=search.workload.label,
        path=search.workload.path,
        status=search.status.value,
        running=search.status is SearchStatus.RUNNING,
        ending=ending(search).text,
        failure=search.failure,
        strategy=search.config.strategy.value,
        target=search.config.expand.target,
        started=fmt.moment(search.started_at),
        elapsed=fmt.elapsed(search.elapsed_seconds),
        evaluated=c.evaluated,
        generated=c.generated,
        ok=c.ok,
        failed=c.failed,
        baseline=fmt.seconds(search.baseline_seconds),
        best_id=best.record.id if best else None,
        best_seconds=best.seconds if best else None,
        best_time=fmt.timed(best.seconds, best.spread) if best else "-",
        best_gflops=fmt.num(best.gflops) if best else "-",
        best_speedup=fmt.num(best.speedup, "x") if best else "-",
        numbers=best.kind.text if best else "",
    )


def searches(store: Store) -> list[SearchSummary]:
    """Every search in the database, oldest first."""
    return [summary_of(s, load_declared_best(store, s)) for s in store.list_searches()]


def search_summary(store: Store, search_id: int) -> SearchSummary:
    """One search's line (NotFoundError for an unknown id)."""
    search = store.get_search(search_id)
    return summary_of(search, load_declared_best(store, search))


@dataclass(frozen=True, slots=True)
class Row:
    """A candidate in a table."""

    id: int
    depth: int
    status: str
    time: str
    gflops: str
    speedup: str
    gain: str
    noise: bool
    step: str
    measured_at: str
    best: bool
    node: str = ""  # the short name of the cluster node that timed it ("" outside a cluster)


@dataclass(frozen=True, slots=True)
class StepLine:
    """One step of a schedule; with the numbers of the candidate it made when each
    candidate on the path added one step (``candidate_id`` None otherwise)."""

    number: int
    text: str
    candidate_id: int | None = None
    time: str = ""
    speedup: str = ""
    gain: str = ""
    noise: bool = False


@dataclass(frozen=True, slots=True)
class SearchPage:
    summary: SearchSummary
    machine: str
    counts: str
    plot: Plot
    tree: TreeView
    top: tuple[Row, ...]
    best_steps: tuple[StepLine, ...]
    nodes: str = ""  # "timed on 2 nodes: ..." when several cluster nodes timed it, else ""
    node_column: bool = False  # the fastest candidates' table names each one's node (several nodes)


def _row(
    r: CandidateRecord,
    parent: CandidateRecord | None,
    best_id: int | None,
    describe: Describe,
    labels: Mapping[str, str] | None = None,
) -> Row:
    """``r`` as a table row; ``labels`` (node id -> short name) names the node that timed it."""
    s = step(r, parent)
    return Row(
        id=r.id,
        depth=r.depth,
        status=r.status.value,
        time=fmt.timed(r.seconds, r.timing.spread if r.timing is not None else None),
        gflops=fmt.num(r.gflops),
        speedup=fmt.num(r.speedup, "x"),
        gain=fmt.num(s.gain, "x") if s.gain is not None else "",
        noise=bool(s.within_noise),
        step=last_step(r, describe),
        measured_at=f"{r.measured_at:.1f} s" if r.measured_at is not None else "-",
        best=r.id == best_id,
        node=(labels or {}).get(r.node, r.node[:SHORT_ID]),
    )


def step_lines(lineage: Sequence[CandidateRecord], describe: Describe) -> tuple[StepLine, ...]:
    """The schedule of ``lineage[-1]`` (root first), each step with the numbers of the
    candidate it made when the path adds one step per candidate."""
    if not lineage:
        return ()
    steps = lineage[-1].schedule.steps
    one_per_step = len(lineage) == len(steps) + 1 and all(r.schedule.steps == steps[:i] for i, r in enumerate(lineage))
    if not one_per_step:
        return tuple(StepLine(i + 1, describe(s)) for i, s in enumerate(steps))
    lines = []
    for i, (parent, r) in enumerate(itertools.pairwise(lineage)):
        s = step(r, parent)
        lines.append(
            StepLine(
                i + 1,
                describe(steps[i]),
                r.id,
                fmt.timed(r.seconds, r.timing.spread if r.timing is not None else None),
                fmt.num(r.speedup, "x"),
                fmt.num(s.gain, "x") if s.gain is not None else "",
                bool(s.within_noise),
            )
        )
    return tuple(lines)


def _curve(tree: SearchTree) -> Curve:
    s = tree.search
    return curve_of(f"search {s.id}", tree.records, tree.progress, s.started_at, s.elapsed_seconds, s.baseline_seconds)


def _machine(search: SearchRecord) -> str:
    m = search.machine
    flags = " ".join(m.cflags)
    return f"{m.cpu_model or 'unknown CPU'}, {m.cores} cores; {m.compiler or 'cc'} {m.compiler_version} {flags}".strip()


def _counts(records: Sequence[CandidateRecord], search: SearchRecord) -> str:
    ok = sum(r.status is Status.OK for r in records)
    pending = sum(r.status is Status.PENDING for r in records)
    c = search.counters
    return (
        f"{len(records)} candidates: {ok} ok, {len(records) - ok - pending} failed, {pending} not measured; "
        f"{c.generated} rewrites tried ({c.duplicates} duplicate, {c.illegal} illegal)"
    )


def search_page(store: Store, search_id: int, describe: Describe) -> SearchPage:
    """The search's summary, progress plot, tree, fastest candidates and best schedule, from
    explore's ``SearchTree`` (what a notebook plots the search from)."""
    tree = SearchTree.load(store, search_id, describe, code=False)
    search, records, best = tree.search, tree.records, tree.declared_best
    best_id = best.record.id if best else None
    nodes = timed_on(records)
    labels = node_labels(records)
    top = tuple(
        _row(
            r, tree[r.parent_id] if r.parent_id is not None and r.parent_id in tree else None, best_id, describe, labels
        )
        for r in tree.best(TOP_ROWS)
    )
    return SearchPage(
        summary=summary_of(search, best),
        machine=_machine(search),
        counts=_counts(records, search),
        plot=progress_plot([_curve(tree)]),
        tree=build_tree(search_id, records, best_id=best_id, describe=describe),
        top=top,
        best_steps=step_lines(tree.best_path(), describe),
        nodes=timed_on_text(nodes),
        node_column=several_nodes(nodes),
    )


def plot_of(store: Store, search_id: int) -> Plot:
    """Just the search's progress plot (``/searches/ID/plot.svg``)."""
    return progress_plot([_curve(SearchTree.load(store, search_id, code=False))])


def subtree(store: Store, search_id: int, root_id: int, describe: Describe) -> TreeView:
    """The part of the search's tree under candidate ``root_id`` (NotFoundError when the
    search has no such candidate)."""
    search = store.get_search(search_id)
    records = store.candidates(search_id, code=False)
    best = best_among(search, records)
    if root_id not in {r.id for r in records}:
        store.get_candidate(root_id)  # NotFoundError when it is nowhere
        raise NotFoundError(f"candidate {root_id} is not in search {search_id}")
    return build_tree(search_id, records, best_id=best.record.id if best else None, describe=describe, root_id=root_id)


@dataclass(frozen=True, slots=True)
class DiffLine:
    kind: str  # "add", "del", "hunk", "head" or "same"
    text: str


@dataclass(frozen=True, slots=True)
class CandidatePage:
    search: SearchSummary
    row: Row
    parent_id: int | None
    fingerprint: str
    error: str
    max_error: str
    build_seconds: str
    run_seconds: str
    reused_from: tuple[int, int] | None  # (search, candidate) its measurement was taken from
    where: Where
    steps: tuple[StepLine, ...]
    diff: tuple[DiffLine, ...]  # its proc text against its parent's
    proc_text: str
    c_source: str


def proc_diff(parent: CandidateRecord | None, record: CandidateRecord) -> tuple[DiffLine, ...]:
    """``record``'s Exo proc against its parent's, as unified diff lines (empty for the root)."""
    if parent is None:
        return ()
    kinds = {"+": "add", "-": "del", "@": "hunk", " ": "same"}
    lines = difflib.unified_diff(
        parent.proc_text.splitlines(),
        record.proc_text.splitlines(),
        f"candidate {parent.id}",
        f"candidate {record.id}",
        lineterm="",
    )
    return tuple(
        DiffLine("head" if line.startswith(("---", "+++")) else kinds.get(line[:1], "same"), line) for line in lines
    )


@dataclass(frozen=True, slots=True)
class Where:
    """Where a candidate's latest measurement was taken: the Ray nodes that timed and built
    it ("" outside a cluster or when not known), the timing machine's host name, and that
    machine's fingerprint (``MachineInfo.fingerprint``)."""

    node: str
    built_node: str
    host: str
    machine_fingerprint: str
    search_machine: bool  # no machine was stored with it: the search's own is shown


def where_of(record: CandidateRecord, search: SearchRecord) -> Where:
    """``record``'s nodes and machine; its search's machine when it stored none."""
    machine = record.machine if record.machine is not None else search.machine
    return Where(record.node, record.built_node, machine.hostname, machine.fingerprint, record.machine is None)


def candidate_page(store: Store, candidate_id: int, describe: Describe) -> CandidatePage:
    """One candidate: its numbers, schedule, Exo proc diff against its parent, and C."""
    lineage = store.lineage(candidate_id)
    record = lineage[-1]
    parent = lineage[-2] if len(lineage) > 1 else None
    search = store.get_search(record.search_id)
    best = load_declared_best(store, search)
    reused = (
        (record.reused_search_id, record.reused_candidate_id)
        if (record.reused_search_id is not None and record.reused_candidate_id is not None)
        else None
    )
    return CandidatePage(
        search=summary_of(search, best),
        row=_row(record, parent, best.record.id if best else None, describe),
        parent_id=record.parent_id,
        fingerprint=record.fingerprint,
        error=record.error,
        max_error=fmt.num(record.max_error),
        build_seconds=f"{record.build_seconds:.2f} s",
        run_seconds=f"{record.run_seconds:.2f} s",
        reused_from=reused,
        where=where_of(record, search),
        steps=step_lines(lineage, describe),
        diff=proc_diff(parent, record),
        proc_text=record.proc_text,
        c_source=record.c_source,
    )


@dataclass(frozen=True, slots=True)
class ComparePage:
    a: SearchSummary
    b: SearchSummary
    plot: Plot
    ratio: str  # how many times faster b's best is than a's
    a_steps: tuple[StepLine, ...]
    b_steps: tuple[StepLine, ...]


def compare_page(store: Store, a_id: int, b_id: int, describe: Describe) -> ComparePage:
    """Two searches side by side: their bests, progress curves on one plot, best schedules.
    The data is explore's ``SearchComparison``, what a notebook compares two searches with."""
    comparison = SearchComparison.load(store, a_id, b_id, describe, code=False)
    a, b = comparison.a, comparison.b
    ratio = comparison.b_speedup_over_a
    return ComparePage(
        a=summary_of(a.search, a.declared_best),
        b=summary_of(b.search, b.declared_best),
        plot=progress_plot([_curve(a), _curve(b)]),
        ratio=fmt.num(ratio, "x") if ratio is not None else "-",
        a_steps=step_lines(a.best_path(), describe),
        b_steps=step_lines(b.best_path(), describe),
    )
