"""Many captures on Dask into Parquet datasets (issue 20).

``pcapkit batch INPUTS… --out DATASET/`` analyses each input — a file, a glob, a
directory (its capture files, recursively), e.g. the shards of ``pcapkit shard`` — as one
Dask task and writes every table as a Parquet dataset, ``DATASET/<table>/``, one part
file per input (empty tables too, so every directory has the columns), each row carrying ``capture`` (the input's path as given or as the glob
or directory expanded it) and ``shard`` (K for ``shard-K.pcapng``, else null), so
``pandas.read_parquet("DATASET/findings")``, DuckDB
(``read_parquet('DATASET/findings/*.parquet')``) or Polars answer fleet questions.

* The cluster: a :class:`distributed.LocalCluster` of ``workers`` processes (one thread
  each: the analysis is mostly Python and holds the GIL) by default, or the running
  scheduler at ``scheduler`` (``tcp://host:8786``) — the same code path from the
  :class:`distributed.Client` on.  Workers must see the inputs and ``DATASET`` at the
  same paths (a shared file system) and have pcapkit installed.
* Idempotent: an input's part files are named by a digest of its absolute path
  (``part-<path>-<version>.parquet``, the version a digest of its size and mtime) and
  ``DATASET/_done/<path>-<version>.json`` is written last; a re-run skips the inputs whose
  marker is there, and an input that changed replaces its old parts.
* A failed input (not a capture, unreadable, pcapkit failed as a whole) is reported on
  stderr and in ``DATASET/_errors.jsonl`` (this run's failures); the rest goes on, and
  the run's exit status says that some failed.
* Nested columns: ``frames`` (and ``*_frames``) are lists of integers; the other nested
  columns (evidence, details, header lists) are JSON text, so every part file of a table
  has the same schema whatever its rows hold (``json_extract`` in DuckDB).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import resource
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import schema
from .export.tables import with_datetimes
from .report.json import to_jsonable

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".pcap.gz", ".pcapng.gz", ".cap.gz")
SHARD_RE = re.compile(r"^shard-(\d+)\.pcapng$")
DONE = "_done"
ERRORS = "_errors.jsonl"
# Tables written by default: every table of the schema.  ``packets`` is one row per
# frame (as big as the captures' headers): ask for it by name when it is wanted.
DEFAULT_SKIP = ("packets",)


def default_tables() -> list[str]:
    return [t for t in schema.SCHEMAS if t not in DEFAULT_SKIP]


def expand_inputs(inputs: Iterable[str]) -> list[str]:
    """Files, globs and directories → capture paths (in the order given, each once;
    a directory's and a glob's captures sorted).  A name that matches nothing stays, so
    its task fails and says so."""
    out: list[str] = []
    seen: set[str] = set()

    def add(p: str) -> None:
        if p not in seen:
            seen.add(p)
            out.append(p)

    for item in inputs:
        if os.path.isdir(item):
            for root, dirs, files in os.walk(item):
                dirs.sort()
                for name in sorted(files):
                    if name.endswith(CAPTURE_SUFFIXES):
                        add(os.path.join(root, name))
        elif os.path.exists(item):
            add(item)
        elif glob.has_magic(item):
            for p in sorted(glob.glob(item, recursive=True)):
                if os.path.isfile(p):
                    add(p)
        else:
            add(item)
    return out


def shard_number(path: str) -> int | None:
    m = SHARD_RE.match(os.path.basename(path))
    return int(m.group(1)) if m else None


def _digest(text: str, n: int) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:n]


def input_id(path: str) -> tuple[str, str]:
    """(path digest, version digest) of an input: its absolute path; its size and mtime."""
    ident = _digest(os.path.abspath(path), 16)
    try:
        st = os.stat(path)
        version = _digest(f"{st.st_size}:{st.st_mtime_ns}", 8)
    except OSError:
        version = "missing"
    return ident, version


def is_done(out: Path, path: str) -> bool:
    ident, version = input_id(path)
    return (out / DONE / f"{ident}-{version}.json").is_file()


def _json_text(v: Any) -> str | None:
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return None
    return json.dumps(to_jsonable(v), sort_keys=True)


def arrow_table(df: pd.DataFrame) -> Any:
    """``df`` as a pyarrow Table whose schema does not depend on the rows (see the
    module docstring: lists of frames, JSON text for the other nested columns)."""
    import pyarrow as pa

    # categories as plain strings: an empty categorical column has no Arrow type
    cats = [c for c in df.columns if isinstance(df[c].dtype, pd.CategoricalDtype)]
    if cats:
        df = df.astype({c: "string" for c in cats})
    nested = [str(c) for c in df.columns if df[c].dtype == object]
    table = pa.Table.from_pandas(df.drop(columns=nested), preserve_index=False)
    for c in nested:
        values = df[c].tolist()
        if c == "frames" or c.endswith("_frames"):
            col = pa.array(
                [
                    None if not isinstance(v, (list, tuple, np.ndarray)) else [int(x) for x in v]
                    for v in values
                ],
                type=pa.list_(pa.int64()),
            )
        else:
            col = pa.array([_json_text(v) for v in values], type=pa.string())
        table = table.append_column(c, col)
    return table.select([str(c) for c in df.columns])


def _tagged(df: pd.DataFrame, capture: str, shard: int | None) -> pd.DataFrame:
    df = with_datetimes(df)
    df.insert(0, "shard", pd.array([shard] * len(df), dtype="Int64"))
    df.insert(0, "capture", pd.array([capture] * len(df), dtype="string"))
    return df


def analyze_one(
    path: str,
    file: str,
    out: str,
    tables: Sequence[str],
    keylog: str | None = None,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One task: analyse ``file`` (``path`` as the user gave it: the ``capture`` column),
    write its part file of every table, then its done marker.  Returns a summary; a
    whole-file failure is returned, never raised."""
    import pyarrow.parquet as pq

    from .errors import PcapkitError
    from .trace import Trace

    # the parallelism is the workers': one thread per analysis (pcapkit._parallel would
    # start a thread per core in every worker process), unless the user says otherwise
    os.environ.setdefault("PCAPKIT_THREADS", "1")
    t0 = time.perf_counter()
    ident, version = input_id(file)
    base = Path(out)
    rows: dict[str, int] = {}
    try:
        with Trace(file, keylog, thresholds=settings) as trace:
            shard = shard_number(path)
            for name in tables:
                df = _tagged(getattr(trace, name), path, shard)
                d = base / name
                d.mkdir(parents=True, exist_ok=True)
                for old in d.glob(f"part-{ident}-*.parquet"):  # an older version of this input
                    old.unlink(missing_ok=True)
                # written when empty too: every table directory reads with its columns
                tmp = d / f".part-{ident}-{version}.parquet.tmp"
                pq.write_table(arrow_table(df), tmp)
                os.replace(tmp, d / f"part-{ident}-{version}.parquet")
                rows[name] = len(df)
            frames = trace.frames
    except (PcapkitError, OSError, ValueError, RuntimeError, MemoryError) as exc:
        return {"capture": path, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    summary = {
        "capture": path,
        "ok": True,
        "shard": shard,
        "frames": frames,
        "rows": rows,
        "seconds": round(time.perf_counter() - t0, 3),
        # peak resident memory of this worker process so far (Linux: KiB)
        "worker_max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "pid": os.getpid(),
    }
    done = base / DONE
    done.mkdir(parents=True, exist_ok=True)
    for old in done.glob(f"{ident}-*.json"):
        old.unlink(missing_ok=True)
    tmp = done / f".{ident}-{version}.json.tmp"
    tmp.write_text(json.dumps(summary, sort_keys=True))
    os.replace(tmp, done / f"{ident}-{version}.json")  # written last: the input is done
    return summary


@dataclass
class BatchResult:
    done: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed


Report = Callable[[int, int, dict[str, Any]], None]


def run_batch(
    inputs: Iterable[str],
    out: str | os.PathLike[str],
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    tables: Sequence[str] | None = None,
    keylog: str | None = None,
    settings: dict[str, Any] | None = None,
    report: Report | None = None,
) -> BatchResult:
    """Analyse every input as one Dask task (see the module docstring).  ``report`` is
    called as each task ends with (tasks finished, tasks, its summary)."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError as exc:  # pragma: no cover - the fleet extra is not installed
        raise RuntimeError(
            "pcapkit batch needs dask.distributed: pip install 'pcapkit-forensics[fleet]'"
        ) from exc
    import pyarrow  # noqa: F401 - fail here, not in every task

    names = list(tables) if tables else default_tables()
    unknown = [t for t in names if t not in schema.SCHEMAS]
    if unknown:
        raise ValueError(f"no table {unknown[0]!r} (tables: {', '.join(schema.SCHEMAS)})")
    t0 = time.perf_counter()
    base = Path(out)
    base.mkdir(parents=True, exist_ok=True)
    paths = expand_inputs(inputs)
    res = BatchResult()
    todo = []
    for p in paths:
        if is_done(base, p):
            res.skipped.append(p)
        else:
            todo.append(p)
    cluster = None
    if todo:
        if scheduler:
            client = Client(scheduler)
        else:
            n = workers or max(
                1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
            )
            cluster = LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=40,
            )
            client = Client(cluster)
        try:
            futures = [
                client.submit(
                    analyze_one,
                    p,
                    os.path.abspath(p),
                    str(base.resolve()),
                    names,
                    None if keylog is None else os.path.abspath(keylog),
                    settings,
                    key=f"pcapkit-{i}-{input_id(p)[0]}",
                    pure=False,
                )
                for i, p in enumerate(todo)
            ]
            for k, fut in enumerate(as_completed(futures), 1):
                try:
                    summary = fut.result()
                except Exception as exc:  # noqa: BLE001 - a worker died or pcapkit failed
                    i = futures.index(fut)
                    summary = {
                        "capture": todo[i],
                        "ok": False,
                        "error": f"{type(exc).__name__}: {exc}",
                    }
                (res.done if summary["ok"] else res.failed).append(summary)
                if report is not None:
                    report(k, len(futures), summary)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    errors = base / ERRORS
    if res.failed:
        with open(errors, "w", encoding="utf-8") as f:
            for e in res.failed:
                f.write(json.dumps({"capture": e["capture"], "error": e["error"]}) + "\n")
    elif errors.exists():
        errors.unlink()
    res.seconds = time.perf_counter() - t0
    return res
