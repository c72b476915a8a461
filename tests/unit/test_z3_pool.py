"""The pool of z3 solvers Exo's effect analysis uses again (``transforms.z3_pool``)."""

from __future__ import annotations

import pytest
import z3
from exo.rewrite import new_analysis_core

from schedsearch.core import ExpandOptions
from schedsearch.transforms import build_proc, kernel_c, load_workload, propose, try_apply
from schedsearch.transforms import exo_patches
from schedsearch.transforms.exo_patches import codegen as exo_codegen, contexts as exo_contexts, ir_checks, overheads, windows as exo_windows
from schedsearch.transforms.exo_patches.z3_pool import SolverPool
from tests.conftest import EXAMPLES


def test_a_solver_comes_back_empty_with_its_scopes_popped():
    pool = SolverPool(z3, size=2)
    x = z3.Int("x")
    first = pool.acquire()
    first.push()
    first.add(x > 3)
    first.push()  # a check that raised leaves its scopes open
    pool.release(first)
    again = pool.acquire()
    assert again is first and again.num_scopes() == 0 and len(again.assertions()) == 0
    again.push()
    again.add(x < 2)
    assert again.check() == z3.sat  # nothing of "x > 3" is left
    assert (pool.made, pool.reused) == (1, 1)


def test_a_solver_with_a_base_assertion_or_beyond_the_size_is_not_kept():
    pool = SolverPool(z3, size=1)
    asserted = pool.acquire()
    asserted.add(z3.Int("y") == 1)  # at its base level: popping cannot take it away
    pool.release(asserted)
    assert pool.acquire() is not asserted
    kept, extra = pool.acquire(), pool.acquire()
    pool.release(kept)
    pool.release(extra)
    assert pool.acquire() is kept and pool.acquire() is not extra


def _pool() -> SolverPool:
    exo_patches.install()
    return new_analysis_core.z3lib.Solver.__self__


def test_exos_checks_use_the_pools_solvers_and_give_them_back():
    pool = _pool()
    proc = build_proc(load_workload(EXAMPLES / "matmul.py", "sgemm", {"M": 8, "N": 8, "K": 8}))
    before = pool.reused
    checker = new_analysis_core.SMTSolver(verbose=False)
    held = checker.z3slv
    checker.push()
    del checker  # freed with a scope open
    assert pool.acquire() is held and held.num_scopes() == 0
    pool.release(held)
    rewrites = propose(proc, ExpandOptions(target="scalar"))
    assert sum(try_apply(proc, r) is not None for r in rewrites) > 5
    assert pool.reused > before + 5


@pytest.mark.parametrize("target", ["scalar", "avx512"])
def test_the_root_children_are_the_same_with_new_solvers(monkeypatch, target: str):
    """Every child's C (or its being declined) is the same with a new z3 solver per check,
    as Exo makes them, and with the pool's."""
    _pool()
    proc = build_proc(load_workload(EXAMPLES / "matmul.py", "sgemm", {"M": 24, "N": 32, "K": 16}))
    rewrites = propose(proc, ExpandOptions(target=target))

    def each_c() -> list[str | None]:
        return [kernel_c(c) if (c := try_apply(proc, r)) is not None else None for r in rewrites]

    pooled = each_c()
    monkeypatch.setattr(new_analysis_core, "z3lib", z3)
    assert each_c() == pooled and any(pooled)
