"""The registry of Exo patches: applied by an expanding process only, all or none, refused
for another Exo, off by a switch; an exception of a patch's own is never Exo declining."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from schedsearch.transforms import exo_patches
from schedsearch.transforms.exo_patches import EXO_VERSION, Patch, ir_checks, mismatch
from schedsearch.transforms.exo_patches.registry import PATCHES
from schedsearch.transforms.replay import rejected_by_exo
from tests.conftest import REPO

#: Prints the state before and after an Expander is made, and whether Exo's parser is patched.
PROBE = """
import inspect, json, sys
from schedsearch.transforms import exo_patches, load_workload, root_candidate
exec(sys.argv[1])  # the test's setup
w = load_workload("examples/matmul.py", "sgemm", {"M": 8, "N": 16, "K": 4})
root_candidate(w)  # C of the unscheduled proc: no expansion
import exo.frontend.pattern_match as pm
before = [exo_patches.state()[0].value, pm.inspect is inspect]
from schedsearch.core import ExpandOptions
from schedsearch.transforms import Expander
Expander(w, ExpandOptions(target="avx2"))
print(json.dumps(before + [exo_patches.state()[0].value, pm.inspect is inspect, exo_patches.message()]))
"""


def _probe(setup: str = "", **env: str) -> list:
    r = subprocess.run([sys.executable, "-c", PROBE, setup], cwd=REPO, env={**os.environ, **env},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_importing_changes_nothing_and_an_expander_installs_every_patch() -> None:
    # "not installed" before: so every fingerprint matched the unpatched Exo
    assert _probe() == ["not installed", True, "installed", False, None]


def test_the_switch_turns_every_patch_off() -> None:
    assert _probe(SCHEDSEARCH_EXO_PATCHES="off") == ["off", True, "off", True, None]


def test_another_exo_is_refused_and_said_once() -> None:
    before_state, before_plain, state, plain, message = _probe("exo_patches._exo_version = lambda: '1.0.1'")
    assert (before_state, before_plain, state, plain) == ("refused", True, "refused", True)
    assert f"written for exo-lang {EXO_VERSION}, and 1.0.1 is installed" in message
    assert "slower" in message


def test_a_replaced_object_that_is_not_the_one_fingerprinted_is_refused() -> None:
    assert mismatch(PATCHES, EXO_VERSION + ".post1").startswith("they were written for exo-lang")
    other = Patch("p", (("exo.rewrite.new_eff:AEnv.translate_win", "0" * 16),), lambda: True)
    assert "p: exo.rewrite.new_eff:AEnv.translate_win is not the one it was written for" in mismatch((other,), EXO_VERSION)
    gone = Patch("q", (("exo.rewrite.new_eff:NoSuchThing", "0" * 16),), lambda: True)
    assert mismatch((gone,), EXO_VERSION) == "q: no exo.rewrite.new_eff:NoSuchThing"


def test_every_patch_names_what_it_replaces() -> None:
    assert len({p.name for p in PATCHES}) == len(PATCHES) >= 9
    assert all(p.replaces and all(len(fp) == 16 or fp.startswith("module ") for _, fp in p.replaces) for p in PATCHES)


def test_an_exception_raised_in_a_patch_is_not_exo_declining() -> None:
    check = ir_checks._remembering(int, False, False, False, ValueError)
    try:
        check("not an int")
    except ValueError as exc:
        from_patch = exc
    assert not rejected_by_exo(from_patch)  # a bug of ours: it propagates
    try:
        int("not an int")
    except ValueError as exc:
        elsewhere = exc
    assert rejected_by_exo(elsewhere)  # the same error from Exo's side is Exo declining


def test_install_is_idempotent() -> None:
    first = exo_patches.install()
    assert exo_patches.install() is first


def test_a_search_session_tells_the_user_once_when_exo_runs_unpatched(monkeypatch) -> None:
    from schedsearch.app.searching import SearchSession

    session = SearchSession.__new__(SearchSession)
    session.lease = None
    monkeypatch.setattr(exo_patches, "_state", exo_patches.State.REFUSED)
    monkeypatch.setattr(exo_patches, "_reason", "they were written for exo-lang 1.0.0, and 1.1.0 is installed")
    assert session.notes == ("Exo runs without schedsearch's speed-ups, slower: they were written for exo-lang "
                             "1.0.0, and 1.1.0 is installed",)
    monkeypatch.setattr(exo_patches, "_state", exo_patches.State.OFF)
    assert session.notes == ()  # turned off on purpose: nothing to tell
