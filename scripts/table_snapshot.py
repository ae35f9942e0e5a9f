"""Snapshot every table of every capture, and diff two snapshots.

A refactor that must change no result is checked with this script: take a snapshot
before, one after, and diff them.

    python scripts/table_snapshot.py save /tmp/before      # fixtures, corpus, realworld
    python scripts/table_snapshot.py save /tmp/after
    python scripts/table_snapshot.py diff /tmp/before /tmp/after
    python scripts/table_snapshot.py diff --values /tmp/before /tmp/after  # dtype changes

Captures: every ``fixtures/*/*.pcapng`` (with their embedded keys, and once more with
``embedded_keys=False``), every capture under ``../shared/corpus`` (with its key log
where MANIFEST names one) and under ``../shared/realworld``.  Tables: packets, flows,
segments, anomalies, records, tls, quic, messages, requests, gaps, findings, and the
text and JSON reports of ``pcapkit analyze`` (the JSON both as a document and as the
bytes the streamed writer emits).  A table whose build raises is stored as
the exception's type and message, so a crash before and after compares equal and a
new one shows up.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pickle
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
TABLES = (
    "packets",
    "flows",
    "segments",
    "anomalies",
    "records",
    "tls",
    "quic",
    "messages",
    "requests",
    "gaps",
    "findings",
)
CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz", ".cap")

# corpus captures whose key log is a separate file (MANIFEST.md)
CORPUS_KEYS = {
    "wireshark/tls13-rfc8446.pcap": "wireshark/keys/tls13-rfc8446.keys",
    "wireshark/tls12-chacha20poly1305.pcap": "wireshark/keys/tls12-chacha20poly1305.keys",
    "wireshark/http2-data-reassembly.pcap": "wireshark/keys/http2-data-reassembly.keys",
    "illustrated-tls12/capture.pcap": "illustrated-tls12/keylog.txt",
    "illustrated-tls13/capture.pcap": "illustrated-tls13/keylog.txt",
    "illustrated-quic/capture.pcap": "illustrated-quic/keylog.txt",
}


def cases() -> Iterator[tuple[str, Path, str | None, dict[str, Any]]]:
    """(name, path, keylog, open kwargs) of every capture to snapshot."""
    for p in sorted((ROOT / "fixtures").glob("*/*.pcapng")):
        rel = p.relative_to(ROOT).as_posix()
        yield rel, p, None, {}
        yield rel + "#nokeys", p, None, {"embedded_keys": False}
    corpus = SHARED / "corpus"
    if corpus.is_dir():
        for p in sorted(corpus.rglob("*")):
            if p.is_file() and p.name.endswith(CAPTURE_SUFFIXES):
                rel = p.relative_to(corpus).as_posix()
                key = CORPUS_KEYS.get(rel)
                yield "corpus/" + rel, p, None, {}
                if key:
                    yield "corpus/" + rel + "#keys", p, str(corpus / key), {}
    real = SHARED / "realworld"
    if real.is_dir():
        for p in sorted(real.rglob("*")):
            if p.is_file() and p.name.endswith(CAPTURE_SUFFIXES):
                yield "realworld/" + p.relative_to(real).as_posix(), p, None, {}


def _error(e: BaseException) -> dict[str, str]:
    return {"error": f"{type(e).__name__}: {e}"}


def snapshot_one(path: Path, keylog: str | None, kwargs: dict[str, Any]) -> dict[str, Any]:
    import pcapkit
    from pcapkit.report.json import analysis_json, write_analysis_json
    from pcapkit.report.text import analysis_text, records_text, requests_text

    out: dict[str, Any] = {}
    try:
        t = pcapkit.open(path, keylog, **kwargs)
    except Exception as e:  # noqa: BLE001 - a whole-file error is a result too
        return {"open": _error(e)}
    with t:
        for name in TABLES:
            try:
                out[name] = getattr(t, name).copy()
            except Exception as e:  # noqa: BLE001
                out[name] = _error(e)
        try:
            out["json"] = json.dumps(analysis_json(t), sort_keys=True, default=str)
        except Exception as e:  # noqa: BLE001
            out["json"] = _error(e)
        try:  # the bytes `pcapkit analyze --format json` writes (streamed writer)
            buf = io.StringIO()
            write_analysis_json(t, buf, findings=t.findings)
            out["json_stream"] = buf.getvalue()
        except Exception as e:  # noqa: BLE001
            out["json_stream"] = _error(e)
        for key, fn in (
            ("text", lambda: analysis_text(t, max_flows=None)),
            ("records_text", lambda: records_text(t)),
            ("requests_text", lambda: requests_text(t)),
        ):
            try:
                out[key] = fn()
            except Exception as e:  # noqa: BLE001
                out[key] = _error(e)
    return out


def _fname(name: str) -> str:
    return name.replace("/", "__").replace("#", "--") + ".pkl"


def save(dest: Path, only: str | None) -> int:
    dest.mkdir(parents=True, exist_ok=True)
    n = 0
    for name, path, keylog, kwargs in cases():
        if only and only not in name:
            continue
        try:
            snap = snapshot_one(path, keylog, kwargs)
        except Exception:  # noqa: BLE001
            snap = {"crash": traceback.format_exc()}
        snap["_where"] = {"root": str(ROOT), "shared": str(SHARED)}
        with open(dest / _fname(name), "wb") as f:
            pickle.dump(snap, f)
        n += 1
        errs = [k for k, v in snap.items() if isinstance(v, dict) and ("error" in v)]
        print(f"{name}: {'errors in ' + ','.join(errs) if errs else 'ok'}", flush=True)
    print(f"{n} captures saved to {dest}")
    return 0


# (table, column, dtype before, dtype after) → captures where only the dtype changed
# (``diff --values``: a deliberate schema change that keeps every value)
DTYPE_ONLY: dict[tuple[str, str, str, str], int] = {}


def _same(a: Any, b: Any, table: str = "", values: bool = False) -> str | None:
    """None when equal, else a short description of the first difference.  With
    ``values``, a column whose values are equal at another dtype is not a difference
    (it is counted in :data:`DTYPE_ONLY`)."""
    if isinstance(a, pd.DataFrame) and isinstance(b, pd.DataFrame):
        if list(a.columns) != list(b.columns):
            return f"columns {list(a.columns)} != {list(b.columns)}"
        if len(a) != len(b):
            return f"{len(a)} rows != {len(b)} rows"
        for c in a.columns:
            try:
                pd.testing.assert_series_equal(a[c], b[c], check_exact=True)
            except AssertionError as e:
                if values and a[c].dtype != b[c].dtype:
                    try:
                        pd.testing.assert_series_equal(
                            a[c], b[c], check_exact=True, check_dtype=False
                        )
                    except AssertionError:
                        pass
                    else:
                        key = (table, str(c), str(a[c].dtype), str(b[c].dtype))
                        DTYPE_ONLY[key] = DTYPE_ONLY.get(key, 0) + 1
                        continue
                return f"column {c}: {str(e).splitlines()[0:6]}"
        return None
    if type(a) is not type(b):
        return f"{type(a).__name__} != {type(b).__name__}"
    if a != b:
        if isinstance(a, str):
            for i, (x, y) in enumerate(zip(a, b, strict=False)):
                if x != y:
                    return f"differs at char {i}: {a[max(0, i - 60) : i + 60]!r} vs {b[max(0, i - 60) : i + 60]!r}"
            return f"length {len(a)} != {len(b)}"
        return f"{a!r:.200} != {b!r:.200}"
    return None


def _unrooted(snap: dict[str, Any]) -> dict[str, Any]:
    """The report texts with the tree's and the shared directory's paths (where the
    snapshot was taken: a copy of the tree elsewhere compares equal) as ``<root>`` and
    ``<shared>``."""
    where = snap.get("_where", {"root": str(ROOT), "shared": str(SHARED)})
    out = {}
    for k, v in snap.items():
        if isinstance(v, str):
            v = v.replace(where["shared"], "<shared>").replace(where["root"], "<root>")
        elif isinstance(v, pd.DataFrame) and k == "anomalies" and "detail" in v.columns:
            v = v.copy()  # a key log's path in its anomaly's detail
            v["detail"] = v["detail"].str.replace(where["shared"], "<shared>", regex=False)
        out[k] = v
    return out


def diff(a_dir: Path, b_dir: Path, values: bool = False) -> int:
    names = sorted({p.name for p in a_dir.glob("*.pkl")} | {p.name for p in b_dir.glob("*.pkl")})
    bad = 0
    for nm in names:
        pa, pb = a_dir / nm, b_dir / nm
        if not pa.exists() or not pb.exists():
            print(f"{nm}: only in {'after' if not pa.exists() else 'before'}")
            bad += 1
            continue
        with open(pa, "rb") as f:
            a = _unrooted(pickle.load(f))
        with open(pb, "rb") as f:
            b = _unrooted(pickle.load(f))
        for k in sorted((set(a) | set(b)) - {"_where"}):
            why = _same(a.get(k), b.get(k), k, values)
            if why:
                print(f"{nm} {k}: {why}")
                bad += 1
    for (table, col, da, db), n in sorted(DTYPE_ONLY.items()):
        print(f"dtype only (values equal): {table}.{col} {da} -> {db} in {n} captures")
    print(f"{len(names)} captures compared, {bad} differences")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save")
    s.add_argument("dest", type=Path)
    s.add_argument("--only", help="only captures whose name contains this")
    d = sub.add_parser("diff")
    d.add_argument("before", type=Path)
    d.add_argument("after", type=Path)
    d.add_argument(
        "--values",
        action="store_true",
        help="a column whose values are equal at another dtype is listed, not a difference",
    )
    args = ap.parse_args()
    os.environ.setdefault("PCAPKIT_THREADS", "2")
    sys.path.insert(0, str(ROOT))
    if args.cmd == "save":
        return save(args.dest, args.only)
    return diff(args.before, args.after, args.values)


if __name__ == "__main__":
    raise SystemExit(main())
