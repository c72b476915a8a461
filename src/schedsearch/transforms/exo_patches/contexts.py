"""Exo's effect checks extract a statement's context once, not once per question.

Before a rewrite Exo 1.0.0 asks the SMT solver questions about a statement in its context:
which loops enclose it and within what bounds (the *control predicate*), and what the
statements before it have bound (the *pre-environment*). ``new_eff.ContextExtraction``
works both out from the whole proc on every question, walking each enclosing loop's body,
and that walk, not the solver, is most of what a check costs. The same contexts are
asked for again and again:

- ``Check_ExprEqvInContext(proc, e0, [s], e1)`` extracts the context of ``[s]`` twice, once
  for each side, when no second statement is given;
- ``stage_mem`` asks, for each dimension of the staged window, whether each bound of the
  staging loops' accesses always holds, one check per bound (four for a 2-D register tile
  of C, twice: its load and its store), each about the same statement.

On SGEMM 512's root in the AVX2 space those safety checks were a fifth of the expansion.

``remembering_contexts`` gives ``new_eff`` a ``ContextExtraction`` that keeps the control
predicate and the pre-environment of the latest few (proc, statement) pairs. Both depend
only on the proc and the first statement of the block (Exo finds the block by that
statement's identity); Exo's IR is immutable, so the same objects give the same answers,
and a pair is recognized by identity, never by equality (two equal statements at different
places have different contexts). The formulas are only read once made (``AEnv``'s ``+``
and application make new ones), so one extraction can serve several checks. Where one check
joins two contexts of the same statement, it now joins the same context with itself instead
of with a copy whose loop-carried values have fresh names; since the question is about one
program point, the answer is the same.
"""

from __future__ import annotations

from collections import OrderedDict

#: (proc, statement) pairs whose contexts are kept: a rewrite's checks ask about a few
#: statements of one proc at a time.
KEPT = 16


def remembering_contexts(extraction: type, kept: int = KEPT) -> type:
    """A subclass of Exo's ``ContextExtraction`` that answers ``get_control_predicate`` and
    ``get_pre_globenv`` from the latest ``kept`` answers for the same proc and the same
    first statement (by identity)."""
    recent: OrderedDict[tuple[str, int, int], tuple[object, object, object]] = OrderedDict()

    class RememberedContext(extraction):
        """Exo's context extraction, each answer worked out once per (proc, statement)."""

        def _remembered(self, what: str, work):
            first = self.stmts[0]
            key = (what, id(self.proc), id(first))
            hit = recent.get(key)
            # the objects are held with the answer, so their ids cannot be reused meanwhile
            if hit is not None and hit[0] is self.proc and hit[1] is first:
                recent.move_to_end(key)
                return hit[2]
            answer = work()
            recent[key] = (self.proc, first, answer)
            if len(recent) > kept:
                recent.popitem(last=False)
            return answer

        def get_control_predicate(self):
            return self._remembered("control", super().get_control_predicate)

        def get_pre_globenv(self):
            return self._remembered("pre", super().get_pre_globenv)

    RememberedContext.__name__ = RememberedContext.__qualname__ = extraction.__name__
    return RememberedContext


def expected(new_eff) -> bool:
    """Whether ``new_eff`` has the ``ContextExtraction`` these answers were written for."""
    extraction = getattr(new_eff, "ContextExtraction", None)
    return isinstance(extraction, type) and all(
        callable(getattr(extraction, name, None))
        for name in ("get_control_predicate", "get_pre_globenv", "ctrlp_stmts", "preenv_stmts")
    )
