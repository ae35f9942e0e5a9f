"""Notebooks under notebooks/ run top to bottom (DESIGN.md §1), one per investigation type
(issue 17), and really draw: each shows pictures (PNG outputs of pcapkit.plot figures —
the notebooks themselves assert on the figure objects against the tables)."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat is part of the [test] extra")
nbclient = pytest.importorskip("nbclient", reason="nbclient is part of the [test] extra")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# investigation → (notebook, pictures it must show)
INVESTIGATIONS = {
    "first token held by Nagle": ("investigate_first_token.ipynb", 3),
    "TCP head-of-line blocking under HTTP/2": ("tcp_hol_under_http2.ipynb", 3),
    "HTTP/3 stream HoL vs the same loss over TCP": ("h3_vs_tcp_hol.ipynb", 4),
    "a flow-control stall": ("flow_control_stall.ipynb", 5),
    "connection reuse / resumption": ("connection_reuse_resumption.ipynb", 3),
}
PICTURES = {nb: n for nb, n in INVESTIGATIONS.values()}


def test_one_notebook_per_investigation_and_no_outputs_in_git():
    assert sorted(p.name for p in NOTEBOOKS) == sorted(PICTURES)
    for p in NOTEBOOKS:
        nb = nbformat.read(p, as_version=4)
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), p.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    pngs = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == PICTURES[path.name]
    assert all(len(o["data"]["image/png"]) > 10_000 for o in pngs)  # base64 of a real plot
