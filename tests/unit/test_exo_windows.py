"""Exo's effect analysis with each ``let``'s windows composed once: the same answers, the
same procs and C as with Exo's own ``translate_win``, and the work done once."""

from __future__ import annotations

from exo.rewrite import new_eff

from schedsearch.transforms import kernel_c, try_apply
from schedsearch.transforms import exo_patches
from schedsearch.transforms.exo_patches import codegen as exo_codegen, contexts as exo_contexts, ir_checks, overheads, windows as exo_windows


class _Env:
    """A stand-in for ``AEnv``: its windows are a dictionary to add."""

    def __init__(self, windows: dict) -> None:
        self.windows = windows


def _counting():
    worked: list[tuple[object, dict]] = []

    def translate_win(env, winmap):
        worked.append((env, winmap))
        return {**winmap, **env.windows}

    return translate_win, worked


def test_one_composition_per_environment_and_incoming_map():
    translate, worked = _counting()
    once = exo_windows.translating_once(translate)
    env = _Env({"w": 1})
    first = once(env, {})
    assert once(env, {}) is first  # a new empty map is empty: the walks all start from one
    inner = once(_Env({"v": 2}), first)
    assert inner == {"w": 1, "v": 2}
    assert len(worked) == 2
    assert once(env, {"u": 0}) == {"u": 0, "w": 1}  # another incoming map: worked out
    assert once(env, dict(first)) == first  # an equal map, but another object: worked out anew
    assert once(_Env({"w": 1}), {}) is not first  # an equal environment, another object
    assert len(worked) == 5


def test_only_the_latest_answers_are_kept():
    translate, worked = _counting()
    once = exo_windows.translating_once(translate, kept=2)
    a, b, c = _Env({}), _Env({}), _Env({})
    for env in (a, b, c, a):  # c fills the third place: everything kept before is dropped
        once(env, {})
    assert [env for env, _ in worked] == [a, b, c, a]


def test_installed_in_exos_effect_analysis():
    assert exo_patches.install() is exo_patches.State.INSTALLED
    assert exo_windows.expected(new_eff)
    assert new_eff.AEnv.translate_win.__module__ == exo_windows.__name__


def _c_of_each(proc, rewrites) -> list[str | None]:
    return [kernel_c(child) if (child := try_apply(proc, r)) is not None else None for r in rewrites]


def test_a_register_tiled_nodes_children_are_the_same_with_exos_own_translation(monkeypatch, tiled_and_costly):
    """The reorders, sinks and packs of a register tile - whose checks walk the longest
    chains of ``let``s, with windows for the vector instructions - composing windows once and
    with Exo's own ``translate_win``: the same C byte for byte, the same refusals, and far
    fewer compositions worked out."""
    exo_patches.install()
    tiled, rewrites = tiled_and_costly
    once = new_eff.AEnv.translate_win
    own = once.__wrapped__
    worked = []

    def counted(env, winmap):
        worked.append(1)
        return own(env, winmap)

    monkeypatch.setattr(new_eff.AEnv, "translate_win", exo_windows.translating_once(counted))
    ours = _c_of_each(tiled, rewrites)
    composed_once = len(worked)
    worked.clear()
    monkeypatch.setattr(new_eff.AEnv, "translate_win", counted)
    assert _c_of_each(tiled, rewrites) == ours
    assert sum(c is not None for c in ours) >= 3
    assert 0 < composed_once < len(worked) * 0.5
