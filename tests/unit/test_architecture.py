"""The dependency rules of DESIGN.md, checked on the source: each third party stays in its room."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "schedsearch"

# third-party top-level module -> where it may be imported (paths relative to src/schedsearch)
ROOMS = {
    "exo": ("transforms/",),
    "ray": ("evaluate/ray_backend.py",),
    "sqlalchemy": ("store/",),
    "rich": ("cli/",),
    "click": ("cli/",),
    "networkx": ("explore/",),
    "matplotlib": ("explore/",),
    "pandas": ("explore/",),
    "lightgbm": ("model/",),
}
# packages that may use only the shared records (SHARED) and themselves from schedsearch
ISOLATED = ("search", "transforms", "evaluate", "store", "explore", "model")
# modules every package may use: records, errors, the instruction-set tables (all data), and
# the one reading of a search's numbers (its declared best, noise) that every view shares
SHARED = ("core", "errors", "targets", "numbers")


def imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            names.append("." * node.level + (node.module or ""))
    return names


def modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_there_is_something_to_check() -> None:
    assert len(modules()) > 20


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_third_parties_stay_in_their_rooms(path: Path) -> None:
    rel = str(path.relative_to(SRC))
    for name in imports(path):
        top = name.split(".")[0]
        if top in ROOMS:
            assert rel.startswith(ROOMS[top]), f"{rel} imports {name}; only {ROOMS[top]} may"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_packages_do_not_import_each_other(path: Path) -> None:
    rel = path.relative_to(SRC)
    assert not any(n.startswith(".") for n in imports(path)), f"{rel}: use absolute imports"
    pkg = rel.parts[0] if len(rel.parts) > 1 else None
    if rel.name == "core.py":
        for name in imports(path):
            assert name.split(".")[0] in sys.stdlib_module_names or name == "__future__", f"core imports {name}"
    if rel.name in ("targets.py", "numbers.py") and pkg is None:  # the standard library and the records
        for name in imports(path):
            ok = name.split(".")[0] in sys.stdlib_module_names or name == "__future__"
            assert ok or name.split(".")[1] in SHARED, f"{rel} imports {name}"
    if pkg not in ISOLATED:
        return
    for name in imports(path):
        if name.startswith("schedsearch."):
            sub = name.split(".")[1]
            assert sub in (*SHARED, pkg), f"{rel} imports {name}"
