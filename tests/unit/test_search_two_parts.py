"""``search.parts``: a large parent's costly rewrites come in its second part, and
``rounds.leaders_in``: when a streamed round plans the next one."""

from __future__ import annotations

from schedsearch.core import CandidateRecord, Expansion, ExpansionPart, SearchConfig, Status
from schedsearch.search import make_strategy
from schedsearch.search.parts import TwoParts
from schedsearch.search.rounds import LEADING_SHARE, Round, Tally, leaders_in
from schedsearch.testing.builders import make_schedule, make_timing


def _record(rid: int, parent_id: int | None = None) -> CandidateRecord:
    return CandidateRecord(id=rid, search_id=1, parent_id=parent_id, depth=1, schedule=make_schedule(f"n{rid}", 1),
                           fingerprint=f"fp{rid}", status=Status.OK, timing=make_timing(1e-3 * rid))


def _parts(enabled: bool = True) -> tuple[TwoParts, object]:
    strategy = make_strategy(SearchConfig(max_seconds=None))
    return TwoParts(enabled, strategy), strategy


def _announced(parts: TwoParts, parent: CandidateRecord, part: ExpansionPart, deferred: int) -> bool:
    rnd = Round(1, [parent], part={parent.fingerprint: part}, tally={parent.fingerprint: Tally(deferred=deferred)})
    return parts.announced(rnd, parent)


def test_off_every_parent_is_expanded_whole_once() -> None:
    parts, _ = _parts(enabled=False)
    parent = _record(2)
    assert parts.part_for(parent) is ExpansionPart.ALL and parts.part_for(parent) is ExpansionPart.ALL
    assert not parts.second(parent) and not parts.done(parent)
    assert _announced(parts, parent, ExpansionPart.ALL, deferred=0)


def test_a_parent_is_expanded_first_for_its_cheap_rewrites_then_once_for_its_costly_ones() -> None:
    parts, strategy = _parts()
    parent = _record(2)
    assert parts.part_for(parent) is ExpansionPart.FIRST and parts.second(parent)
    assert not _announced(parts, parent, ExpansionPart.FIRST, deferred=3)  # costly rewrites wait
    assert [r.id for r in strategy.ask(5)] == [2]  # back in the frontier
    assert parts.part_for(parent) is ExpansionPart.DEFERRED
    assert parts.done(parent)
    assert _announced(parts, parent, ExpansionPart.DEFERRED, deferred=0)


def test_a_first_part_that_left_nothing_costly_is_the_last() -> None:
    parts, strategy = _parts()
    parent = _record(2)
    parts.part_for(parent)
    assert _announced(parts, parent, ExpansionPart.FIRST, deferred=0)
    assert strategy.ask(5) == [] and not parts.done(parent)


def _shards(n: int, of: int, leads: int = 0, leading: int = 0) -> list[Expansion]:
    return [Expansion(parent="fp2", children=(), shards=of, leads=leads, leading=i < leading) for i in range(n)]


def test_without_a_leading_model_the_next_round_is_planned_once_a_shard_per_worker_is_in() -> None:
    assert not leaders_in(_shards(1, of=4), 1, workers=2, model_leads=False)
    assert leaders_in(_shards(2, of=4), 1, workers=2, model_leads=False)


def test_a_leading_model_plans_once_every_leading_shard_is_in() -> None:
    assert not leaders_in(_shards(1, of=8, leads=2, leading=1), 0, workers=2, model_leads=True)
    assert leaders_in(_shards(2, of=8, leads=2, leading=2), 0, workers=2, model_leads=True)


def test_with_no_leading_shard_a_deeper_parent_plans_at_a_share_and_the_root_at_the_end() -> None:
    half = int(8 * LEADING_SHARE)
    assert not leaders_in(_shards(half - 1, of=8), 1, workers=2, model_leads=True)
    assert leaders_in(_shards(half, of=8), 1, workers=2, model_leads=True)
    assert not leaders_in(_shards(7, of=8), 0, workers=2, model_leads=True)
