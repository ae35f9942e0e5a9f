"""``pcapkit batch`` (issue 20): the fixtures on a 2-worker LocalCluster into Parquet
datasets that round-trip into pandas and DuckDB and hold each fixture's golden findings;
a failed input is reported and the rest goes on; a re-run skips what is done; a running
scheduler (``dask scheduler`` + ``dask worker`` on localhost) takes the same path."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

pytest.importorskip("distributed")
pytest.importorskip("pyarrow")

from pcapkit.batch import expand_inputs, run_batch  # noqa: E402
from pcapkit.cli import cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
CLIENTS = sorted(FIXTURES.glob("*/client.pcapng"))


def _golden(path: Path) -> list[tuple[Any, ...]]:
    doc = json.loads((path.parent / "expected.json").read_text())
    return sorted(
        (f["kind"], f["flow"], f["dir"], f["stream"], f["cost_ms"], tuple(f["frames"]))
        for f in doc["vantages"]["client"]
    )


def _na(v: Any) -> Any:
    return None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else v


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("dataset")
    inputs = [str(p.relative_to(ROOT)) for p in CLIENTS]
    runner = CliRunner()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        res = runner.invoke(cli, ["batch", *inputs, "--out", str(out), "--workers", "2"])
    finally:
        os.chdir(cwd)
    return out, res


def test_fixtures_on_two_workers_hold_the_golden_findings(dataset: tuple[Path, Any]) -> None:
    out, res = dataset
    assert res.exit_code == 0, res.output
    assert f"{len(CLIENTS)} done, 0 already done, 0 failed" in res.output
    done = [json.loads(p.read_text()) for p in (out / "_done").glob("*.json")]
    assert len(done) == len(CLIENTS)
    assert len({d["pid"] for d in done}) == 2  # both workers took tasks
    findings = pd.read_parquet(out / "findings")
    assert set(findings.capture) <= {str(p.relative_to(ROOT)) for p in CLIENTS}
    for p in CLIENTS:
        rows = findings[findings.capture == str(p.relative_to(ROOT))]
        got = sorted(
            (r.kind, int(r.flow), r.dir, _na(r.stream), r.cost_ms, tuple(int(x) for x in r.frames))
            for r in rows.itertuples(index=False)
        )
        assert got == _golden(p), p
    assert findings["shard"].isna().all()


def test_dataset_round_trips_into_pandas_and_duckdb(dataset: tuple[Path, Any]) -> None:
    duckdb = pytest.importorskip("duckdb")
    out, _ = dataset
    findings = pd.read_parquet(out / "findings")
    assert len(findings) > 20
    # every table reads, with the columns of the schema plus capture and shard
    from pcapkit import schema

    flows = pd.read_parquet(out / "flows")
    assert list(flows.columns[:2]) == ["capture", "shard"]
    assert set(schema.columns("flows")) <= set(flows.columns)
    assert flows.capture.nunique() == len(CLIENTS)
    # the fleet question: which captures show nagle_delayed_ack, and what it cost
    q = f"""
        select capture, count(*) as n, round(sum(cost_ms), 3) as cost_ms
        from read_parquet('{out}/findings/*.parquet')
        where kind = 'nagle_delayed_ack' group by capture order by capture
    """
    got = duckdb.sql(q).df()
    want = (
        findings[findings.kind == "nagle_delayed_ack"]
        .groupby("capture")
        .agg(n=("kind", "size"), cost_ms=("cost_ms", "sum"))
        .reset_index()
        .sort_values("capture")
    )
    assert len(got) >= 2
    assert got.capture.tolist() == want.capture.tolist()
    assert got.n.tolist() == want.n.tolist()
    assert got.cost_ms.tolist() == [round(x, 3) for x in want.cost_ms]
    # nested columns: frames a list, evidence JSON text DuckDB reads
    ev = duckdb.sql(
        f"select json_extract(evidence, '$[0].frame') as f, frames[1] as f1 "
        f"from read_parquet('{out}/findings/*.parquet') where kind = 'nagle_delayed_ack' limit 1"
    ).fetchall()[0]
    assert int(ev[0]) >= 1 and int(ev[1]) >= 1
    # times come as UTC timestamps beside the ns columns
    assert str(flows.first_ts.dtype).startswith("datetime64[ns, UTC]")


def test_failed_input_reported_rest_goes_on_and_rerun_skips(tmp_path: Path) -> None:
    caps = tmp_path / "caps"
    caps.mkdir()
    for name in ("tls_sse_nagle", "h2_hol_drop"):
        shutil.copy(FIXTURES / name / "client.pcapng", caps / f"{name}.pcapng")
    (caps / "broken.pcap").write_bytes(b"not a capture at all")
    out = tmp_path / "ds"
    runner = CliRunner()
    res = runner.invoke(cli, ["batch", str(caps), "--out", str(out), "--workers", "1"])
    assert res.exit_code == 1
    assert "broken.pcap: FAILED: NotACapture" in res.output
    assert "2 done, 0 already done, 1 failed" in res.output
    errors = [json.loads(x) for x in (out / "_errors.jsonl").read_text().splitlines()]
    assert [e["capture"] for e in errors] == [str(caps / "broken.pcap")]
    parts = sorted((out / "findings").glob("*.parquet"))
    assert len(parts) == 2
    stamps = {p: p.stat().st_mtime_ns for p in parts}
    # re-run: the two done are skipped (their files untouched), the broken one retried
    res = run_batch([str(caps)], out, workers=1)
    assert sorted(Path(p).name for p in res.skipped) == [
        "h2_hol_drop.pcapng",
        "tls_sse_nagle.pcapng",
    ]
    assert [f["capture"] for f in res.failed] == [str(caps / "broken.pcap")]
    assert {p: p.stat().st_mtime_ns for p in parts} == stamps
    # an input that changed is redone and replaces its old part (no duplicate rows)
    os.remove(caps / "broken.pcap")
    target = caps / "h2_hol_drop.pcapng"
    shutil.copy(FIXTURES / "tls_sse_nagle" / "client.pcapng", target)
    os.utime(target, ns=(time.time_ns(), time.time_ns() + 10**9))
    res = run_batch([str(caps)], out, workers=1)
    assert [Path(d["capture"]).name for d in res.done] == ["h2_hol_drop.pcapng"] and res.ok
    assert not (out / "_errors.jsonl").exists()
    findings = pd.read_parquet(out / "findings")
    assert len(findings) == 2 * len(findings[findings.capture == str(target)])
    assert len(list((out / "findings").glob("*.parquet"))) == 2


def test_inputs_files_globs_directories_and_shards(tmp_path: Path) -> None:
    from pcapkit.net.shard import shard_capture

    shard_capture(FIXTURES / "h2_hol_drop" / "client.pcapng", 2, tmp_path / "shards")
    got = expand_inputs(
        [str(tmp_path / "shards"), str(FIXTURES / "tls_sse_nagle" / "*.pcapng"), "missing.pcap"]
    )
    assert [Path(p).name for p in got] == [
        "shard-0.pcapng",
        "shard-1.pcapng",
        "client.pcapng",
        "middle.pcapng",
        "server.pcapng",
        "missing.pcap",
    ]
    res = run_batch([str(tmp_path / "shards")], tmp_path / "ds", workers=1, tables=["flows"])
    assert res.ok and len(res.done) == 2
    flows = pd.read_parquet(tmp_path / "ds" / "flows")
    assert sorted(flows.shard.dropna().astype(int).tolist()) == sorted(
        int(Path(c).stem.split("-")[1]) for c in flows.capture
    )
    assert len(flows) == 1  # the one connection, in one shard
    assert not (tmp_path / "ds" / "findings").exists()  # only the tables asked for


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_running_scheduler_same_code_path(tmp_path: Path) -> None:
    """``dask scheduler`` and one ``dask worker`` as separate processes on localhost, the
    way a multi-machine cluster is started (README), and ``--scheduler`` pointing there."""
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    dask_bin = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    sched = subprocess.Popen(
        [*dask_bin, "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", ":0"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", addr, "--nthreads", "1"]
        + ["--nworkers", "1", "--no-dashboard"],
        env=env,
        cwd=tmp_path,  # not the repository: inputs and output go by absolute path
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        from distributed import Client

        deadline = time.monotonic() + 60
        while True:
            try:
                with Client(addr, timeout=5) as c:
                    if c.scheduler_info()["workers"]:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the scheduler and worker did not start"
            time.sleep(0.5)
        out = tmp_path / "ds"
        runner = CliRunner()
        inputs = [str(FIXTURES / n / "client.pcapng") for n in ("tls_sse_nagle", "grpc_stream")]
        res = runner.invoke(cli, ["batch", *inputs, "--out", str(out), "--scheduler", addr])
        assert res.exit_code == 0, res.output
        findings = pd.read_parquet(out / "findings")
        for p in inputs:
            got = sorted(
                (
                    r.kind,
                    int(r.flow),
                    r.dir,
                    _na(r.stream),
                    r.cost_ms,
                    tuple(int(x) for x in r.frames),
                )
                for r in findings[findings.capture == p].itertuples(index=False)
            )
            assert got == _golden(Path(p))
        pids = {json.loads(d.read_text())["pid"] for d in (out / "_done").glob("*.json")}
        assert os.getpid() not in pids and len(pids) == 1  # ran in the dask worker
    finally:
        for proc in (worker, sched):
            proc.terminate()
        for proc in (worker, sched):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
