"""One set of numbers: the declared best and its kind, how a search ended, steps within noise,
and the words of ``run``'s summary."""

from __future__ import annotations

import dataclasses

import pytest

from schedsearch.cli.commands_run import report_lines
from schedsearch.cli.numbers_view import best_note, status_text, step_lines
from schedsearch.core import (
    ArgRole,
    ArgSpec,
    CandidateRecord,
    Counters,
    DType,
    MachineInfo,
    Rewrite,
    RewriteKind,
    Schedule,
    SearchConfig,
    SearchRecord,
    SearchStatus,
    Status,
    TimeSpent,
    Timing,
    Workload,
)
from schedsearch.numbers import (
    Ending,
    NumberKind,
    best_among,
    declared_best,
    ending,
    step,
    steps_of,
    within_noise,
)

BASE = 1e-3
STEPS = (Rewrite.make(RewriteKind.REORDER, "j #0"), Rewrite.make(RewriteKind.SPLIT, "i #0", factor=4))


def _timing(median: float, half: float = 0.01) -> Timing:
    """A median with its interquartile range ``half`` of it either side."""
    return Timing(median, median * 0.9, median * (1 - half), median * (1 + half))


def _record(id: int, parent: int | None, seconds: float, half: float = 0.01) -> CandidateRecord:
    depth = 0 if parent is None else id - 1
    return CandidateRecord(id=id, search_id=1, parent_id=parent, depth=depth, schedule=Schedule(STEPS[:depth]),
                           fingerprint=f"fp{id}", status=Status.OK, timing=_timing(seconds, half),
                           speedup=BASE / seconds, gflops=1.0 / seconds / 1e9)


#: the root (1 ms) -> #2 (500 us, a clear gain) -> #3 (490 us ±5%: within noise of #2)
PATH = [_record(1, None, BASE), _record(2, 1, 5e-4), _record(3, 2, 4.9e-4, half=0.05)]


def _search(**fields) -> SearchRecord:
    workload = Workload("/w.py", "", "", "k", (), (ArgSpec("x", ArgRole.TENSOR, DType.F32, (4,), True),), flops=1)
    base = SearchRecord(id=1, workload=workload, config=SearchConfig(max_seconds=60.0), status=SearchStatus.COMPLETED,
                        machine=MachineInfo(), started_at=0.0, counters=Counters(evaluated=3, ok=3),
                        baseline_seconds=BASE, elapsed_seconds=61.0)
    return dataclasses.replace(base, **fields)


# ----------------------------------------------------------------------------- noise


def test_overlapping_ranges_are_noise_and_separate_ones_are_not():
    assert within_noise(_timing(1.00, 0.02), _timing(0.97, 0.02)) is True  # 3% apart, ±2% each
    assert within_noise(_timing(1.00, 0.01), _timing(0.97, 0.01)) is False  # 3% apart, ±1% each
    assert within_noise(_timing(1.00, 0.0), _timing(1.00, 0.0)) is True  # the same time
    assert within_noise(_timing(0.97, 0.02), _timing(1.00, 0.02)) is True  # a loss within noise too
    assert within_noise(None, _timing(1.0)) is None


def test_a_step_knows_its_gain_and_whether_it_is_noise():
    first, second = steps_of(PATH)
    assert first.gain == pytest.approx(2.0) and first.within_noise is False
    assert second.gain == pytest.approx(5e-4 / 4.9e-4) and second.within_noise is True
    assert step(PATH[0], None).gain is None  # the root has no parent
    failed = dataclasses.replace(PATH[1], status=Status.WRONG_RESULT, timing=None)
    assert step(failed, PATH[0]).within_noise is None


def test_step_lines_flag_the_step_within_noise():
    lines = step_lines(PATH)
    assert len(lines) == 2
    assert "500 us ±1.0%" in lines[0] and "step 2x" in lines[0] and "within noise" not in lines[0]
    assert "490 us ±5.0%" in lines[1] and "~ within noise" in lines[1] and lines[1].rstrip().endswith("i #0 factor=4")


# ----------------------------------------------------------------------------- the declared best


def test_a_running_search_reports_its_fastest_search_time_median():
    best = best_among(_search(status=SearchStatus.RUNNING), PATH)
    assert best.record.id == 3 and best.kind is NumberKind.SEARCH_TIME
    assert (best.seconds, best.speedup, best.spread) == (4.9e-4, BASE / 4.9e-4, pytest.approx(0.1))


def test_stored_numbers_that_differ_from_the_candidates_own_were_re_measured():
    # the re-measurement picked #2 over #3, at 520 us and 1.9x: every view reports that
    search = _search(best_candidate_id=2, best_seconds=5.2e-4, best_speedup=1.9)
    best = declared_best(search, PATH[1], PATH[2])
    assert best.record.id == 2 and best.kind is NumberKind.REMEASURED
    assert (best.seconds, best.speedup, best.spread) == (5.2e-4, 1.9, None)
    assert best.gflops == pytest.approx(1 / 5.2e-4 / 1e9)
    assert best.search_time_seconds == 5e-4
    assert best_among(search, PATH) == best


def test_a_fallback_to_the_search_time_numbers_is_not_called_re_measured():
    # the re-measurement failed: the loop stores the winner's own numbers
    search = _search(best_candidate_id=3, best_seconds=PATH[2].seconds, best_speedup=PATH[2].speedup)
    assert best_among(search, PATH).kind is NumberKind.SEARCH_TIME


def test_nothing_measured_ok_is_no_best():
    pending = dataclasses.replace(PATH[0], status=Status.PENDING, timing=None, speedup=None)
    assert best_among(_search(), [pending]) is None


# ----------------------------------------------------------------------------- how it ended


@pytest.mark.parametrize(("fields", "expected"), [
    ({}, Ending.BUDGET),
    ({"elapsed_seconds": 12.0}, Ending.EXHAUSTED),
    ({"config": SearchConfig(max_seconds=60.0, max_candidates=3), "elapsed_seconds": 12.0}, Ending.CANDIDATE_LIMIT),
    ({"status": SearchStatus.INTERRUPTED}, Ending.INTERRUPTED),
    ({"status": SearchStatus.FAILED, "failure": "disk full"}, Ending.FAILED),
    ({"status": SearchStatus.RUNNING}, Ending.RUNNING),
    # The budget counts the search's clock, not the seconds the run took to start before it.
    ({"elapsed_seconds": 40.0, "counters": Counters(spent=TimeSpent(starting=30.0))}, Ending.EXHAUSTED),
    ({"elapsed_seconds": 40.0}, Ending.EXHAUSTED),
])
def test_how_a_search_ended(fields, expected):
    assert ending(_search(**fields)) is expected


@pytest.mark.parametrize(("fields", "expected"), [
    ({}, "completed: budget reached"),
    ({"status": SearchStatus.INTERRUPTED}, "interrupted"),
    ({"status": SearchStatus.INTERRUPTED, "failure": "stopped by the progress observer, which raised "
                                                     "ValueError: plot broke"},
     "interrupted: stopped by the progress observer, which raised ValueError: plot broke"),
    ({"status": SearchStatus.FAILED, "failure": "disk full"}, "failed: disk full"),
])
def test_the_status_line_says_why_a_search_stopped_when_it_was_not_asked_to(fields, expected):
    assert status_text(_search(**fields)) == expected


# ----------------------------------------------------------------------------- run's summary


def _summary(search: SearchRecord, path: list[CandidateRecord]) -> str:
    best = best_among(search, path)
    lineage = path[: [r.id for r in path].index(best.record.id) + 1] if best else []
    return "\n".join(report_lines(search, best, lineage, None))


def test_summary_of_a_completed_search_with_re_measured_finalists():
    text = _summary(_search(best_candidate_id=2, best_seconds=5.2e-4, best_speedup=1.9), PATH)
    assert "completed: budget reached" in text
    assert "best[/bold green]: candidate 2, 520 us" in text and "1.9x faster" in text
    assert "finalists re-measured side by side" in text
    assert "its search-time median 500 us ±1.0%, 2x" in text


def test_summary_of_an_interrupted_search_does_not_claim_a_re_measurement():
    text = _summary(_search(status=SearchStatus.INTERRUPTED, best_candidate_id=3, best_seconds=4.9e-4,
                            best_speedup=BASE / 4.9e-4), PATH)
    assert text.lstrip().startswith("[bold]interrupted[/bold]")
    assert "best so far[/bold green]: candidate 3, 490 us ±5.0%" in text
    assert "finalists re-measured" not in text and "the finalists were not re-measured side by side" in text
    assert "~ within noise" in text  # the schedule's last step
    assert "schedsearch resume 1" in text


def test_summary_when_nothing_beat_the_unscheduled_proc():
    slower = [PATH[0], _record(2, 1, 2e-3)]
    text = _summary(_search(best_candidate_id=1, best_seconds=1.05e-3, best_speedup=1.0,
                            elapsed_seconds=5.0), slower)
    assert "completed: nothing left to expand" in text
    assert "nothing faster than the unscheduled proc found: it takes 1.05 ms" in text
    assert "finalists re-measured side by side" in text
    assert "schedule:" not in text and "schedule (" not in text


def test_the_note_under_a_table_names_the_best_and_its_numbers():
    search = _search(best_candidate_id=2, best_seconds=5.2e-4, best_speedup=1.9)
    assert best_note(best_among(search, PATH)).startswith("* the best: candidate 2, 520 us, 1.9x when the finalists")
    assert "not re-measured" in best_note(best_among(_search(), PATH))


def test_tables_in_a_log_keep_their_numbers_whole():
    # rich squeezes a table into 80 columns when stderr is not a terminal, cutting numbers
    # to "1.0…"; in a log the table is printed at its own width instead
    import io

    from rich.console import Console

    from schedsearch.cli.numbers_view import print_whole, ranked_table

    long = dataclasses.replace(PATH[2], schedule=Schedule((STEPS[0], Rewrite.make(
        RewriteKind.SPLIT, "a_very_long_loop_name_indeed #0", factor=16, tail="cut_and_guard"))))
    out = io.StringIO()
    log = Console(file=out, width=80, force_terminal=False, color_system=None)
    print_whole(log, ranked_table([long, *PATH[:2]], best_among(_search(), PATH), title="top"))
    text = out.getvalue()
    assert "490 us ±5.0%" in text and "a_very_long_loop_name_indeed #0 factor=16" in text and "…" not in text
    assert log.width == 80  # the console is left as it was


def test_trees_in_a_pipe_keep_their_lines_whole():
    # a rich Tree crops each label at the console's width (80 in a pipe): `tree > file` would lose the steps
    import io

    from rich.console import Console
    from rich.tree import Tree

    from schedsearch.cli.numbers_view import print_whole

    tree = Tree("", hide_root=True)
    tree.add("#1 ok").add("#2 ok " + "split a_very_long_loop_name_indeed #0 factor=16 " * 3 + "END")
    out = io.StringIO()
    print_whole(Console(file=out, width=80, force_terminal=False, color_system=None), tree)
    assert out.getvalue().splitlines()[1].endswith("END") and "\x1b" not in out.getvalue()


def test_summary_says_where_the_time_went_once_it_was_counted():
    spent = TimeSpent(expanding=80.25, building=30.0, measuring=20.5, idle=9.0)
    text = _summary(_search(best_candidate_id=2, best_seconds=5.2e-4, best_speedup=1.9,
                            counters=Counters(evaluated=3, ok=3, spent=spent)), PATH)
    assert ("time spent: workers expanding 80.2 s and building 30.0 s; verifying and timing 20.5 s; "
            "nothing being measured for 9.0 s of 61.0 s") in text
    # The seconds before the search's clock started are said with its elapsed time.
    started = _search(best_candidate_id=2, best_seconds=5.2e-4, best_speedup=1.9,
                      counters=Counters(evaluated=3, ok=3, spent=dataclasses.replace(spent, starting=4.25)))
    assert "in 61.0 s (after 4.2 s starting: the workload, the workers):" in _summary(started, PATH)
    assert "starting" not in text
    # A search stored before time was counted says nothing of it.
    assert "time spent" not in _summary(_search(best_candidate_id=2, best_seconds=5.2e-4, best_speedup=1.9), PATH)
