"""``schedsearch.tune()`` in a real Jupyter kernel: a proc defined in a cell (its imports in
another cell) is captured, a progress bar is shown, and ``apply()`` finds the result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

CELLS = [
    "from __future__ import annotations\nimport schedsearch\nfrom exo import DRAM, proc",
    "@proc\ndef saxpy(N: size, x: f32[N] @ DRAM, y: f32[N] @ DRAM):\n"
    "    for i in seq(0, N):\n        y[i] += 2.0 * x[i]",
    "result = schedsearch.tune(saxpy, {{'N': 64}}, db={db!r}, max_candidates=3, cost_model='off')\n"
    "print('status', result.status.value, result.search_id)",
    "print('applied', schedsearch.apply(saxpy, {{'N': 64}}, db={db!r}).c_code_str() == result.c_code)",
]


@pytest.fixture
def venv_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A ``python3`` kernel spec that runs this interpreter, found before any other."""
    spec = tmp_path / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Python 3", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    return "python3"


@pytest.mark.slow
def test_tune_a_proc_defined_in_a_notebook_cell(venv_kernel: str, tmp_path: Path) -> None:
    db = str(tmp_path / "notebook.db")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c.format(db=db)) for c in CELLS])
    NotebookClient(nb, kernel_name=venv_kernel, timeout=300, resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [out for cell in nb.cells for out in cell.outputs]
    assert not [out for out in outputs if out.output_type == "error"]
    text = "".join(out.get("text", "") for out in outputs if out.output_type == "stream")
    assert "status completed 1" in text and "applied True" in text, text
    # the bar: an HTML display, updated in place (no ipywidgets needed)
    bars = [out for out in outputs if "<progress" in out.get("data", {}).get("text/html", "")]
    assert bars and bars[0].output_type == "display_data"
    assert "saxpy[N=64]" in bars[0]["data"]["text/html"]
