"""The patches, each with what it replaces and the fingerprints of those objects in Exo 1.0.0.

The fingerprints are ``identity`` of each object in exo-lang 1.0.0 from PyPI (with the
pysmt and asdl_adt it installs); ``tests/unit/test_exo_patches.py`` checks them against
the installed Exo, so a change of version shows up as a failing test, not a silent refusal.
"""

from __future__ import annotations

import collections
import inspect

from schedsearch.transforms.exo_patches import Patch, codegen, contexts, ir_checks, overheads, windows, z3_pool

_EXO_FRONTEND = "exo.frontend"
_EXO_REWRITE = "exo.rewrite"


def _cheap_inspect() -> bool:
    from exo.frontend import parse_fragment, pattern_match

    for module in (pattern_match, parse_fragment):
        if getattr(module, "inspect", None) is not inspect:
            return False
    for module in (pattern_match, parse_fragment):
        module.inspect = overheads.CheapInspect
    return True


def _solvers() -> bool:
    from exo.frontend import boundscheck
    from exo.rewrite import LoopIR_unification, new_analysis_core
    from pysmt import logics

    analyses = ((boundscheck, None), (LoopIR_unification, None), (new_analysis_core, logics.LIA))
    if not all(callable(getattr(m, "_get_smt_solver", None)) for m, _ in analyses):
        return False
    for module, logic in analyses:
        module._get_smt_solver = overheads.solver_lookup(logic)
    if overheads.z3_mode_only(getattr(new_analysis_core, "SMTSolver", None)):
        new_analysis_core._get_smt_solver = overheads.UnusedSolver
    z3_pool.install(new_analysis_core)
    return True


def _scoped_values() -> bool:
    from exo.rewrite import analysis_simplify

    if getattr(analysis_simplify, "ChainMap", None) is not collections.ChainMap:
        return False
    # the module uses ChainMap only for the constant propagation's scopes (ASimplify)
    analysis_simplify.ChainMap = overheads.ScopedValues
    return True


def _lift_to_cir() -> bool:
    from exo.backend import LoopIR_compiler
    from exo.core.LoopIR import CIR, LoopIR
    from exo.rewrite import range_analysis

    if getattr(LoopIR_compiler.lift_to_cir, "__module__", None) != LoopIR_compiler.__name__ or not all(
        hasattr(range_analysis, name) for name in ("IndexRange", "is_zero")
    ):
        return False
    LoopIR_compiler.lift_to_cir = overheads.lifting_to_cir(LoopIR, CIR, range_analysis)
    return True


def _windows_compiled_once() -> bool:
    from exo.backend import LoopIR_compiler
    from exo.core.LoopIR import LoopIR

    if not codegen.expected(LoopIR_compiler):
        return False
    codegen.fields_once(LoopIR_compiler.Compiler, LoopIR.Call)
    return True


def _unchanged_when_equal() -> bool:
    from exo.core.LoopIR import LoopIR
    from exo.rewrite import LoopIR_scheduling

    passes = ("_DoNormalize", "DoSimplify")
    if not all(callable(getattr(getattr(LoopIR_scheduling, name, None), "map_e", None)) for name in passes):
        return False
    LoopIR_scheduling._DoNormalize.map_e = overheads.unchanged_when_equal(LoopIR_scheduling._DoNormalize.map_e)
    LoopIR_scheduling.DoSimplify.map_e = overheads.unchanged_when_equal(
        LoopIR_scheduling.DoSimplify.map_e, LoopIR.Const
    )
    return True


def _contexts_once() -> bool:
    from exo.rewrite import new_eff

    if not contexts.expected(new_eff):
        return False
    new_eff.ContextExtraction = contexts.remembering_contexts(new_eff.ContextExtraction)
    return True


def _windows_once() -> bool:
    from exo.rewrite import new_eff

    if not windows.expected(new_eff):
        return False
    new_eff.AEnv.translate_win = windows.translating_once(new_eff.AEnv.translate_win)
    return True


def _ir_checks() -> bool:
    from exo.frontend import boundscheck
    from exo.rewrite import new_analysis_core, new_eff

    if not all(callable(getattr(m, "is_type_bound", None)) for m in (new_analysis_core, new_eff)):
        return False
    # a class with a virtual subclass keeps ABCMeta's checks, and the formulas their checks
    if ir_checks.plain_ir_checks():
        ir_checks.trusting_formulas(
            (new_analysis_core.A, new_eff.LS, new_eff.E, boundscheck.E),
            checks_only=(new_analysis_core.is_type_bound, new_eff.is_type_bound),
        )
    return True


#: Every patch, in the order applied.
PATCHES: tuple[Patch, ...] = (
    Patch(
        "cheap_inspect",
        (
            (f"{_EXO_FRONTEND}.pattern_match:inspect", "module inspect"),
            (f"{_EXO_FRONTEND}.parse_fragment:inspect", "module inspect"),
        ),
        _cheap_inspect,
    ),
    Patch(
        "solvers",
        (
            (f"{_EXO_FRONTEND}.boundscheck:_get_smt_solver", "3edd77c76e6e202d"),
            (f"{_EXO_REWRITE}.LoopIR_unification:_get_smt_solver", "3edd77c76e6e202d"),
            (f"{_EXO_REWRITE}.new_analysis_core:_get_smt_solver", "d65f7309d4fd79e6"),
            (f"{_EXO_REWRITE}.new_analysis_core:SMTSolver", "01510be3b7a09730"),
        ),
        _solvers,
    ),
    Patch("scoped_values", ((f"{_EXO_REWRITE}.analysis_simplify:ASimplify", "50b61f681f401445"),), _scoped_values),
    Patch("lift_to_cir", (("exo.backend.LoopIR_compiler:lift_to_cir", "eba5606fde08de01"),), _lift_to_cir),
    Patch(
        "windows_compiled_once",
        (
            ("exo.backend.LoopIR_compiler:Compiler.comp_s", "0c2438a3e989916f"),
            ("exo.backend.LoopIR_compiler:Compiler.window_struct_fields", "4a991250748e9aca"),
        ),
        _windows_compiled_once,
    ),
    Patch(
        "unchanged_when_equal",
        (
            (f"{_EXO_REWRITE}.LoopIR_scheduling:_DoNormalize.map_e", "73b65db4449c4314"),
            (f"{_EXO_REWRITE}.LoopIR_scheduling:DoSimplify.map_e", "e5400e953c830a33"),
        ),
        _unchanged_when_equal,
    ),
    Patch("contexts_once", ((f"{_EXO_REWRITE}.new_eff:ContextExtraction", "d878fc1c496c8873"),), _contexts_once),
    Patch("windows_once", ((f"{_EXO_REWRITE}.new_eff:AEnv.translate_win", "df64380c2fc2bc1d"),), _windows_once),
    Patch(
        "ir_checks",
        (
            ("asdl_adt.adt:_AsdlAdtBase", "123c825a145cd832"),
            ("asdl_adt.adt:ADT", "adc1c8bcd46c2702"),
            (f"{_EXO_REWRITE}.new_analysis_core:is_type_bound", "66ff5ae6cb420e4b"),
            (f"{_EXO_REWRITE}.new_eff:is_type_bound", "66ff5ae6cb420e4b"),
        ),
        _ir_checks,
    ),
)
