"""The gate of a ranked round (``search.rounds``): which queued children are measured while
the round's expansions come in or the next round is expanded - counted from the best
prediction still queued, with exploration draws let through once the round is in."""

from __future__ import annotations

import dataclasses
import random

from schedsearch.search.ranking import measuring_order
from schedsearch.search.rounds import STREAM_GATE, Round, gate_bar, likely, next_child
from schedsearch.testing.fake_tree import fake_root


def _round(keys: dict[str, float], queued: list[str], *, explored: frozenset[str] = frozenset(),
           anchor: float | None = None, expanding: bool = False) -> Round:
    rnd = Round(1, [])
    rnd.keys = dict(keys)
    rnd.queue.extend(dataclasses.replace(fake_root(), fingerprint=fp) for fp in queued)
    rnd.explored = explored
    rnd.anchor = anchor
    if expanding:
        rnd.expanding[7] = object()  # type: ignore[assignment]
    return rnd


def test_the_bar_counts_from_the_best_prediction_still_queued_not_from_a_measured_child() -> None:
    # "a" was predicted far faster than anything else and has been measured (it left the
    # queue); the round was then re-formed around b, c, d (a merge sets the anchor anew).
    keys = {"a": -5.0, "b": 0.0, "c": 1.0, "d": 3.0}
    rnd = _round(keys, ["b", "c", "d"], anchor=0.0)
    assert gate_bar(rnd) == STREAM_GATE
    assert likely(rnd) == 2  # b and c are within 4x of b; d is not
    # Without an anchor the bar falls back to the best prediction the round ever had.
    assert likely(_round(keys, ["b", "c", "d"])) == 0


def test_exploration_draws_pass_the_gate_once_the_round_is_in() -> None:
    keys = {"b": 0.0, "c": 1.0, "d": 3.0, "e": 4.0}
    rnd = _round(keys, ["b", "c", "d", "e"], explored=frozenset({"e"}), anchor=0.0)
    taken = []
    while (child := next_child(rnd, gated=True)) is not None:
        taken.append(child.fingerprint)
    assert taken == ["b", "c", "e"]  # d waits: neither likely nor drawn
    # While the round's own expansions still come in, only likely winners go.
    streaming = _round(keys, ["b", "c", "d", "e"], explored=frozenset({"e"}), anchor=0.0, expanding=True)
    assert likely(streaming) == 2
    taken = []
    while (child := next_child(streaming, gated=True)) is not None:
        taken.append(child.fingerprint)
    assert taken == ["b", "c"]


def test_the_drawn_children_are_those_placed_out_of_prediction_order() -> None:
    predictions = [0.5, -1.0, 0.0, 2.0, -0.5, 1.0] * 5
    order, drawn = measuring_order(predictions, random.Random(7))
    assert (order, drawn) == measuring_order(predictions, random.Random(7))  # same seed, same draws
    assert drawn and len(drawn) < len(order) / 2
    # Each drawn child took a slot ahead of a child predicted faster (or equal and proposed earlier).
    for slot, i in enumerate(order):
        if i in drawn:
            assert any((predictions[j], j) < (predictions[i], i) for j in order[slot + 1:])
    assert measuring_order(predictions, random.Random(7), explore=0.0)[1] == frozenset()
