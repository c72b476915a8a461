"""``LostWork``: the Ray executor's count of jobs sent back to the queue after their worker
or node was lost (no Ray here: the dead nodes are given)."""

from __future__ import annotations

from schedsearch.evaluate.ray_losses import MAX_LOSSES, LostWork, first_line


def test_a_job_goes_back_until_it_was_lost_too_often() -> None:
    lost = LostWork(dead_nodes=lambda: [])
    assert [lost.take(7, f"lost {i}") for i in range(MAX_LOSSES + 1)] == [True] * MAX_LOSSES + [False]
    assert lost.requeued == MAX_LOSSES and lost.reasons == [f"lost {i}" for i in range(MAX_LOSSES)]
    # Another job's losses are its own; a finished job's are forgotten.
    assert lost.take(8, "x")
    lost.forget(7)
    assert lost.take(7, "again") and lost.requeued == MAX_LOSSES + 2


def test_the_dead_nodes_are_read_when_a_loss_is_taken() -> None:
    dead: list[str] = []
    lost = LostWork(dead_nodes=lambda: list(dead))
    dead.append("b" * 56)
    assert not lost.dead("b" * 56)  # not asked yet
    lost.take(1, "ActorDiedError")
    assert lost.dead("b" * 56) and not lost.dead("a" * 56) and lost.dead_nodes == {"b" * 56}


def test_an_unanswered_question_keeps_what_was_known() -> None:
    answers = iter([["c" * 56]])

    def nodes() -> list[str]:
        return next(answers)  # the second call raises StopIteration: Ray did not answer

    lost = LostWork(dead_nodes=nodes)
    lost.take(1, "x")
    assert lost.take(2, "y") and lost.dead("c" * 56)


def test_first_line_is_the_last_line_of_the_error() -> None:
    assert first_line(RuntimeError("Traceback\n  frame\n\nActorDiedError: node died\n")) == "ActorDiedError: node died"
    assert first_line(None) == "" and len(first_line(RuntimeError("x" * 999))) == 300
