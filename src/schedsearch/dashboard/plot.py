"""Progress plots as geometry for an SVG template: best-so-far against elapsed time.

Nothing here writes markup: it computes coordinates, paths and tick labels (numbers and
units only), and ``templates/plot.svg`` draws them with every string escaped. The time axis
is logarithmic, because a search's candidates span orders of magnitude (the unscheduled
proc can be a hundred times slower than the best).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from schedsearch.core import CandidateRecord, ProgressPoint, Status
from schedsearch.dashboard import fmt

WIDTH, HEIGHT = 760, 320
LEFT, RIGHT, TOP, BOTTOM = 70, 16, 14, 44  # margins around the plotting area
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


@dataclass(frozen=True, slots=True)
class Curve:
    """One search's data for a plot: best-so-far steps, measured candidates and the
    unscheduled proc's time. ``end`` is the search's elapsed time (the line runs to it)."""

    name: str
    steps: tuple[ProgressPoint, ...]
    measured: tuple[tuple[float, float, int], ...]  # (elapsed, seconds, candidate id) of ok candidates
    failed: tuple[tuple[float, int], ...]  # (elapsed, candidate id) of the others measured
    baseline: float | None
    end: float


@dataclass(frozen=True, slots=True)
class Dot:
    """A candidate at (``x``, ``y``) in SVG units, with its hover text."""

    x: float
    y: float
    candidate_id: int
    title: str


@dataclass(frozen=True, slots=True)
class Tick:
    pos: float
    label: str


@dataclass(frozen=True, slots=True)
class Series:
    """One curve drawn: ``path`` is an SVG path of the best-so-far step line, ``color`` the
    search's (presentation attributes, which a Content-Security-Policy leaves alone)."""

    name: str
    color: str
    path: str
    dots: tuple[Dot, ...]
    failed: tuple[Dot, ...]
    baseline_y: float | None
    best: str


@dataclass(frozen=True, slots=True)
class Plot:
    """Everything ``plot.svg`` draws; ``empty`` when nothing was measured ok yet."""

    width: int
    height: int
    left: int
    top: int
    right: int
    bottom: int
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    series: tuple[Series, ...]
    empty: bool


def curve_of(
    name: str,
    records: Sequence[CandidateRecord],
    progress: Sequence[ProgressPoint],
    started_at: float,
    elapsed: float,
    baseline: float | None,
) -> Curve:
    """A search's curve from its candidates (any order) and its best-so-far points."""
    measured: list[tuple[float, float, int]] = []
    failed: list[tuple[float, int]] = []
    for r in records:
        at = (
            r.measured_at
            if r.measured_at is not None
            else (r.measured_unix - started_at if r.measured_unix is not None else None)
        )
        if at is None or r.status is Status.PENDING:
            continue
        if r.status is Status.OK and r.seconds is not None and r.seconds > 0:
            measured.append((max(at, 0.0), r.seconds, r.id))
        else:
            failed.append((max(at, 0.0), r.id))
    end = max([elapsed, *(p.elapsed for p in progress), *(m[0] for m in measured), *(f[0] for f in failed)])
    return Curve(name, tuple(p for p in progress if p.seconds > 0), tuple(measured), tuple(failed), baseline, end)


def progress_plot(curves: Sequence[Curve], *, width: int = WIDTH, height: int = HEIGHT) -> Plot:
    """The plot of ``curves`` on shared axes: seconds (log) against elapsed seconds."""
    times = [m[1] for c in curves for m in c.measured] + [p.seconds for c in curves for p in c.steps]
    times += [c.baseline for c in curves if c.baseline is not None and c.baseline > 0]
    right, bottom = width - RIGHT, height - BOTTOM
    if not times:
        return Plot(width, height, LEFT, TOP, right, bottom, (), (), (), True)
    lo, hi = math.log10(min(times)), math.log10(max(times))
    pad = max((hi - lo) * 0.06, 0.02)  # a flat curve still gets a band, not a division by zero
    lo, hi = lo - pad, hi + pad
    x_max = max(max(c.end for c in curves), 1e-9)

    def x(t: float) -> float:
        return round(LEFT + (right - LEFT) * min(t, x_max) / x_max, 1)

    def y(s: float) -> float:
        return round(bottom - (bottom - TOP) * (math.log10(s) - lo) / (hi - lo), 1)

    series = []
    for i, c in enumerate(curves):
        path = ""
        if c.steps:
            first = c.steps[0]
            parts = [f"M{x(first.elapsed)} {y(first.seconds)}"]
            for p in c.steps[1:]:
                parts.append(f"H{x(p.elapsed)} V{y(p.seconds)}")
            parts.append(f"H{x(c.end)}")
            path = " ".join(parts)
        dots = tuple(Dot(x(t), y(s), cid, f"#{cid}: {fmt.seconds(s)} at {t:.1f} s") for t, s, cid in c.measured)
        fails = tuple(Dot(x(t), float(bottom - 4), cid, f"#{cid}: failed at {t:.1f} s") for t, cid in c.failed)
        best = fmt.seconds(c.steps[-1].seconds) if c.steps else "-"
        series.append(
            Series(
                c.name,
                PALETTE[i % len(PALETTE)],
                path,
                dots,
                fails,
                y(c.baseline) if c.baseline is not None and c.baseline > 0 else None,
                best,
            )
        )
    x_ticks = tuple(Tick(x(v), _elapsed_label(v)) for v in _nice_ticks(x_max))
    y_ticks = tuple(Tick(y(10**v), fmt.seconds(10**v)) for v in _log_ticks(lo, hi))
    return Plot(width, height, LEFT, TOP, right, bottom, x_ticks, y_ticks, tuple(series), False)


def _nice_ticks(top: float, count: int = 6) -> list[float]:
    """Round values from 0 to ``top`` (steps of 1, 2 or 5 times a power of ten)."""
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    unit = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * unit for i in range(int(top / unit) + 1)]


def _log_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Exponents for the time axis: whole decades when the range spans a few, else evenly
    spaced values (labelled to three digits)."""
    decades = list(range(math.ceil(lo), math.floor(hi) + 1))
    if len(decades) >= 3:
        return [float(d) for d in decades]
    return [lo + (hi - lo) * (i + 0.5) / count for i in range(count)]


def _elapsed_label(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    if seconds >= 60:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"
