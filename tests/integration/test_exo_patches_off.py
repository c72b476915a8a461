"""Exo with and without schedsearch's patches (``transforms.exo_patches``) gives the same
rewrites, the same legality and the same C byte for byte, on every proc of ``examples/``;
and with them off (``SCHEDSEARCH_EXO_PATCHES=off``) a search runs on unpatched Exo."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.integration.test_normalized_tiles import SEARCHED

#: Every proc of the examples, at sizes small enough to expand in seconds.
PROCS = {
    "matmul.py": {"sgemm": {"M": 64, "N": 64, "K": 64}},
    "conv1d.py": {"conv1d": {"N": 256, "R": 8}},
    "conv1d_mc.py": {"conv1d_mc": {"C": 8, "O": 16, "N": 64, "R": 3}},
    "gemv.py": {name: {"M": 64, "N": 64} for name in ("gemv", "gemv_t", "dgemv", "dgemv_t")},
    "blur.py": {"blur2": {"H": 32, "W": 32}, "blur2_local": {"H": 32, "W": 32}},
    "imatmul.py": {"imatmul": {"M": 32, "N": 32, "K": 32}},
    "matvec.py": {"matvec": {"M": 64, "N": 64}},
    "kernels.py": SEARCHED,
}

#: Procs whose first child is expanded too: a register tile's kernel, a packed and a
#: normalized nest, where the effect analysis and the C backend work hardest.
DEEPER = ["sgemm", "conv1d_mc", "matmul_init"]

#: Expands each proc's root (and the first child of ``DEEPER``); prints what came out, by rewrite.
PROBE = """
import json, sys
from schedsearch.core import ExpandOptions
from schedsearch.transforms import Expander, load_workload, root_candidate
from schedsearch.transforms import exo_patches
from schedsearch.transforms.rules import describe

out = {}
for file, procs in json.loads(sys.argv[1]).items():
    for name, sizes in procs.items():
        expander = Expander(load_workload(f"examples/{file}", name, sizes), ExpandOptions(target="avx2"))
        parent = root_candidate(expander.workload)
        for level in range(2 if name in json.loads(sys.argv[2]) else 1):
            expansion = expander.expand(parent)
            assert not expansion.error, expansion.error
            out[f"{name} {level}"] = {
                "children": sorted([describe(c.schedule.steps[-1]), c.fingerprint] for c in expansion.children),
                "illegal": expansion.illegal,
            }
            if not expansion.children:
                break
            parent = expansion.children[0]
print(json.dumps({"state": exo_patches.state()[0].value, "out": out}))
"""


def _probe(patches: str, procs: dict) -> dict:
    env = {**os.environ, "SCHEDSEARCH_EXO_PATCHES": patches}
    r = subprocess.run([sys.executable, "-c", PROBE, json.dumps(procs), json.dumps(DEEPER)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


# One test per example file: the parallel lane spreads them over its workers.
@pytest.mark.slow
@pytest.mark.parametrize("file", list(PROCS))
def test_every_example_expands_the_same_with_the_patches_off(file: str) -> None:
    on, off = _probe("on", {file: PROCS[file]}), _probe("off", {file: PROCS[file]})
    assert (on["state"], off["state"]) == ("installed", "off")
    assert on["out"].keys() == off["out"].keys() == {
        f"{name} {level}" for name in PROCS[file] for level in range(2 if name in DEEPER else 1)
    }
    for key in on["out"]:
        assert on["out"][key] == off["out"][key], key
    # the comparison compares something: every proc has legal children
    assert all(v["children"] for k, v in on["out"].items() if k.endswith(" 0"))


@pytest.mark.slow
def test_some_rewrite_of_the_examples_is_illegal_so_legality_is_compared() -> None:
    """The comparison above compares legality too: Exo declines some rewrite of an example's
    root (a reorder of the blur's stages)."""
    assert _probe("on", {"blur.py": PROCS["blur.py"]})["out"]["blur2 0"]["illegal"] > 0


@pytest.mark.slow
def test_a_search_runs_with_the_patches_off(tmp_path) -> None:
    code = (
        "import schedsearch, json; from schedsearch.transforms import exo_patches;"
        "r = schedsearch.tune('examples/matmul.py', proc='sgemm', sizes={'M': 64, 'N': 64, 'K': 64},"
        f" db={str(tmp_path / 'off.db')!r}, max_candidates=6, workers=0, seed=0);"
        "import exo.frontend.pattern_match as pm, inspect;"
        "print(json.dumps([exo_patches.state()[0].value, pm.inspect is inspect, r.best is not None]))"
    )
    env = {**os.environ, "SCHEDSEARCH_EXO_PATCHES": "off"}
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == ["off", True, True]
