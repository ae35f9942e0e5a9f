"""The JSON report is streamed row by row (issue 15: a million-connection capture made one
``json.dumps(indent=2)`` string and ran out of memory), byte for byte what the document
dumped at once would be."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import pcapkit
from pcapkit.report.json import analysis_json, records, write_analysis_json, write_records_json

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("fixture", ["h2_sse_drop", "h3_sse_drop", "nagle_wwr"])
def test_streamed_report_equals_the_document(fixture: str) -> None:
    with pcapkit.open(ROOT / "fixtures" / fixture / "client.pcapng") as t:
        out = io.StringIO()
        write_analysis_json(t, out)
        assert out.getvalue() == json.dumps(analysis_json(t), indent=2) + "\n"
        for table in ("records", "requests", "flows", "anomalies"):
            df = getattr(t, table)
            out = io.StringIO()
            write_records_json(df, out)
            assert out.getvalue() == json.dumps(records(df), indent=2) + "\n"
            out = io.StringIO()
            write_records_json(df.iloc[:0], out)
            assert out.getvalue() == "[]\n"


def test_streamed_report_keeps_flow_narrowing_and_join_keys() -> None:
    """``--flow`` narrowing (main's ``analysis_json(only_flows)``) and the join keys survive
    the streamed writer, and the CLI prints exactly the document."""
    from click.testing import CliRunner

    from pcapkit.cli import cli

    path = ROOT / "fixtures" / "h2_sse_drop" / "client.pcapng"
    with pcapkit.open(path) as t:
        flow = int(t.requests.flow.iloc[0])
        n_requests = int((t.requests.flow == flow).sum())
        out = io.StringIO()
        write_analysis_json(t, out, only_flows={flow})
        assert out.getvalue() == json.dumps(analysis_json(t, only_flows={flow}), indent=2) + "\n"
        whole = json.dumps(analysis_json(t), indent=2) + "\n"
    doc = json.loads(out.getvalue())
    assert [r["flow"] for r in doc["flows"]] == [flow]
    assert len(doc["requests"]) == n_requests > 0
    for key in ("tls", "quic", "requests"):
        assert all(r["flow"] == flow for r in doc[key]), key
    assert all("request" in r for r in doc["requests"] + doc["findings"])
    assert doc["findings"] and any(r["request"] is not None for r in doc["findings"])
    r = CliRunner().invoke(cli, ["analyze", str(path), "--format", "json"])
    assert r.exit_code == 0 and r.stdout == whole


def test_one_walk_writer_equals_to_jsonable_then_dump() -> None:
    """The streamed writer converts and writes each value in one walk
    (``_dump_jsonable``): the same text as ``to_jsonable`` then ``json.dumps(indent=2)``
    for every kind of value a table cell can hold."""
    from http import HTTPStatus  # an IntEnum: an int subclass

    import numpy as np
    import pandas as pd

    from pcapkit.report.json import _dump_jsonable, to_jsonable

    values = [
        1,
        -0.0,
        float("nan"),
        float("inf"),
        -float("inf"),
        True,
        None,
        pd.NA,
        pd.NaT,
        "é\x00\x7f",
        np.int32(7),
        np.float32(0.5),
        np.float64("nan"),
        np.bool_(False),
        (1, "a"),
        [],
        {},
        np.array([1, 2]),
        np.zeros((2, 2)),
        np.array([], np.int64),
        {"a": [1, {"b": np.int64(3), "c": [float("nan"), pd.NA]}], "d": (np.float64(2.5),)},
        {1: "int key", "1": "text key"},  # to_jsonable's str(k) keeps the last
        {np.int64(2): [np.uint8(1)]},
        # the fast paths (_dump_items, the dict values): only ints, only strs, mixed
        [3, -1, 10**20],
        (0, 7),
        ["a", "é\x00", ""],
        [1, True],
        [True, False],
        [1, 2.5, None, "x"],
        [HTTPStatus.OK, 1],
        {"s": "é", "i": 2**70, "n": None, "f": float("nan"), "g": -float("inf")},
        {"z": -0.0, "b": True, "e": HTTPStatus.OK, "u": np.uint16(3), "l": [1, 2], "t": ("a",)},
    ]
    for v in values:
        for pad in ("", "    "):
            want = json.dumps(to_jsonable(v), indent=2).replace("\n", "\n" + pad)
            assert _dump_jsonable(v, pad) == want, v
    df = pd.DataFrame(
        {
            "i": pd.array([1, None], dtype="Int64"),
            "f": [0.5, float("nan")],
            "s": pd.array(["x", None], dtype="string"),
            "c": pd.Categorical(["a", "b"]),
            "o": [{"k": np.int64(1)}, [np.float64("nan")]],
        }
    )
    out = io.StringIO()
    write_records_json(df, out)
    assert out.getvalue() == json.dumps(records(df), indent=2) + "\n"
