"""The Exo overheads removed in-process, and the scoped instruction replacement: same
results as Exo's own paths, which are kept here as the reference."""

from __future__ import annotations

import abc
import collections
import inspect
import random
from pathlib import Path

import pytest
from exo import SchedulingError
from exo.frontend import pattern_match
from exo.rewrite import analysis_simplify, new_analysis_core
from exo.stdlib import scheduling

from schedsearch.core import ExpandOptions, RewriteKind
from schedsearch.transforms import build_proc, kernel_c, load_workload, propose, try_apply
from schedsearch.transforms import exo_patches
from schedsearch.transforms.exo_patches import codegen as exo_codegen, contexts as exo_contexts, ir_checks, overheads, windows as exo_windows
from schedsearch.transforms import calls as calls_module

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _c_of_each(proc, rewrites) -> list[str | None]:
    """Each rewrite applied to ``proc``: its child's C, or None where it is illegal."""
    out = []
    for rewrite in rewrites:
        child = try_apply(proc, rewrite)
        out.append(kernel_c(child) if child is not None else None)
    return out


def test_installed_on_exo_1_0_0():
    assert exo_patches.install() is exo_patches.State.INSTALLED
    assert pattern_match.inspect is not inspect
    assert new_analysis_core._get_smt_solver.__module__ == overheads.__name__
    assert analysis_simplify.ChainMap is overheads.ScopedValues
    assert isinstance(new_analysis_core.SMTSolver().solver, overheads.UnusedSolver)


def test_the_effect_analysis_pysmt_solver_only_counts_its_levels():
    """The stand-in pushes and pops as the rewrites' analyses ask and refuses a pop with no
    level; the analyses still decide (a legal reorder)."""
    proc = build_proc(load_workload(EXAMPLES / "matmul.py", "sgemm", {"M": 8, "N": 8, "K": 8}))
    made = []
    real = new_analysis_core._get_smt_solver

    def counting():
        made.append(real())
        return made[-1]

    new_analysis_core._get_smt_solver = counting
    try:
        assert scheduling.reorder_loops(proc, proc.find_loop("i #0")) is not None  # i, j commute
        assert made and all(solver.levels == 0 for solver in made)
    finally:
        new_analysis_core._get_smt_solver = real
    with pytest.raises(IndexError):
        overheads.UnusedSolver().pop()


def test_cursor_patterns_still_resolve_and_still_fail_clearly():
    proc = build_proc(load_workload(EXAMPLES / "matmul.py", "sgemm", {"M": 8, "N": 8, "K": 8}))
    assert proc.find_loop("k #0").name() == "k"
    assert proc.find("C[_] += _").name() == "C"
    with pytest.raises(SchedulingError, match="failed to find matches"):
        proc.find_loop("k #1")


@pytest.mark.parametrize(
    "path,proc,sizes,kind,target",
    [
        ("matmul.py", "sgemm", {"M": 20, "N": 32, "K": 8}, RewriteKind.REGISTER_TILE, "avx512"),
        ("matmul.py", "sgemm", {"M": 20, "N": 32, "K": 8}, RewriteKind.REGISTER_TILE, "avx2"),
        ("gemv.py", "gemv_t", {"M": 16, "N": 67}, RewriteKind.VECTORIZE, "avx512"),
        ("conv1d.py", None, {"N": 64, "R": 5}, RewriteKind.VECTORIZE, "avx2"),
    ],
)
def test_replace_in_gives_the_c_of_replace_all(monkeypatch, path, proc, sizes, kind, target):
    """The first proposals of the kind (a register tile with a cut tail among them), applied
    with the scoped replacement and with Exo's ``replace_all``: the same C, byte for byte
    (and the same rewrites legal)."""
    root = build_proc(load_workload(EXAMPLES / path, proc, sizes))
    options = ExpandOptions(target=target)
    rewrites = [r for r in propose(root, options) if r.kind is kind][:3]
    assert rewrites

    scoped = _c_of_each(root, rewrites)
    monkeypatch.setitem(calls_module.HELPERS, "replace_in",
                        lambda p, loops, instrs: scheduling.replace_all(p, list(instrs)))
    assert _c_of_each(root, rewrites) == scoped
    assert any(c is not None and "_mm" in c for c in scoped)  # instructions really were placed


def test_scoped_values_answer_as_a_chain_map_does():
    """Random scopes entered and left, names bound, masked (None) and looked up: every
    lookup answers as ``collections.ChainMap`` used the same way."""
    rng = random.Random(7)
    ours, chain = overheads.ScopedValues(), collections.ChainMap()
    depth = 0
    for _ in range(5000):
        op = rng.random()
        key = rng.choice(["i", "j", "k", ("A", 0), ("A", 1)])
        if op < 0.25:
            ours, chain, depth = ours.new_child(), chain.new_child(), depth + 1
        elif op < 0.45 and depth:
            ours, chain, depth = ours.parents, chain.parents, depth - 1
        elif op < 0.7:
            value = rng.choice([None, 0, 1, "n"])
            ours[key] = value
            chain[key] = value
        else:
            assert ours.get(key) == chain.get(key)
            assert (key in ours) == (key in chain)


def test_a_register_tiled_nodes_children_are_the_same_with_exos_chain_map(monkeypatch):
    """The children of a register tile (whose effect formulas nest deepest) with the scoped
    values and with Exo's own ChainMap: the same C, byte for byte, and the same legality."""
    root = build_proc(load_workload(EXAMPLES / "matmul.py", "sgemm", {"M": 20, "N": 32, "K": 8}))
    options = ExpandOptions(target="avx512")
    tile = next(r for r in propose(root, options) if r.kind is RewriteKind.REGISTER_TILE)
    tiled = try_apply(root, tile)
    assert tiled is not None
    rewrites = [r for r in propose(tiled, options) if r.kind in (RewriteKind.REORDER, RewriteKind.PACK,
                                                                 RewriteKind.SPLIT)][:8]
    assert len(rewrites) >= 4

    scoped = _c_of_each(tiled, rewrites)
    monkeypatch.setattr(analysis_simplify, "ChainMap", collections.ChainMap)
    assert _c_of_each(tiled, rewrites) == scoped
    assert any(c is not None for c in scoped)


def test_a_register_tiled_nodes_children_are_the_same_with_checked_formulas(monkeypatch, tiled_and_costly):
    """The reorders, sinks and packs of a register tile - whose safety checks build the most
    formulas - with the analysis formulas' field checks dropped and with them restored: the
    same C, byte for byte, and the same legality."""
    exo_patches.install()
    assert len(ir_checks.TRUSTED) >= 80
    # the formulas' types too, checked by Exo's own is_type_bound
    assert sum(name == "_validate_type" for _, name, _ in ir_checks.TRUSTED) >= 17
    tiled, rewrites = tiled_and_costly
    trusting = _c_of_each(tiled, rewrites)
    for namespace, name, check in ir_checks.TRUSTED:
        monkeypatch.setitem(namespace, name, check)
    assert _c_of_each(tiled, rewrites) == trusting
    assert any(c is not None for c in trusting)


def test_analysis_formulas_still_convert_operators_and_copy_lists():
    """Without their field checks, formulas still get Exo's operator class for an operator
    given as text (one object per text), still refuse a text that is no operator, and a
    list field is still a list of the node's own."""
    from exo.core.LoopIR import T
    from exo.core.prelude import Sym, null_srcinfo

    exo_patches.install()
    A, where = new_analysis_core.A, null_srcinfo()
    x, one = A.Var(Sym("x"), T.index, where), A.Const(1, T.int, where)
    first, second = A.BinOp("+", x, one, T.index, where), A.BinOp("+", one, x, T.index, where)
    assert type(first.op) is new_analysis_core.AOp and first.op is second.op
    assert A.BinOp(first.op, x, x, T.index, where).op is first.op
    with pytest.raises(Exception, match="invalid operator"):
        A.BinOp("^^", x, one, T.index, where)
    items = [x, one]
    packed = A.Tuple(items, T.index, where)
    assert packed.args == items and packed.args is not items


def test_ir_classes_answer_isinstance_as_abcmeta_does():
    """Every IR node of a register-tiled SGEMM against every IR class: the plain check
    given by ``install`` answers as ``ABCMeta``'s own ``__instancecheck__``."""
    from asdl_adt import adt

    exo_patches.install()
    # Exo's classes (not the probe made by the virtual-subclass test, if it ran before)
    classes = [c for c in ir_checks._ir_classes(adt._AsdlAdtBase) if not c.__qualname__.startswith("probe.")]
    assert len(classes) > 100
    assert all(type(cls) is ir_checks._PlainChecks for cls in classes[1:])

    root = build_proc(load_workload(EXAMPLES / "matmul.py", "sgemm", {"M": 20, "N": 32, "K": 8}))
    tile = next(r for r in propose(root, ExpandOptions(target="avx512")) if r.kind is RewriteKind.REGISTER_TILE)
    ir = try_apply(root, tile)._loopir_proc
    nodes, todo = [], [ir]
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            todo.extend(node)
        elif isinstance(node, adt._AsdlAdtBase) and len(nodes) < 400:
            nodes.append(node)
            todo.extend(getattr(node, name) for name in node.__annotations__)
    assert len({type(n) for n in nodes}) >= 8
    for cls in classes:
        for node in nodes:
            assert isinstance(node, cls) == abc.ABCMeta.__instancecheck__(cls, node)
        for other in classes:
            assert issubclass(other, cls) == abc.ABCMeta.__subclasscheck__(cls, other)


def test_field_checks_still_reject_what_exo_rejects():
    """The remembering field checks accept what they accepted before (a subclass of the
    field's type, a list of them) and still refuse a wrong type, in a list too, after
    having accepted right ones."""
    from asdl_adt.validators import ValidationError
    from exo.core.LoopIR import LoopIR, T
    from exo.core.prelude import null_srcinfo

    exo_patches.install()
    where = null_srcinfo()
    one = LoopIR.Const(1, T.int, where)
    assert LoopIR.USub(one, T.int, where).arg is one  # a Const where an expr goes
    with pytest.raises(ValidationError):
        LoopIR.USub("1", T.int, where)
    with pytest.raises(ValidationError):
        LoopIR.USub(LoopIR.Pass(where), T.int, where)  # a statement where an expr goes
    body = [LoopIR.Pass(where)]
    for _ in range(2):  # the second time, every item's type has been accepted before
        branch = LoopIR.If(one, body, [], where)
        assert branch.body == body and branch.body is not body  # a copy, as asdl_adt makes
    with pytest.raises(ValidationError):
        LoopIR.If(one, [LoopIR.Pass(where), one], [], where)  # an expression among statements
    with pytest.raises(ValidationError):
        LoopIR.If(one, LoopIR.Pass(where), [], where)  # not a list


def test_a_class_with_a_virtual_subclass_keeps_abcmeta():
    """A virtual subclass registered with any IR class: nothing is changed, and the
    registered class is still an instance for ``isinstance``."""
    from asdl_adt import ADT

    exo_patches.install()
    module = ADT("module probe { t = A(int x) | B(t y) }")

    class Outside:
        pass

    module.t.register(Outside)
    try:
        assert ir_checks.plain_ir_checks() is False
        assert type(module.t) is abc.ABCMeta
        assert isinstance(Outside(), module.t)
    finally:
        del module


def test_lift_to_cir_marks_every_node_as_exos_range_analysis_does():
    """Each node of the lifted expression is marked non-negative exactly when Exo's range
    analysis says so of that node (constants, loop ranges, free sizes, -, /, %), and the
    installed one is what the C backend calls."""
    from types import SimpleNamespace

    from exo.backend import LoopIR_compiler
    from exo.core.LoopIR import CIR, LoopIR, T
    from exo.core.prelude import Sym, null_srcinfo
    from exo.rewrite.range_analysis import IndexRangeEnvironment

    exo_patches.install()
    where = null_srcinfo()
    i, j, n = Sym("i"), Sym("j"), Sym("n")
    env = SimpleNamespace(env={i: (0, 5), j: (-2, 3)})  # n: a free size, not in the environment

    def read(s):
        return LoopIR.Read(s, [], T.index, where)

    def c(v):
        return LoopIR.Const(v, T.index, where)

    def op(o, a, b):
        return LoopIR.BinOp(o, a, b, T.index, where)

    exprs = [
        op("+", op("*", c(4), read(i)), read(j)), op("-", read(i), c(3)),
        op("+", LoopIR.USub(read(i), T.index, where), c(5)),
        op("/", op("+", read(i), c(7)), c(2)), op("%", op("+", read(i), c(7)), c(4)), op("+", read(n), read(i)),
        op("-", op("*", read(n), c(2)), read(i)), op("-", c(3), read(i)), op("+", read(j), c(2)), read(j), c(0),
        op("/", op("-", read(j), c(1)), c(2)), op("*", op("+", read(i), read(j)), c(-1)),
    ]

    def nodes(e, cir):
        yield e, cir
        if isinstance(e, LoopIR.BinOp):
            yield from nodes(e.lhs, cir.lhs)
            yield from nodes(e.rhs, cir.rhs)
        elif isinstance(e, LoopIR.USub):
            yield from nodes(e.arg, cir.arg)

    marked = []
    for e in exprs:
        lifted = LoopIR_compiler.lift_to_cir(e, env)
        for node, cir in nodes(e, lifted):
            if isinstance(cir, CIR.Const):
                assert isinstance(node, LoopIR.Const) and cir.val == node.val
                continue
            expected = IndexRangeEnvironment.check_expr_bound(env, 0, IndexRangeEnvironment.leq, node)
            assert cir.is_non_neg == expected, str(node)
            marked.append(expected)
    assert True in marked and False in marked
    assert LoopIR_compiler.lift_to_cir.__module__ == overheads.__name__


def _wrapped(installed):
    """The ``map_e`` an ``unchanged_when_equal`` wrapper calls."""
    cells = dict(zip(installed.__code__.co_freevars, installed.__closure__, strict=True))
    return cells["map_e"].cell_contents


# Constant folding takes apart again some sums the normalization before it writes out
# (``i0 + 0``), a real change each time; Exo's own passes answer every expression rebuilt.
@pytest.mark.parametrize(("rewrite_pass", "unchanged"), [("_DoNormalize", 0.9), ("DoSimplify", 0.5)])
def test_simplify_makes_no_edit_for_an_index_it_rebuilds_equal(rewrite_pass: str, unchanged: float):
    """On a register-tiled proc, simplify gives the same proc and C as Exo's own index
    normalization and constant folding, and each installed pass reports most expressions
    it does not fold to a constant as unchanged."""
    from exo.rewrite import LoopIR_scheduling

    exo_patches.install()
    root = build_proc(load_workload(EXAMPLES / "matmul.py", "sgemm", {"M": 20, "N": 32, "K": 8}))
    tile = next(r for r in propose(root, ExpandOptions(target="avx512")) if r.kind is RewriteKind.REGISTER_TILE)
    # simplified once already, as a rewrite's parent is: what is left to fold is the rewrite's
    proc = scheduling.simplify(try_apply(root, tile))
    cls = getattr(LoopIR_scheduling, rewrite_pass)
    installed = cls.map_e
    answers = []

    def counting(self, e):
        answers.append(installed(self, e))
        return answers[-1]

    try:
        cls.map_e = _wrapped(installed)
        theirs = scheduling.simplify(proc)
        cls.map_e = counting
        ours = scheduling.simplify(proc)
    finally:
        cls.map_e = installed
    assert str(ours) == str(theirs) and kernel_c(ours) == kernel_c(theirs)
    # constants are still answered (constant folding reads them)
    rebuilt = [a for a in answers if type(a).__name__ != "Const"]
    assert len(rebuilt) > 50 and sum(a is None for a in rebuilt) > unchanged * len(rebuilt)


def test_constant_folding_still_deletes_a_loop_that_never_runs():
    """Constant folding deletes a loop whose bounds fold to the same constant: the
    unchanged-when-equal wrapper still gives it constant bounds it did not change."""
    from exo import proc

    exo_patches.install()

    @proc
    def never(N: size, x: f32[N]):
        for i in seq(0, 4 - 4):
            x[i] = 0.0
        for j in seq(0, N):
            x[j] = 1.0 * x[j]

    out = str(scheduling.simplify(never))
    assert "for i in" not in out and "for j in seq(0, N)" in out and "x[j] = x[j]" in out
