"""The columnar JSON writer (issue 16: tables encoded column by column, containers of
plain values by the C encoder) writes the bytes of the row-by-row writer it replaced,
kept as the oracle in json_oracle.py — on real captures and on what a capture can put in
a cell: attacker-controlled text (quotes, backslashes, control characters, the writer's
own separators), NaN and ±inf, numpy and pandas scalars, empty tables and containers,
keys that are not text."""

from __future__ import annotations

import io
import json
import random
from enum import IntEnum
from typing import Any

import json_oracle as oracle
import numpy as np
import pandas as pd
import pytest

from pcapkit.report import json as columnar


class Code(IntEnum):
    OK = 200


class Text(str):
    pass


# strings a capture controls (an SNI, a path, a header): JSON escapes, the C encoder's
# separators and the writer's re-indentation patterns inside a string
HOSTILE = [
    "",
    '"',
    "\\",
    '\\"',
    "a\nb",
    "\r\t\x00\x1f\x7f",
    "é中𝄞",
    "\ud800",  # a lone surrogate
    "},\n      {",
    "},\n    {",
    '"},\n      {"x": 1',
    "[{",
    "}]",
    "\x00",
    ",\n",
    "{\n  }",
    "frame.number in {1, 2}",
    "NaN",
    "Infinity",
    "null",
]

SCALARS: list[Any] = [
    0,
    -1,
    10**30,
    True,
    False,
    None,
    0.1,
    -0.0,
    1e300,
    float("nan"),
    float("inf"),
    -float("inf"),
    np.int64(7),
    np.int8(-3),
    np.uint64(2**63),
    np.float32(0.5),
    np.float64(2.5),
    np.float64("nan"),
    np.float64("inf"),
    np.bool_(True),
    pd.NA,
    pd.NaT,
    Code.OK,
    Text("sub"),
    *HOSTILE,
]


def _outcome(write: Any, *args: Any) -> tuple[str, Any]:
    """What a writer wrote, or the type of what it raised (a value the old writer could
    not write, a Timestamp, must fail the same way, not be written)."""
    out = io.StringIO()
    try:
        text = write(*args, out)
    except (TypeError, ValueError) as exc:
        return "raised", type(exc)
    return "wrote", out.getvalue() if text is None else text


def _same_value(v: Any) -> None:
    for pad in ("", "    ", "      "):
        want = _outcome(lambda x, _, p=pad: oracle._dump_jsonable(x, p), v)
        assert _outcome(lambda x, _, p=pad: columnar._enc(x, p), v) == want, (v, pad)


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth > 3 or r < 0.45:
        return rng.choice(SCALARS)
    if r < 0.6:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if r < 0.65:
        return tuple(_random_value(rng, depth + 1) for _ in range(rng.randrange(3)))
    if r < 0.75:  # a list of flat dicts of one shape: the one-call path
        keys = rng.sample(["frame", "role", "ts_ns", *HOSTILE[:6]], 3)
        return [
            {k: rng.choice(SCALARS[:12] + HOSTILE) for k in keys}
            for _ in range(rng.randrange(1, 5))
        ]
    if r < 0.8:
        return np.array([rng.randrange(9) for _ in range(rng.randrange(3))])
    keys: list[Any] = [rng.choice(HOSTILE + ["k", "v"]) for _ in range(rng.randrange(4))]
    if rng.random() < 0.2:
        keys.append(rng.choice([1, 2, True, None, 1.5, np.int64(3), "1"]))
    return {k: _random_value(rng, depth + 1) for k in keys}


@pytest.mark.parametrize("v", SCALARS, ids=repr)
def test_scalars(v: Any) -> None:
    _same_value(v)
    _same_value([v])
    _same_value([v, 1])
    _same_value({"k": v})
    _same_value({"k": v, "n": [v]})
    _same_value([{"a": v, "b": "x"}, {"a": 1, "b": "y"}])
    _same_value({1: v, 2: 3})


def test_containers() -> None:
    for v in [
        [],
        {},
        (),
        [[]],
        [{}],
        [{}, {"a": 1}],
        [{"a": 1}, {}],
        [{"a": 1}, {"a": [1]}],  # a nested list in a list of dicts
        [{"a": 1}, [1]],
        [{"a": {"b": 1}}],
        {"a": {}, "b": [], "c": [{}]},
        {1: "int key", "1": "text key"},  # to_jsonable's str(k) keeps the last
        {True: 1, 2: 2},
        {None: 1},
        {1.5: 2},
        {float("nan"): 1},
        {np.int64(2): [np.uint8(1)]},
        {2: {"a": 1}},
        {3: 1, 1: 2, 10**20: 3},
        [np.array([1, 2]), np.zeros((2, 2)), np.array([], np.int64)],
        {"a": np.array([0.5, np.nan])},
        [{"frame": 1, "role": h, "ts_ns": 2} for h in HOSTILE],
        [{h: 1} for h in HOSTILE],
        {h: h for h in HOSTILE},
        HOSTILE,
        tuple(HOSTILE),
        [{"a": 1, "b": float("nan")}, {"a": 2, "b": 0.5}],
        [{"a": 1, "b": float("inf")}],
        [1, 2, float("-inf")],
        [Code.OK, 1],
        [Text("a"), "b"],
        {"a": Text("x")},
        [{"a": Code.OK}],
    ]:
        _same_value(v)


def test_random_nested_values() -> None:
    rng = random.Random(16)
    for _ in range(3000):
        _same_value(_random_value(rng))


def _tables() -> list[pd.DataFrame]:
    n = 7
    arrow = [h for h in HOSTILE if h != "\ud800"]  # Arrow strings are UTF-8: no lone surrogate
    hostile = (arrow * 2)[:n]
    return [
        pd.DataFrame(),
        pd.DataFrame({"a": pd.array([], dtype="Int64")}),
        pd.DataFrame(index=range(3)),  # rows, no columns
        pd.DataFrame({"a": range(n), "b": hostile}),
        pd.DataFrame({"o": pd.Series(HOSTILE, dtype=object)}),
        pd.DataFrame(
            {
                "i": np.arange(n, dtype=np.int64) * 10**15,
                "u": np.arange(n, dtype=np.uint8),
                "b": np.arange(n) % 2 == 0,
                "f": np.array([0.5, np.nan, np.inf, -np.inf, -0.0, 1e-300, 3.0]),
                "f32": np.array([0.1, np.nan, 2, 3, 4, 5, 6], dtype=np.float32),
                "I": pd.array([1, None, 3, None, 5, 6, 7], dtype="Int64"),
                "I8": pd.array([1, None, 3, None, 5, 6, 7], dtype="Int8"),
                "F": pd.array([0.5, None, 1.5, 2, 3, 4, 5], dtype="Float64"),
                "B": pd.array([True, None, False, True, None, False, True], dtype="boolean"),
                "s": pd.array(["x", None, *hostile[:5]], dtype="str"),
                "S": pd.array(["x", None, *hostile[:5]], dtype="string"),
                "c": pd.Categorical(["a", "b", None, "a", "b", "a", "b"]),
                "o": [
                    {"k": np.int64(1)},
                    [np.float64("nan")],
                    None,
                    {"victims": [{"offset": 1, "wait_ms": 0.5}] * 3},
                    (1, "a"),
                    {3: 4},
                    "plain",
                ],
                "frames": [[1, 2, 3], [], [4], [5, 6], [7], [8, 9], [10]],
            }
        ),
        # Timestamps: neither writer can write them (the same error)
        pd.DataFrame({"a": range(n), "t": pd.to_datetime(np.arange(n), unit="s")}),
        # a Float64 column holding NaN and inf that are values, not missing
        pd.DataFrame(
            {
                "F": pd.arrays.FloatingArray(
                    np.array([np.nan, np.inf, 1.5]), np.array([False, False, True])
                )
            }
        ),
        pd.DataFrame([[1, 2], [3, 4]], columns=["a", "a"]),  # a label twice
        pd.DataFrame([[1, 2], [3, 4]], columns=[0, 1]),  # labels that are not text
        pd.DataFrame([[1, 2]], columns=["a", 1]),
        pd.DataFrame({h: [1, 2] for h in arrow}),
    ]


@pytest.mark.parametrize(("first", "size"), [(1, 1), (3, 200), (16, 1 << 19)])
def test_tables(first: int, size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of one row, of a few, of all the table: the same text."""
    monkeypatch.setattr(columnar, "CHUNK_FIRST", first)
    monkeypatch.setattr(columnar, "CHUNK_BYTES", size)
    for df in _tables():
        got = _outcome(columnar.write_records_json, df)
        assert got == _outcome(oracle.write_records_json, df), df
        if got[0] == "wrote":  # and it is the JSON of the rows
            assert len(json.loads(got[1])) == len(df)
        # the analyze document's rows (another indentation)
        got = _outcome(lambda d, fp: columnar._write_table(fp, d, "    ", "\n  ]"), df)
        assert got == _outcome(lambda d, fp: oracle._write_rows(fp, oracle._raw_records(d)), df)
    assert [_outcome(columnar.write_records_json, df)[0] for df in _tables()].count("raised") == 1
