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
    "ray": ("evaluate/ray_",),  # ray_backend, ray_executor, ray_worker, ray_cluster
    "sqlalchemy": ("store/",),
    "rich": ("cli/",),
    "click": ("cli/",),
    "networkx": ("explore/",),
    "matplotlib": ("explore/",),
    "pandas": ("explore/",),
    "lightgbm": ("model/",),
    "IPython": ("progress.py",),
    "starlette": ("dashboard/",),
    "uvicorn": ("dashboard/",),
    "jinja2": ("dashboard/",),
}
# packages that may use only the shared records (SHARED) and themselves from schedsearch
ISOLATED = ("search", "transforms", "evaluate", "store", "explore", "model")
# modules every package may use: records, errors, the instruction-set tables (all data), and
# the one reading of a search's numbers (its declared best, noise) that every view shares, and
# the stopping rule the search applies and the views read back
SHARED = ("core", "errors", "targets", "numbers", "stopping")
# modules of a package that every package may use too: the features a candidate carries,
# computed where it is made (transforms) and learned from by the model; standard library
# and the records only (``test_shared_modules_use_only_the_records``)
SHARED_MODULES = ("schedsearch.model.features", "schedsearch.model.c_text")
# the fronts: each calls the use cases in app (the composition root), which knows every
# package but them
FRONTS = ("cli", "api", "progress", "dashboard")
# what the Python front may use besides app: data modules and the progress display
API_USES = ("app", "core", "errors", "targets", "numbers", "schedule_file", "progress", "explore")


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
    assert any(p.relative_to(SRC).parts[0] == "core" for p in modules())  # the records' rule has files


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
    if pkg == "core":  # the standard library and core's own modules
        for name in imports(path):
            ok = name.split(".")[0] in sys.stdlib_module_names or name == "__future__"
            assert ok or name.startswith("schedsearch.core."), f"{rel} imports {name}"
    if rel.name in ("targets.py", "numbers.py", "stopping.py", "nodes.py") and pkg is None:  # the standard library and the records
        for name in imports(path):
            ok = name.split(".")[0] in sys.stdlib_module_names or name == "__future__"
            assert ok or name.split(".")[1] in SHARED, f"{rel} imports {name}"
    if pkg not in ISOLATED:
        return
    for name in imports(path):
        if name.startswith("schedsearch."):
            sub = name.split(".")[1]
            assert sub in (*SHARED, pkg) or name in SHARED_MODULES, f"{rel} imports {name}"


@pytest.mark.parametrize("module", SHARED_MODULES)
def test_shared_modules_use_only_the_records(module: str) -> None:
    path = SRC.joinpath(*module.split(".")[1:]).with_suffix(".py")
    for name in imports(path):
        ok = name.split(".")[0] in sys.stdlib_module_names or name == "__future__"
        ok = ok or name.split(".")[1] in SHARED or name in SHARED_MODULES
        assert ok, f"{module} imports {name}"


def test_the_features_load_no_model() -> None:
    """Processes that make candidates compute their features without loading LightGBM."""
    import subprocess

    code = ("import sys, schedsearch.model.features; "
            "print([m for m in ('lightgbm', 'numpy', 'schedsearch.model.gbm') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def _schedsearch_modules(path: Path) -> set[str]:
    return {name.split(".")[1] for name in imports(path) if name.startswith("schedsearch.") and name.count(".") >= 1}


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_only_the_fronts_call_app_and_app_knows_no_front(path: Path) -> None:
    rel = path.relative_to(SRC)
    top = rel.parts[0].removesuffix(".py")
    used = _schedsearch_modules(path)
    if top == "app":
        assert not used & set(FRONTS), f"{rel} imports a front ({sorted(used & set(FRONTS))}); fronts call app"
    elif "app" in used:
        assert top in ("cli", "api"), f"{rel} imports schedsearch.app; only the fronts (cli, api) may"
    if top == "api":
        assert used <= set(API_USES), f"api imports {sorted(used - set(API_USES))}; it goes through app"
    if top == "progress":
        assert used <= set(SHARED), f"progress imports {sorted(used - set(SHARED))}; it renders events only"


def test_the_package_front_door_is_lazy() -> None:
    """``import schedsearch`` loads none of the heavy parts; ``schedsearch.tune`` does."""
    import subprocess

    code = ("import sys, schedsearch; heavy = [m for m in ('exo', 'sqlalchemy', 'ray', 'schedsearch.app') "
            "if m in sys.modules]; print(heavy); schedsearch.tune; print('schedsearch.app' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "True", out
