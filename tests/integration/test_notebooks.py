"""Every notebook in notebooks/ runs headless, top to bottom, without a failing cell."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))

#: Output kinds a notebook must produce, beyond running cleanly.
EXPECTED_OUTPUTS = {"explore_search.ipynb": {"image/png", "text/html"}}


def test_there_are_notebooks_and_they_are_committed_clean():
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOK_DIR}"
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name}: clear the outputs"


@pytest.fixture
def venv_kernel(tmp_path, monkeypatch) -> str:
    """A ``python3`` kernel spec that runs this interpreter, found before any other."""
    spec = tmp_path / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Python 3", "language": "python"})
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    return "python3"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path: Path, venv_kernel: str):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, kernel_name=venv_kernel, timeout=300, resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell

    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert all(cell.execution_count for cell in code)
    outputs = [out for cell in code for out in cell.outputs]
    assert not [out for out in outputs if out.output_type == "error"]
    kinds = {mime for out in outputs for mime in out.get("data", {})}
    missing = EXPECTED_OUTPUTS.get(path.name, set()) - kinds
    assert not missing, f"{path.name} produced no {sorted(missing)} output"
