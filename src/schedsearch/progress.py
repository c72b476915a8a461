"""Progress of a search started from Python: a bar in Jupyter, lines in a terminal.

``schedsearch.tune()`` sends every ``SearchEvent`` here. In a notebook the bar is an HTML
``<progress>`` element updated in place through IPython's display machinery, which needs
neither ipywidgets nor any extra package; elsewhere (when asked for) plain lines go to
stderr. Nothing here knows how the search runs.
"""

from __future__ import annotations

import html
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from schedsearch.core import EventKind, SearchEvent, TimeSpent

#: Events always shown at once (the others are throttled).
KEY_EVENTS = frozenset(
    {EventKind.STARTED, EventKind.BASELINE, EventKind.NEW_BEST, EventKind.FINALISTS, EventKind.FINISHED}
)


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (JupyterLab, Notebook, VS Code) that can
    show HTML output."""
    shell_module = sys.modules.get("IPython")
    if shell_module is None:
        return False
    shell = shell_module.get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def progress_renderer(
    show: bool | None, budget: float | None, max_candidates: int | None, label: str
) -> ProgressRenderer | None:
    """The renderer to use: ``show`` True always shows progress, False never, None only in
    a notebook. The bar measures seconds against ``budget``, or candidates against
    ``max_candidates`` when that is the tighter known limit."""
    if show is False or (show is None and not in_notebook()):
        return None
    if in_notebook():
        return NotebookProgress(label, budget, max_candidates)
    return TextProgress(label, sys.stderr)


def fmt_seconds(seconds: float) -> str:
    """A time with the unit that fits: ``1.23 ms``, ``45.6 us``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _best_text(event: SearchEvent) -> str:
    best = event.best
    if best is None or best.seconds is None:
        return "best -"
    parts = [f"best {fmt_seconds(best.seconds)}"]
    if best.gflops is not None:
        parts.append(f"{best.gflops:.3g} GFLOP/s")
    if best.speedup is not None:
        parts.append(f"{best.speedup:.3g}x")
    return " ".join(parts)


def spent_text(spent: TimeSpent) -> str:
    """Where a search's time went (``TimeSpent``), in words; "" before anything is counted."""
    t = spent
    if not (t.expanding or t.building or t.measuring or t.idle):
        return ""
    return (
        f"workers expanding {t.expanding:.1f} s and building {t.building:.1f} s; "
        f"verifying and timing {t.measuring:.1f} s; nothing being measured for {t.idle:.1f} s"
    )


def _counts_text(event: SearchEvent) -> str:
    c = event.counters
    return f"evaluated {c.evaluated} (ok {c.ok}, failed {c.failed}), generated {c.generated}"


class ProgressRenderer:
    """Receives SearchEvents; ``close`` draws the final state."""

    def __call__(self, event: SearchEvent) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Draw the last state received."""


class TextProgress(ProgressRenderer):
    """One line per key event, and a line at most every ``heartbeat`` seconds otherwise."""

    def __init__(
        self, label: str, stream: TextIO, heartbeat: float = 15.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.label, self.stream, self.heartbeat, self.clock = label, stream, heartbeat, clock
        self._last = float("-inf")

    def __call__(self, event: SearchEvent) -> None:
        now = self.clock()
        if event.kind in KEY_EVENTS or now - self._last >= self.heartbeat:
            self._last = now
            message = f" {event.message}" if event.message else ""
            print(
                f"[{event.elapsed:6.1f}s] {self.label} {event.kind.value}: {_counts_text(event)}; "
                f"{_best_text(event)}{message}",
                file=self.stream,
                flush=True,
            )


class NotebookProgress(ProgressRenderer):
    """An HTML progress bar updated in place (at most ``interval`` seconds apart, key
    events at once)."""

    def __init__(
        self,
        label: str,
        budget: float | None,
        max_candidates: int | None,
        interval: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
        handle: Any = None,
    ) -> None:
        self.label, self.budget, self.max_candidates = label, budget, max_candidates
        self.interval, self.clock = interval, clock
        self._handle = handle  # an IPython display handle, made on the first draw
        self._shown = float("-inf")
        self._event: SearchEvent | None = None

    def __call__(self, event: SearchEvent) -> None:
        self._event = event
        now = self.clock()
        if event.kind in KEY_EVENTS or now - self._shown >= self.interval:
            self._shown = now
            self._draw(event)

    def close(self) -> None:
        if self._event is not None:
            self._draw(self._event)

    def fraction(self, event: SearchEvent) -> float:
        """How much of the budget is spent: 1.0 once finished."""
        if event.kind is EventKind.FINISHED:
            return 1.0
        parts = []
        if self.budget:
            parts.append(event.budget_used / self.budget)
        if self.max_candidates:
            parts.append(event.counters.evaluated / self.max_candidates)
        return min(1.0, max(parts, default=0.0))

    def html(self, event: SearchEvent) -> str:
        """The bar and its caption as HTML."""
        done = self.fraction(event)
        state = event.kind.value.replace("_", " ")
        caption = (
            f"<b>{html.escape(self.label)}</b> search {event.search_id} &middot; {event.elapsed:.1f} s "
            f"&middot; {html.escape(state)} &middot; {html.escape(_counts_text(event))} &middot; "
            f"{html.escape(_best_text(event))}"
        )
        spent = spent_text(event.counters.spent)
        if spent:
            caption += f"<br><small>{html.escape(spent)}</small>"
        return (
            f'<div><progress value="{done:.3f}" max="1" style="width: 24em"></progress> '
            f"{100 * done:.0f}%<br><span>{caption}</span></div>"
        )

    def _draw(self, event: SearchEvent) -> None:
        from IPython.display import HTML, display

        if self._handle is None:
            self._handle = display(HTML(self.html(event)), display_id=True)
        else:
            self._handle.update(HTML(self.html(event)))
