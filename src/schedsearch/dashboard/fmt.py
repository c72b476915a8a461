"""How the dashboard writes numbers and times: plain strings, escaped later by the templates."""

from __future__ import annotations

import time


def seconds(s: float | None) -> str:
    """A duration with a unit that fits (``1.23 ms``); ``-`` when unknown."""
    if s is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def spread(value: float | None) -> str:
    """``±1.5%``: half the interquartile range relative to the median; "" when unknown."""
    return "" if value is None else f"±{50 * value:.1f}%"


def timed(s: float | None, value: float | None) -> str:
    """``1.23 ms ±1.5%`` (the spread left out when unknown)."""
    text = spread(value)
    return f"{seconds(s)} {text}" if text and s is not None else seconds(s)


def num(x: float | None, suffix: str = "", digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits and a suffix; ``-`` when unknown."""
    return "-" if x is None else f"{x:.{digits}g}{suffix}"


def elapsed(s: float | None) -> str:
    """Wall time as ``42 s``, ``3 min 5 s`` or ``2 h 4 min``."""
    if s is None:
        return "-"
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"


def moment(unix: float | None) -> str:
    """A unix time in this machine's local time, to the second."""
    if unix is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix))
