"""Exo's effect checks with each statement's context extracted once: the same answers, the
same procs and C as with Exo's own extraction, and the work done once per statement."""

from __future__ import annotations

from pathlib import Path

from exo.rewrite import new_eff

from schedsearch.core import ExpandOptions, RewriteKind
from schedsearch.transforms import build_proc, kernel_c, load_workload, propose, try_apply
from schedsearch.transforms import exo_patches
from schedsearch.transforms.exo_patches import codegen as exo_codegen, contexts as exo_contexts, ir_checks, overheads, windows as exo_windows

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


class _Stmt:
    """A statement equal to every other of the same text, as Exo's equal statements are."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Stmt) and other.text == self.text

    __hash__ = None  # type: ignore[assignment]


class _Extraction:
    """A stand-in for Exo's ``ContextExtraction`` that counts its work."""

    worked: list[tuple[str, object]] = []

    def __init__(self, proc, stmts):
        self.proc, self.stmts = proc, stmts

    def get_control_predicate(self):
        self.worked.append(("control", self.stmts[0]))
        return ("p", self.stmts[0].text)

    def get_pre_globenv(self):
        self.worked.append(("pre", self.stmts[0]))
        return ("G", self.stmts[0].text)


def test_one_extraction_per_proc_and_statement_by_identity():
    _Extraction.worked = []
    remembering = exo_contexts.remembering_contexts(_Extraction, kept=2)
    proc, s, t = object(), [_Stmt("x = 0")], [_Stmt("x = 0")]  # equal statements, distinct objects
    first = remembering(proc, s).get_control_predicate()
    assert remembering(proc, s).get_control_predicate() is first
    assert remembering(proc, [s[0], _Stmt("y = 1")]).get_control_predicate() is first  # the block's first statement decides
    assert len(_Extraction.worked) == 1
    assert remembering(proc, t).get_control_predicate() == first  # same answer, worked out anew
    assert remembering(object(), s).get_control_predicate() is not first  # another proc
    assert len(_Extraction.worked) == 3
    remembering(proc, s).get_pre_globenv()
    remembering(proc, s).get_pre_globenv()
    assert [what for what, _ in _Extraction.worked] == ["control"] * 3 + ["pre"]


def test_the_latest_answers_are_kept_and_older_ones_worked_out_again():
    _Extraction.worked = []
    remembering = exo_contexts.remembering_contexts(_Extraction, kept=2)
    proc, a, b, c = object(), [_Stmt("a")], [_Stmt("b")], [_Stmt("c")]
    for stmts in (a, b, a, c, a, b):  # c pushes out b, the older one; a stays
        remembering(proc, stmts).get_control_predicate()
    assert [s.text for _, s in _Extraction.worked] == ["a", "b", "c", "b"]


def test_installed_in_exos_effect_analysis():
    assert exo_contexts.expected(new_eff)
    assert issubclass(new_eff.ContextExtraction, new_eff.ContextExtraction.__mro__[1])
    assert new_eff.ContextExtraction.__module__ == exo_contexts.__name__


def _c_of_each(proc, rewrites) -> list[str | None]:
    return [kernel_c(child) if (child := try_apply(proc, r)) is not None else None for r in rewrites]


def test_staged_and_reordered_children_are_the_same_with_exos_own_extraction(monkeypatch):
    """Register tiles stage C with safety checks (four per staged window); a tiled node's
    packs, sinks and reorders check effects in context. Every child's C, byte for byte, and
    every refusal are those of Exo's own extraction, and fewer extractions are worked out."""
    root = build_proc(load_workload(EXAMPLES / "matmul.py", "sgemm", {"M": 20, "N": 32, "K": 8}))
    options = ExpandOptions(target="avx2")
    tiles = [r for r in propose(root, options) if r.kind is RewriteKind.REGISTER_TILE][:2]
    tiled = try_apply(root, tiles[0])
    assert tiled is not None
    costly = [r for r in propose(tiled, options)
              if r.kind in (RewriteKind.PACK, RewriteKind.SINK, RewriteKind.REORDER, RewriteKind.HOIST)][:8]
    assert len(tiles) == 2 and len(costly) >= 4

    remembering = new_eff.ContextExtraction
    own = remembering.__mro__[1]
    worked = []
    original = own.get_control_predicate

    def counted(self):
        worked.append(1)
        return original(self)

    monkeypatch.setattr(own, "get_control_predicate", counted)
    ours = (_c_of_each(root, tiles), _c_of_each(tiled, costly))
    with_memo = len(worked)
    worked.clear()
    monkeypatch.setattr(new_eff, "ContextExtraction", own)
    assert (_c_of_each(root, tiles), _c_of_each(tiled, costly)) == ours
    assert all(c is not None for c in ours[0]) and sum(c is not None for c in ours[1]) >= 4
    assert with_memo < len(worked) * 0.6
