"""The example notebook docs/emberlab.ipynb runs end to end (nbclient, a real kernel) and
its cells check their own results."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[3]


def test_example_notebook_runs(tmp_path):
    nb = nbformat.read(ROOT / "docs" / "emberlab.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, errors
    # The pivot table of hit ratios was displayed, and the figure saved.
    texts = [o.get("data", {}).get("text/plain", "") for c in nb.cells if c.cell_type == "code"
             for o in c.get("outputs", [])]
    assert any("s3fifo" in t and "opt" in t for t in texts)
    assert (tmp_path / "notebook-hit-ratio.png").stat().st_size > 5000
    assert "notebook-bad.csv:2" in "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
