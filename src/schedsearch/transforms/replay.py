"""Apply rewrites and whole schedules to procs."""

from __future__ import annotations

from pathlib import Path

import exo
from exo import ParseFragmentError, SchedulingError
from exo.core.internal_cursors import InvalidCursorError
from exo.core.memory import MemGenError
from exo.frontend.pyparser import ParseError

from schedsearch.core import Rewrite, Schedule, Workload
from schedsearch.errors import ReplayError
from schedsearch.transforms import exo_patches
from schedsearch.transforms.call_memo import CallMemo
from schedsearch.transforms.calls import run_all
from schedsearch.transforms.rules import ArgError, describe, lower
from schedsearch.transforms.workload import bound_proc_from_source

#: What Exo raises when a rewrite does not apply. Anything else is a bug and propagates.
#: RecursionError: Exo's recursive passes give up on very large (unrolled) bodies.
EXO_ERRORS = (
    SchedulingError,
    InvalidCursorError,
    ParseFragmentError,
    MemGenError,
    TypeError,
    ValueError,
    RecursionError,
)
#: What an ``except`` around Exo calls catches; ``rejected_by_exo`` then says if it is Exo's.
EXO_CATCH = (*EXO_ERRORS, AssertionError)
#: What Exo raises for a step's pattern it cannot parse. Our own proposals never make one (it
#: would be a bug, and propagates from ``try_apply``); a schedule read from a file or a
#: database can (``replay``: that step does not apply).
PATTERN_ERRORS = (ParseError,)
#: What the lowering raises for arguments it cannot read (``ArgError`` aside): from a
#: proposal of ours a bug, from a schedule read from a file or a database a malformed step.
MALFORMED = (ValueError, KeyError, IndexError, TypeError)
_EXO_DIR = Path(exo.__file__).resolve().parent
#: Code of ours that runs inside Exo: the stand-ins ``exo_patches`` installs.
_PATCHES_DIR = Path(exo_patches.__file__).resolve().parent


def rejected_by_exo(exc: BaseException) -> bool:
    """Whether ``exc`` is Exo declining a rewrite: one of EXO_ERRORS, or an assertion that
    failed inside Exo's own code. Exo 1.0.0 asserts where an analysis meets a case it does
    not handle; on the multi-channel conv1d, ``stage_mem``'s bounds check fails one
    (``AWin.__add__``) in some runs and not in others. An assertion of ours propagates, and
    so does any exception raised in the code of an Exo patch (``exo_patches``): a bug there
    must surface, not prune legal rewrites."""
    where = _innermost_file(exc)
    if where is not None and where.is_relative_to(_PATCHES_DIR):
        return False
    if isinstance(exc, EXO_ERRORS):
        return True
    return isinstance(exc, AssertionError) and where is not None and where.is_relative_to(_EXO_DIR)


def _innermost_file(exc: BaseException) -> Path | None:
    """The file of the frame that raised ``exc``."""
    tb, last = exc.__traceback__, None
    while tb is not None:
        tb, last = tb.tb_next, tb
    return None if last is None else Path(last.tb_frame.f_code.co_filename).resolve()


def apply_rewrite(proc, rewrite: Rewrite):
    """Apply one rewrite; raises what Exo raises when it rejects it (``rejected_by_exo``).

    The rewrite is lowered to Exo calls first, outside any handler: a fault in our own
    lowering (or a malformed proposal, ``ArgError``) is a bug that surfaces, never a
    rewrite silently counted as illegal.
    """
    calls = lower(rewrite)
    return run_all(proc, calls)


def try_apply(proc, rewrite: Rewrite, memo: CallMemo | None = None):
    """The rewritten proc, or None when Exo rejects the rewrite (``memo``: calls already
    made on the same procs, looked up; see ``call_memo``)."""
    calls = lower(rewrite)
    try:
        return run_all(proc, calls, memo)
    except EXO_CATCH as exc:
        if not rejected_by_exo(exc):
            raise
        return None


def replay(proc, steps, first_index: int = 0):
    """Apply ``steps`` in order; ReplayError names the first step that does not apply."""
    for offset, step in enumerate(steps):
        index = first_index + offset
        try:
            # A step read from a file or a database may carry arguments its kind cannot
            # take: that is a malformed schedule, said as such, not "does not apply". So is
            # one whose free-form arguments (a window, a vector plan) the lowering cannot read.
            calls = lower(step)
        except ArgError as exc:
            raise ReplayError(f"{step_label(index, step)}: {exc}", step=index, reason=f"malformed: {exc}") from None
        except MALFORMED as exc:
            why = f"malformed ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
            raise ReplayError(f"{step_label(index, step)}: {why}", step=index, reason=why) from None
        try:
            proc = run_all(proc, calls)
        except (*EXO_CATCH, *PATTERN_ERRORS) as exc:
            if not isinstance(exc, PATTERN_ERRORS) and not rejected_by_exo(exc):
                raise
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise ReplayError(
                f"step {index} ({describe(step)}) does not apply: {reason}", step=index, reason=reason
            ) from None
    return proc


def step_label(index: int, step: Rewrite) -> str:
    """How an error names a step: ``step 3 `split i #0``` (a target that is no plain short
    text, as read from a file or a database, ``repr``'d and cut)."""
    target = step.target
    if len(target) > 60 or not target.isprintable():
        target = repr(target[:60]) + ("..." if len(target) > 60 else "")
    return f"step {index} `{step.kind.value} {target}`"


def build_proc(workload: Workload, schedule: Schedule = Schedule()):
    """A fresh size-bound proc rebuilt from the workload's source with ``schedule`` applied.

    Raises ReplayError(step=i, reason=Exo's message) when step ``i`` does not apply.
    """
    return replay(bound_proc_from_source(workload), schedule.steps)


def user_c(workload: Workload, schedule: Schedule) -> str:
    """C of the scheduled proc under the user's own proc name (for export)."""
    return build_proc(workload, schedule).c_code_str()
