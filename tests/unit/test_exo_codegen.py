"""Exo's C backend with each instruction's window operands compiled once: the same C, byte
for byte, as Exo's own two passes, with half the window compilations."""

from __future__ import annotations

from pathlib import Path

from exo.backend import LoopIR_compiler
from exo.core.LoopIR import LoopIR

from schedsearch.core import ExpandOptions, RewriteKind
from schedsearch.transforms import build_proc, kernel_c, load_workload, propose, try_apply
from schedsearch.transforms import exo_patches
from schedsearch.transforms.exo_patches import codegen as exo_codegen, contexts as exo_contexts, ir_checks, overheads, windows as exo_windows

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def test_installed_in_exos_c_backend():
    assert exo_patches.install() is exo_patches.State.INSTALLED
    assert exo_codegen.expected(LoopIR_compiler)
    compiler = LoopIR_compiler.Compiler
    assert compiler.window_struct_fields.__module__ == exo_codegen.__name__
    assert compiler.comp_s.__module__ == exo_codegen.__name__


def _vectorized_children(target: str):
    root = build_proc(load_workload(EXAMPLES / "matmul.py", "sgemm", {"M": 24, "N": 64, "K": 32}))
    options = ExpandOptions(target=target)
    tiles = [r for r in propose(root, options) if r.kind is RewriteKind.REGISTER_TILE][:2]
    children = [child for r in tiles if (child := try_apply(root, r)) is not None]
    assert len(children) == 2
    return children


def test_vector_kernels_c_is_the_same_with_exos_own_window_compilation(monkeypatch):
    """Register tiles of SGEMM (vector loads, FMAs, broadcasts and stores, every operand a
    window) for AVX-512 and AVX2: each C the same byte for byte with the windows compiled
    once per call and with Exo's own passes, which compile each one twice."""
    exo_patches.install()
    compiler = LoopIR_compiler.Compiler
    own_comp_s, own_fields = compiler.comp_s.__wrapped__, compiler.window_struct_fields.__wrapped__
    compiled = []

    def counted(self, e):
        compiled.append(e)
        return own_fields(self, e)

    children = _vectorized_children("avx512") + _vectorized_children("avx2")
    # monkeypatch puts the installed pair back afterwards
    monkeypatch.setattr(compiler, "comp_s", own_comp_s)
    monkeypatch.setattr(compiler, "window_struct_fields", counted)
    own = [kernel_c(child) for child in children]
    twice = len(compiled)
    compiled.clear()
    exo_codegen.fields_once(compiler, LoopIR.Call)  # on top of the counting one
    assert [kernel_c(child) for child in children] == own
    assert all("_mm" in c for c in own)
    assert 0 < len(compiled) and len(compiled) * 2 == twice


def test_nothing_is_kept_outside_a_call_statement():
    """A window compiled outside a call statement (none in Exo's backend today, but the
    same window object may be met in other scopes) is compiled each time it is asked for."""

    class Compiler:
        def __init__(self) -> None:
            self.compiled = 0

        def comp_s(self, s):
            return [self.window_struct_fields(w) for w in s.windows]

        def window_struct_fields(self, e):
            self.compiled += 1
            return ("data", "strides")

        def comp_fnarg(self, e, fn, i):
            return self.window_struct_fields(e)

    class Call:
        def __init__(self, windows) -> None:
            self.windows = windows

    class Loop(Call):
        pass

    exo_codegen.fields_once(Compiler, Call)
    compiler, window = Compiler(), object()
    compiler.comp_s(Call([window, window, object()]))
    assert compiler.compiled == 2
    compiler.comp_s(Loop([window, window]))
    compiler.window_struct_fields(window)
    assert compiler.compiled == 5
    compiler.comp_s(Call([window]))  # a new statement: compiled anew
    assert compiler.compiled == 6
