"""Exo's effect analysis composes each ``let``'s windows once, not once per buffer.

To ask whether a location set is empty (the heart of Exo 1.0.0's ``Commutes``, so of every
reorder, sink, pack and bounds check), ``new_eff.is_empty`` takes one symbolic point per
buffer the set mentions and asks ``is_elem(point, set)`` for each: a walk of the whole set.
At each ``let`` the walk meets (``LS.LetEnv``, one per statement before the checked one) it
composes the windows that ``let`` binds with those already in scope
(``AEnv.translate_win(win_map)``): a copy of the map and a new formula node per window
coordinate. The walk for the second buffer composes exactly what the walk for the first
did, and ``Commutes`` asks about four sets of the same statements. On a register-tiled
SGEMM node those compositions were three quarters of ``is_elem``'s time and a fifth of a
loop reorder's.

``translating_once`` answers ``translate_win`` from the latest answers for the same
environment and the same incoming map, by identity. Both are only read once made: an
``AEnv`` is built whole by its constructor or its ``+`` and never changed after, and the
maps ``translate_win`` returns are only looked up (by ``is_elem`` and ``get_point_exprs``),
so the same objects give the same answer, and the answer can be shared. The walks start
from an empty map each time (a new ``dict``), so an empty map is recognized as empty, not
by identity. The formulas built are the same ones Exo builds, with some subtrees shared
instead of equal copies; the SMT queries and every answer stay the same.
"""

from __future__ import annotations

from collections.abc import Callable

#: How many (environment, map) answers are kept: a check walks the ``let`` chain of one
#: statement's context, a few hundred at most; older ones are dropped all at once.
KEPT = 4096


def translating_once(translate_win: Callable, kept: int = KEPT) -> Callable:
    """``AEnv.translate_win`` answering from the latest ``kept`` answers for the same
    environment and incoming window map (each by identity; an empty map as empty)."""
    answers: dict[tuple[int, int | None], tuple[object, object, dict]] = {}

    def translate_win_once(env, winmap):
        key = (id(env), id(winmap) if winmap else None)
        hit = answers.get(key)
        # the objects are held with the answer, so their ids cannot be reused meanwhile
        if hit is not None and hit[0] is env and (hit[1] is winmap or not winmap):
            return hit[2]
        answer = translate_win(env, winmap)
        if len(answers) >= kept:
            answers.clear()
        answers[key] = (env, winmap, answer)
        return answer

    translate_win_once.__wrapped__ = translate_win  # type: ignore[attr-defined]
    return translate_win_once


def expected(new_eff) -> bool:
    """Whether ``new_eff`` has the ``AEnv.translate_win`` and ``is_elem`` this was written for."""
    env = getattr(new_eff, "AEnv", None)
    return (
        isinstance(env, type)
        and callable(getattr(env, "translate_win", None))
        and callable(getattr(new_eff, "is_elem", None))
        and callable(getattr(new_eff, "is_empty", None))
    )
