"""Two costs Exo 1.0.0 pays on every scheduling call that have nothing to do with scheduling.

Profiling the root expansion of a 256-cubed SGEMM in the AVX-512 space (52 rewrites, about
22 s on a Zen 4 core) showed half the time outside Exo's rewriting:

- **Finding a cursor reads source files.** ``proc.find`` and ``find_loop`` parse their
  pattern in the caller's scope, and to get that scope Exo calls ``inspect.stack()``, which
  reads the source line of every frame on the stack (a Ray worker's stack is deep): about
  3 ms a call, and an expansion makes thousands. Only the caller's frame and its file name
  and line (for error messages) are used.
- **Every SMT query probes for solvers.** Each analysis builds a new ``pysmt`` ``Factory``,
  which tries to import every solver pysmt knows (MathSAT, CVC, Yices, ...). The missing
  ones fail again each time, compiling their modules anew: about 6 ms a query.

``install`` gives Exo's pattern parser a stack that is built only as far as it is read, and
its solver lookups the environment's one factory. Both return what Exo would have got, so
every rewrite, every proc and all generated C stay the same (the rewrite tests check C
byte for byte). If Exo's internals are not the ones these were written against, nothing is
changed and Exo is only slower.
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from types import FrameType

_installed = False


@dataclass(frozen=True, slots=True)
class _FrameInfo:
    """What Exo reads of an ``inspect.FrameInfo``: ``[0]`` and ``.frame``."""

    frame: FrameType

    def __getitem__(self, index: int) -> FrameType:
        return (self.frame,)[index]


class _LazyStack:
    """``inspect.stack()`` as a sequence whose entries are made only when indexed."""

    def __init__(self, frame: FrameType) -> None:
        self._frame = frame

    def __getitem__(self, index: int) -> _FrameInfo:
        frame = self._frame
        for _ in range(index):
            if frame.f_back is None:
                raise IndexError(index)
            frame = frame.f_back
        return _FrameInfo(frame)


class _CheapInspect:
    """The two ``inspect`` functions Exo's pattern and fragment parsers call."""

    @staticmethod
    def stack() -> _LazyStack:
        # sys._getframe(1): the caller of stack(), as inspect.stack()'s first entry is
        return _LazyStack(sys._getframe(1))

    @staticmethod
    def getframeinfo(frame: FrameType) -> inspect.Traceback:
        # file and line only: the parsers quote them in error messages, never the source
        return inspect.Traceback(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name, None, None)


def _solver_lookup(logic):
    """Exo's ``_get_smt_solver`` over the environment's own factory (probed once)."""
    import pysmt.shortcuts

    def get_smt_solver():
        factory = pysmt.shortcuts.get_env().factory
        solvers = factory.all_solvers(logic=logic) if logic is not None else factory.all_solvers()
        if len(solvers) == 0:
            raise OSError("Could not find any SMT solvers")
        return pysmt.shortcuts.Solver(name=next(iter(solvers)))

    return get_smt_solver


def install() -> bool:
    """Remove both overheads from this process (once); False when Exo's internals differ
    from the ones expected, in which case nothing was changed."""
    global _installed
    if _installed:
        return True
    try:
        from exo.frontend import boundscheck, parse_fragment, pattern_match
        from exo.rewrite import LoopIR_unification, new_analysis_core
        from pysmt import logics
    except ImportError:
        return False
    parsers = (pattern_match, parse_fragment)
    analyses = ((boundscheck, None), (LoopIR_unification, None), (new_analysis_core, logics.LIA))
    if not all(getattr(m, "inspect", None) is inspect for m in parsers) or \
            not all(callable(getattr(m, "_get_smt_solver", None)) for m, _ in analyses):
        return False
    for module in parsers:
        module.inspect = _CheapInspect
    for module, logic in analyses:
        module._get_smt_solver = _solver_lookup(logic)
    _installed = True
    return True
