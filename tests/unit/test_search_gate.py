"""The gate of a ranked round (``search.rounds``): which queued children are measured while
the round's expansions come in or the next round is expanded - counted from the best
prediction still queued."""

from __future__ import annotations

import dataclasses

from schedsearch.search.rounds import STREAM_GATE, Round, gate_bar, likely, next_child
from schedsearch.testing.fake_tree import fake_root


def _round(keys: dict[str, float], queued: list[str], *, anchor: float | None = None, expanding: bool = False) -> Round:
    rnd = Round(1, [])
    rnd.keys = dict(keys)
    rnd.queue.extend(dataclasses.replace(fake_root(), fingerprint=fp) for fp in queued)
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


def test_a_gated_round_lets_only_its_likely_winners_go_and_an_open_one_all_in_order() -> None:
    keys = {"b": 0.0, "c": 1.0, "d": 3.0, "e": 4.0}
    for expanding in (True, False):
        rnd = _round(keys, ["b", "d", "c", "e"], anchor=0.0, expanding=expanding)
        taken = []
        while (child := next_child(rnd, gated=True)) is not None:
            taken.append(child.fingerprint)
        assert taken == ["b", "c"]  # d and e wait, wherever they stand in the queue
        assert [c.fingerprint for c in rnd.queue] == ["d", "e"]
    # Expanded and not gated: the queue's order alone decides.
    rnd = _round(keys, ["b", "d", "c", "e"], anchor=0.0)
    assert [next_child(rnd).fingerprint for _ in range(4)] == ["b", "d", "c", "e"]  # type: ignore[union-attr]
