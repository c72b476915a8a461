"""The Exo overheads removed in-process, and the scoped instruction replacement: same
results as Exo's own paths, which are kept here as the reference."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from exo import SchedulingError
from exo.frontend import pattern_match
from exo.rewrite import new_analysis_core
from exo.stdlib import scheduling

from schedsearch.core import ExpandOptions, RewriteKind
from schedsearch.transforms import build_proc, exo_overheads, kernel_c, load_workload, propose, try_apply
from schedsearch.transforms import calls as calls_module

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def test_installed_on_exo_1_0_0():
    assert exo_overheads.install() is True
    assert pattern_match.inspect is not inspect
    assert new_analysis_core._get_smt_solver.__module__ == exo_overheads.__name__


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

    def c_of_each() -> list[str | None]:
        out = []
        for rewrite in rewrites:
            child = try_apply(root, rewrite)
            out.append(kernel_c(child) if child is not None else None)
        return out

    scoped = c_of_each()
    monkeypatch.setitem(calls_module.HELPERS, "replace_in",
                        lambda p, loops, instrs: scheduling.replace_all(p, list(instrs)))
    assert c_of_each() == scoped
    assert any(c is not None and "_mm" in c for c in scoped)  # instructions really were placed
