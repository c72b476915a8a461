"""``store.convert.ScheduleReader``: a tree's schedules decoded from their parents' give
exactly what ``Schedule.loads`` gives, whatever the step texts hold."""

from __future__ import annotations

import pytest

from schedsearch.core import Rewrite, RewriteKind, Schedule
from schedsearch.store.convert import ScheduleReader

# Targets that look like the text around a step boundary, quoted inside a step.
TRICKY = ['i #0', ',{"kind":"split"}]}', ']}', '",{"', 'j\\",{\\"', "é ✓ <b>"]


def _chain() -> list[Schedule]:
    schedules = [Schedule()]
    for i, target in enumerate(TRICKY * 2):
        step = Rewrite.make(RewriteKind.SPLIT if i % 2 else RewriteKind.UNROLL, target, factor=i + 2,
                            perfect=bool(i % 2), inner=f"{target}i")
        schedules.append(schedules[-1].then(step))
    return schedules


def test_same_schedules_as_loads_in_any_order() -> None:
    texts = [s.dumps() for s in _chain()]
    for order in (texts, texts[::-1], texts[::2] + texts[1::2]):
        reader = ScheduleReader()
        assert [reader(t) for t in order] == [Schedule.loads(t) for t in order]


def test_siblings_and_multi_step_children() -> None:
    chain = _chain()
    extra = chain[3].then(Rewrite.make(RewriteKind.REORDER, "k #0")).then(Rewrite.make(RewriteKind.SIMPLIFY, ""))
    reader = ScheduleReader()
    for s in (*chain[:4], extra, chain[4]):
        assert reader(s.dumps()) == s


def test_what_loads_refuses_is_refused() -> None:
    reader = ScheduleReader()
    reader(_chain()[1].dumps())
    good = _chain()[2].dumps()
    for bad in (good.replace('"split"', '"no_such_kind"'), '{"steps":[{"kind":"split"}]}', "not json"):
        with pytest.raises((ValueError, KeyError, TypeError)):
            Schedule.loads(bad)
        with pytest.raises((ValueError, KeyError, TypeError)):
            reader(bad)
