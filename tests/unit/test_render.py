"""The live progress panel on a terminal."""

from __future__ import annotations

import dataclasses
import io
import threading

from rich.console import Console

from schedsearch.cli.render import ProgressView
from schedsearch.core import Counters, EventKind, SearchEvent, TimeSpent


def test_the_terminal_panel_redraws_on_events_without_a_thread_of_its_own():
    # With --workers 0 Exo's z3 checks run in the driver; no second Python thread may run
    # alongside them (a refresh thread could drop z3 objects while z3 is busy).
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    before = threading.active_count()
    with ProgressView(console, 60.0, "sgemm[M=8]") as view:
        assert view.live is not None
        assert threading.active_count() == before
        view(SearchEvent(EventKind.STARTED, 7, 0.5, Counters()))
        first = out.getvalue()
        assert "search 7" in first and "0.5s / 60s" in first
        view(SearchEvent(EventKind.EXPANDED, 7, 3.25, Counters(generated=12)))
        assert "3.2s / 60s" in out.getvalue()[len(first):] and "generated 12" in out.getvalue()


def test_the_cost_model_line_names_the_settled_accuracy_only_when_there_is_one():
    from types import SimpleNamespace

    from schedsearch.cli.render import cost_model_text
    from schedsearch.core import CostModelMode, ModelAccuracy

    def text(accuracy):
        return cost_model_text(SimpleNamespace(config=SimpleNamespace(cost_model=CostModelMode.RANK),
                                               model_accuracy=accuracy))

    early = ModelAccuracy(spearman=0.5, pairs=50, window=50, trained_on=60, span=1.3, settled_after=200)
    assert "rank correlation 0.50 over the last 50" in text(early) and "Since" not in text(early)
    late = ModelAccuracy(spearman=0.5, pairs=50, window=50, trained_on=600, span=1.3, settled_after=200,
                         settled_spearman=0.81, settled_pairs=412, settled_span=5.2)
    assert ("Since the search's 200th measurement: rank correlation 0.81 over 412 predicted-then-measured "
            "candidates (times spanning 5.20x)") in text(late)
    assert "rank themselves" not in text(late)
    noisy = dataclasses.replace(late, settled_repeat=0.47)
    assert "measured again, those times would rank themselves at about 0.47 at best" in text(noisy)


def drawn(counters: Counters, early_stop: int | None = None, width: int = 160) -> str:
    """The panel drawn for one ``evaluated`` event carrying ``counters``."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=width)
    with ProgressView(console, 60.0, "sgemm[M=8]", early_stop=early_stop) as view:
        view(SearchEvent(EventKind.EVALUATED, 7, 4.0, counters))
    return out.getvalue()


def test_the_panel_counts_toward_early_stop_only_when_it_is_set():
    counters = Counters(evaluated=9, ok=9, since_best=3)
    assert "no new best in 3 of 10" in drawn(counters, early_stop=10, width=120)
    assert "no new best" not in drawn(counters, width=120)


def test_the_panel_says_how_many_were_timed_beside_builds_once_any_were():
    assert "timed beside builds 6" in drawn(Counters(evaluated=9, ok=9, timed_beside=6))
    assert "timed beside" not in drawn(Counters(evaluated=9, ok=9))


def test_the_panel_says_where_the_time_went_once_any_was_counted():
    text = drawn(Counters(evaluated=9, ok=9, spent=TimeSpent(expanding=12.25, building=3.5, measuring=1.0, idle=2.75)))
    assert "workers expanding 12.2 s and building 3.5 s" in text
    assert "verifying and timing 1.0 s; nothing being measured for 2.8 s" in text
    assert "workers expanding" not in drawn(Counters(evaluated=9, ok=9))
