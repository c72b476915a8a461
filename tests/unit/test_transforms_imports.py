"""transforms/ imports only the standard library, exo, and schedsearch.core / .errors /
.targets / .model.features (the features every candidate carries; and in exo_patches,
pysmt and asdl_adt: the solver layer and IR classes of Exo whose overheads it removes)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "schedsearch" / "transforms"
ALLOWED_SCHEDSEARCH = {"schedsearch.core", "schedsearch.errors", "schedsearch.targets", "schedsearch.model.features"}
OWN = "schedsearch.transforms"


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            names.add(node.module or "")
    return names


def test_transforms_imports_stay_in_their_room():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) >= 8
    for path in files:
        for name in imported_modules(path):
            top = name.split(".")[0]
            if top == "schedsearch":
                assert name in ALLOWED_SCHEDSEARCH or name.startswith(OWN), f"{path.name} imports {name}"
            else:
                allowed = top == "exo" or top in sys.stdlib_module_names or (top in ("pysmt", "asdl_adt") and path.parent.name == "exo_patches")
                assert allowed, f"{path.name} imports {name}"
