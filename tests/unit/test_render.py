"""The live progress panel on a terminal."""

from __future__ import annotations

import io
import threading

from rich.console import Console

from schedsearch.cli.render import ProgressView
from schedsearch.core import Counters, EventKind, SearchEvent


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
