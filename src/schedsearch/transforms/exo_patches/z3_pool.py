"""z3 solvers for Exo's effect analysis, made once and used again.

Exo 1.0.0's effect analysis makes a new ``SMTSolver`` for every check (a loop reorder, a
fission, each bound of a staged buffer), and each makes a new z3 solver. A new z3 solver
costs its first push and first check about 0.5 and 1 ms more than a used one (on a Zen 4
core: a push-add-check-pop 1.7 ms on a new solver, 0.09 ms on one used before), and an
expansion of a register-tiled node makes thousands.

``SolverPool`` hands ``SMTSolver`` a solver with nothing asserted and no scope open, one
given back earlier when it has one. A solver is given back when the ``SMTSolver`` that
held it is freed: its open scopes are popped (a check that raised leaves some open), and
it goes back only if nothing is then left asserted at its base level. What a check asserts
is pushed and popped around it, so a solver given back holds no formula of the checks
before; only z3's own heuristics' state carries over, which can change how it finds an
answer, not whether a formula is satisfiable. Exo raises on an "unknown" answer, so an
answer that differed would show as a rewrite declined; the tests compare every child's C
of expansions with and without the pool.
"""

from __future__ import annotations

import weakref
from typing import Any

#: Solvers kept for reuse: more than the checks an analysis has open at once.
POOL_SIZE = 8


class SolverPool:
    """Empty z3 solvers to use again (``acquire``), and their return (``release``)."""

    def __init__(self, z3: Any, size: int = POOL_SIZE) -> None:
        self._z3 = z3
        self._size = size
        self._free: list[Any] = []
        self.made = 0
        self.reused = 0

    def acquire(self) -> Any:
        """A solver with nothing asserted and no scope open."""
        if self._free:
            self.reused += 1
            return self._free.pop()
        self.made += 1
        return self._z3.Solver()

    def release(self, solver: Any) -> None:
        """Take ``solver`` back: its scopes popped, kept if its base level is empty."""
        try:
            scopes = solver.num_scopes()
            if scopes:
                solver.pop(scopes)
            if len(self._free) < self._size and len(solver.assertions()) == 0:
                self._free.append(solver)
        except Exception:  # noqa: BLE001 - a solver z3 cannot pop is simply not kept
            return


class _PooledZ3:
    """The ``z3`` module as ``new_analysis_core`` sees it, its ``Solver`` from a pool."""

    def __init__(self, z3: Any, pool: SolverPool) -> None:
        self._z3 = z3
        self.Solver = pool.acquire

    def __getattr__(self, name: str) -> Any:
        return getattr(self._z3, name)


def install(analysis_core: Any) -> SolverPool | None:
    """Give ``analysis_core`` (Exo's ``new_analysis_core``) pooled z3 solvers; None, with
    nothing changed, when its ``SMTSolver`` does not keep its solver as ``z3slv``."""
    smt_solver = getattr(analysis_core, "SMTSolver", None)
    z3 = getattr(analysis_core, "z3lib", None)
    if smt_solver is None or z3 is None or not callable(getattr(z3, "Solver", None)):
        return None
    pool = SolverPool(z3)
    made = smt_solver.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        solver = getattr(self, "z3slv", None)
        if solver is not None:
            weakref.finalize(self, pool.release, solver)

    analysis_core.z3lib = _PooledZ3(z3, pool)
    smt_solver.__init__ = init
    return pool
