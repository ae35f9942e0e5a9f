"""Run a lab scenario end to end: path up, captures on, server, client, teardown, fixture out.

``run(name, outdir, **overrides)`` writes

* ``outdir/client.pcapng`` and ``outdir/server.pcapng`` — both vantages, one clock, raw-IP
  link type (TUN), nanosecond timestamps, TLS key log embedded as a Decryption Secrets Block
  for TLS scenarios;
* ``outdir/scenario.json`` — what was done and what the scenario knows (schema below);
* ``outdir/middle.pcapng`` with ``middle=True`` (``pcapkit lab run … --middle``) — the
  middle vantage: every packet as it passes the halfway point of the path, written by the
  forwarder on the same clock, each one-way delay split in two halves around that point
  (:mod:`pcapkit.lab.forwarder`); the ends see the same path delay as without it;

and returns the scenario.json content.  ``list_scenarios()`` describes the registry.

Topologies (``Scenario.topology``; :mod:`pcapkit.lab.netns`): the default ``"tun"`` is the
forwarder path above.  ``"veth"`` (a veth pair, offloads on) writes the same two files
without a forwarder; ``"loopback"`` (client and server in one namespace over ``lo``) writes
only ``client.pcapng`` — the one capture on ``lo`` is both ends' vantage — and scenario.json
has no ``captures.server``.  Neither has path impairment (delay, rate, drops and reorders
must stay zero) nor a middle vantage; their ``forwarder`` section is empty.

scenario.json (``schema: "pcapkit.lab.scenario/1"``; all ``*_ns`` are epoch nanoseconds on
the captures' clock, ``*_ms`` are float milliseconds)::

    scenario, summary, what, variant ("positive"|"control"), pair,
    expected [pathology names; [] for a control], expected_codes [DETECTION.md codes],
    controls [what a control controls for; [] for a positive],
    incidental [present in both variants by construction, e.g. the TCP HoL of any drop:
                a detector may report it or not],
    unseen {pathology: [vantages]} (a positive's pathology the wire cannot show there: a SYN
            lost before the server's capture point; the detector must stay silent there),
    created_ns, duration_s,
    host {kernel, python, openssl},
    topology {kind, topology ("tun"|"loopback"|"veth"), client {netns, iface, ip},
              server {...}, mtu},
    path {c2s {delay_ms, rate_mbit, drop [idx], reorder [idx], reorder_extra_ms, drop_syn [idx],
               blackhole_after, stall_after, stall_ms}, s2c {...},
          rtt_ms, ttl_decrement,
          middle null | {c2s {before_ms, after_ms}, s2c {...}}  (the delay's split at the tap)},
    params {every resolved parameter}, overrides {what the caller changed},
    sockets {client {TCP_NODELAY, TCP_CONGESTION}, server {...}}   (read back from the kernel)
    sysctls {cli {key: value}, srv {...}}                         (read back after setting)
    tls null | {version, cipher, alpn, keylog_lines, embedded_in: [files]}
                (QUIC scenarios: aioquic's secrets log, same NSS format, same place)
    captures {client|server: {file, netns, iface, packets, dropped_by_kernel, bytes}
              (loopback: client only),
              middle (with middle=True): {file, position: "forwarder", netns: null, iface:
              null, packets, dropped_by_kernel: null (not a kernel capture), bytes,
              truncated, split_ms {c2s [before, after], s2c [...]}}},
    forwarder {stats, events [{event, dir, payload_index, t_ns, proto, src_port, dst_port,
               seq, rel_seq, len}], trace_truncated, tun_tx_dropped {cli, srv},
               stalls [[t_ns, ns]] (from wall time t_ns the forwarder was ns late waking
               or ns in one pass of its loop: the machine's scheduling, not the path;
               see forwarder.Forwarder)},
    ground_truth {scenario-specific; always includes handshake [{rtt_ms, ...}]}

The key log is never printed; it lives only inside the pcapng files.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import select
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import apps
from . import scenarios as registry
from .certs import make_self_signed
from .errors import LabError
from .forwarder import DirectionConfig, ForwarderConfig
from .netns import CLIENT_IP, SERVER_IP, Lab, child_env, require_root
from .scenarios import RunData, Scenario

SCHEMA = "pcapkit.lab.scenario/1"
SERVER_READY_TIMEOUT_S = 15.0  # python start-up + bind inside a namespace takes ~0.1 s
TAIL_EXTRA_S = 0.05  # after both apps exit: last FIN/ACK must cross the path (2 × delay) + this
STDERR_TAIL_CHARS = 2000  # how much of a failed app's stderr goes into the error message
MAX_CAPTURE_BYTES = 5_000_000  # a lab capture above this is a runaway scenario, not a fixture


def list_scenarios() -> list[dict[str, Any]]:
    """Every registered scenario: name, summary, variant, pair (None for a lone control),
    expected, controls, incidental, tls, topology, defaults."""
    out = []
    for name, sc in sorted(registry.load_all().items()):
        out.append(
            {
                "name": name,
                "summary": sc.summary,
                "variant": sc.variant,
                "pair": sc.pair,
                "expected": list(sc.expected),
                "controls": list(sc.controls),
                "incidental": list(sc.incidental),
                "tls": sc.tls,
                "topology": sc.topology,
                "defaults": sc.defaults(),
            }
        )
    return out


def _ns(ms: float | None) -> int:
    return 0 if ms is None else round(float(ms) * 1_000_000)


def forwarder_config(params: dict[str, Any]) -> ForwarderConfig:
    """The path of a scenario from its (resolved) parameters."""
    rate = params.get("rate_mbit")
    rate_bps = None if rate is None else round(float(rate) * 1_000_000)
    dirs = {}
    for d in ("c2s", "s2c"):
        delay = params.get(f"delay_{d}_ms")
        dirs[d] = DirectionConfig(
            delay_ns=_ns(params["delay_ms"] if delay is None else delay),
            rate_bps=rate_bps,
            drop=tuple(int(n) for n in params.get(f"drop_{d}") or ()),
            reorder=tuple(int(n) for n in params.get(f"reorder_{d}") or ()),
            reorder_extra_ns=_ns(params.get("reorder_extra_ms", 5.0)),
            drop_syn=tuple(int(n) for n in params.get(f"drop_syn_{d}") or ()),
            blackhole_after=params.get(f"blackhole_{d}_after"),
            stall_after=params.get(f"stall_{d}_after"),
            stall_ns=_ns(params.get("stall_ms") or 0.0)
            if params.get(f"stall_{d}_after") is not None
            else 0,
        )
    return ForwarderConfig(c2s=dirs["c2s"], s2c=dirs["s2c"])


def _path_summary(cfg: ForwarderConfig) -> dict[str, Any]:
    def one(d: DirectionConfig) -> dict[str, Any]:
        return {
            "delay_ms": d.delay_ns / 1e6,
            "rate_mbit": None if d.rate_bps is None else d.rate_bps / 1e6,
            "drop": list(d.drop),
            "reorder": list(d.reorder),
            "reorder_extra_ms": d.reorder_extra_ns / 1e6,
            "drop_syn": list(d.drop_syn),
            "blackhole_after": d.blackhole_after,
            "stall_after": d.stall_after,
            "stall_ms": d.stall_ns / 1e6,
        }

    middle = None
    if cfg.middle:
        middle = {}
        for i, name in enumerate(("c2s", "s2c")):
            before, after = cfg.delay_split_ns(i)
            middle[name] = {"before_ms": before / 1e6, "after_ms": after / 1e6}
    return {
        "c2s": one(cfg.c2s),
        "s2c": one(cfg.s2c),
        "rtt_ms": (cfg.c2s.delay_ns + cfg.s2c.delay_ns) / 1e6,
        "ttl_decrement": cfg.decrement_ttl,
        "middle": middle,
    }


def _embed_keys(src: Path, dst: Path, keylog: bytes | None) -> None:
    """Write ``src`` (pcap) as pcapng ``dst``, with ``keylog`` in a Decryption Secrets Block.

    Uses the project's own writer (``pcapkit.io.writer.inject_secrets``); ``editcap``
    (Wireshark) is the fallback when that module is not importable.
    """
    try:
        from pcapkit.io.writer import inject_secrets
    except ImportError:
        pass
    else:
        inject_secrets(src, dst, keylog or b"")
        return
    if shutil.which("editcap") is None:
        raise LabError("cannot write pcapng: neither pcapkit.io.writer nor editcap is available")
    argv = ["editcap", "-F", "pcapng"]
    keyfile = None
    if keylog:
        fd, keyfile = tempfile.mkstemp(prefix="pcapkit-keys-", suffix=".log")
        with os.fdopen(fd, "wb") as f:
            f.write(keylog)
        argv += ["--inject-secrets", f"tls,{keyfile}"]
    try:
        p = subprocess.run([*argv, str(src), str(dst)], capture_output=True, text=True, check=False)
    finally:
        if keyfile:
            os.unlink(keyfile)
    if p.returncode != 0:
        raise LabError(f"editcap failed: {p.stderr.strip()}")


def _merge_keylogs(*paths: Path) -> bytes:
    """Union of NSS key-log lines, first-seen order, comments dropped."""
    seen: dict[bytes, None] = {}
    for path in paths:
        if path.exists():
            for line in path.read_bytes().splitlines():
                line = line.strip()
                if line and not line.startswith(b"#"):
                    seen.setdefault(line, None)
    return b"".join(line + b"\n" for line in seen)


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-STDERR_TAIL_CHARS:].strip()
    except FileNotFoundError:
        return ""


def _wait_ready(proc: subprocess.Popen[str], errfile: Path) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + SERVER_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 0.05)
        if r:
            line = proc.stdout.readline()
            if line.strip() == "READY":
                return
            if not line:
                break
        if proc.poll() is not None:
            break
    raise LabError(f"server did not become ready: {_tail(errfile)}")


def _app_argv(role: str, sc: Scenario, params_path: Path, result_path: Path) -> list[str]:
    target = sc.server if role == "server" else sc.client
    # run by path (see apps.py): the programs do not load pcapkit's analysis stack
    return [
        sys.executable,
        str(Path(apps.__file__).resolve()),
        role,
        target,
        str(params_path),
        str(result_path),
    ]


def _check_direct_path(sc: Scenario, params: dict[str, Any], middle: bool) -> None:
    """A topology without the forwarder (loopback, veth) cannot impair the path."""
    if sc.topology == "tun":
        return
    bad = [
        k
        for k in ("delay_ms", "delay_c2s_ms", "delay_s2c_ms", "rate_mbit")
        if params.get(k) not in (None, 0, 0.0)
    ]
    bad += [
        k
        for k in (
            "drop_c2s",
            "drop_s2c",
            "reorder_c2s",
            "reorder_s2c",
            "drop_syn_c2s",
            "drop_syn_s2c",
            "stall_ms",
        )
        if params.get(k)
    ]
    bad += [
        k
        for k in (
            "blackhole_c2s_after",
            "blackhole_s2c_after",
            "stall_c2s_after",
            "stall_s2c_after",
        )
        if params.get(k) is not None
    ]
    if middle:
        bad.append("middle")
    if bad:
        raise LabError(
            f"{sc.name}: topology {sc.topology!r} has no forwarder, so no "
            f"{', '.join(bad)} (only the TUN path impairs and taps)"
        )


def run(
    name: str,
    outdir: str | os.PathLike[str],
    *,
    middle: bool = False,
    forwarder_log: str | os.PathLike[str] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Run scenario ``name``; write both captures and scenario.json to ``outdir``.

    ``overrides`` replace scenario parameters (see ``list_scenarios()[i]["defaults"]``),
    e.g. ``run("nagle_wwr", "out", delay_ms=20, drop_c2s=[3])``.  ``middle=True`` also
    writes ``middle.pcapng``, the vantage halfway along the path (TUN topology only).
    ``forwarder_log`` names a file for the forwarder's own log (JSON: its per-packet trace
    of read and release times, ``trace_columns``, stalls, events), kept out of ``outdir``.
    Needs root.
    """
    return run_scenario(
        registry.get(name), outdir, middle=middle, forwarder_log=forwarder_log, **overrides
    )


def run_scenario(
    sc: Scenario,
    outdir: str | os.PathLike[str],
    *,
    middle: bool = False,
    forwarder_log: str | os.PathLike[str] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """:func:`run` for a scenario object that is not in the registry (a replay's, built
    per capture by :mod:`pcapkit.lab.reenact`)."""
    require_root()
    name = sc.name
    params = sc.resolve(overrides)
    _check_direct_path(sc, params, middle)
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = forwarder_config(params)
    if middle:
        cfg = dataclasses.replace(cfg, middle=True)
    t0 = time.monotonic()
    created_ns = time.time_ns()
    with tempfile.TemporaryDirectory(prefix="pcapkit-lab-") as tmp:
        work = Path(tmp)
        app_params = {**params, "server_ip": SERVER_IP, "client_ip": CLIENT_IP}
        if sc.tls:
            cert, key = make_self_signed(
                work / "pki", ip=SERVER_IP, extra_sans=int(params.get("cert_extra_sans") or 0)
            )
            app_params.update(
                {
                    "cert": str(cert),
                    "key": str(key),
                    "keylog_client": str(work / "client.keys"),
                    "keylog_server": str(work / "server.keys"),
                }
            )
        (work / "params.json").write_text(json.dumps(app_params), encoding="utf-8")
        with Lab(
            cfg,
            work / "lab",
            realtime_forwarder=bool(params["realtime_forwarder"]),
            kind=sc.topology,
        ) as lb:
            sysctls: dict[str, dict[str, str]] = {}
            for role in ("cli", "srv"):
                for k, v in dict(params[f"sysctl_{role}"]).items():
                    lb.sysctl(role, k, v)
                keys = {
                    "net.ipv4.tcp_slow_start_after_idle",
                    "net.ipv4.tcp_autocorking",
                    *params[f"sysctl_{role}"],
                }
                sysctls[role] = {k: lb.read_sysctl(role, k) for k in sorted(keys)}
            cap_paths = {"cli": work / "client.pcap", "srv": work / "server.pcap"}
            if sc.topology == "loopback":  # one interface: one capture, both ends' vantage
                del cap_paths["srv"]
            caps = lb.captures(cap_paths)
            srv_err, cli_err = work / "server.stderr", work / "client.stderr"
            with open(srv_err, "w") as se, open(cli_err, "w") as ce:
                srv = lb.popen(
                    "srv",
                    _app_argv("server", sc, work / "params.json", work / "server.json"),
                    stdout=subprocess.PIPE,
                    stderr=se,
                    text=True,
                    env=child_env(),
                )
                _wait_ready(srv, srv_err)
                cli = lb.popen(
                    "cli",
                    _app_argv("client", sc, work / "params.json", work / "client.json"),
                    stdout=ce,
                    stderr=ce,
                    env=child_env(),
                )
                deadline = time.monotonic() + float(params["timeout_s"])
                for proc, role, err in ((cli, "client", cli_err), (srv, "server", srv_err)):
                    try:
                        rc = proc.wait(max(0.1, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        raise LabError(
                            f"{name}: {role} did not finish within "
                            f"{params['timeout_s']} s: {_tail(err)}"
                        ) from None
                    if rc != 0:
                        raise LabError(f"{name}: {role} failed ({rc}): {_tail(err)}")
            time.sleep(max(cfg.c2s.delay_ns, cfg.s2c.delay_ns) * 2 / 1e9 + TAIL_EXTRA_S)
            cap_stats = {role: cap.stop() for role, cap in caps.items()}
            tun_drops = lb.tun_drops()
            fwd = lb.stop_forwarder()
            if forwarder_log is not None:
                Path(forwarder_log).write_text(json.dumps(fwd), encoding="utf-8")
            topology = lb.topo.as_dict()
            middle_src = lb.middle_path
        if any(tun_drops.values()):
            raise LabError(
                f"{name}: the TUN queues dropped packets {tun_drops}: "
                "the forwarder fell behind; this run is not a valid fixture"
            )
        client_res = json.loads((work / "client.json").read_text(encoding="utf-8"))
        server_res = json.loads((work / "server.json").read_text(encoding="utf-8"))
        keylog = _merge_keylogs(work / "client.keys", work / "server.keys") if sc.tls else None
        if sc.tls and not keylog:
            raise LabError(f"{name}: TLS scenario wrote no key log")
        roles = [r for r, c in (("client", "cli"), ("server", "srv")) if c in cap_paths]
        files = {r: out / f"{r}.pcapng" for r in roles}
        sources = {r: work / f"{r}.pcap" for r in roles}
        if middle_src is not None:
            if not middle_src.exists() or "middle" not in fwd:
                raise LabError(f"{name}: the forwarder wrote no middle capture")
            if fwd["middle"]["truncated"]:
                raise LabError(f"{name}: the middle capture hit its size cap: not a fixture")
            files["middle"], sources["middle"] = out / "middle.pcapng", middle_src
        for role, dst in files.items():
            _embed_keys(sources[role], dst, keylog)
            if dst.stat().st_size > MAX_CAPTURE_BYTES:
                raise LabError(
                    f"{name}: {dst.name} is {dst.stat().st_size} bytes "
                    f"(> {MAX_CAPTURE_BYTES}): not a fixture"
                )
        truth: dict[str, Any] = {}
        if sc.ground_truth is not None:
            truth = sc.ground_truth(
                RunData(params=params, client=client_res, server=server_res, forwarder=fwd)
            )
    tls_info = None
    if sc.tls:
        tls_info = {
            **client_res.get("tls", {}),
            "keylog_lines": 0 if keylog is None else keylog.count(b"\n"),
            "embedded_in": [p.name for p in files.values()],
        }
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "scenario": sc.name,
        "summary": sc.summary,
        "what": sc.what,
        "variant": sc.variant,
        "pair": sc.pair,
        "expected": list(sc.expected),
        "expected_codes": [registry.PATHOLOGIES[p][0] for p in sc.expected],
        "controls": list(sc.controls),
        "incidental": list(sc.incidental),
        "unseen": {k: list(v) for k, v in sc.unseen.items()},
        "created_ns": created_ns,
        "duration_s": round(time.monotonic() - t0, 3),
        "host": {
            "kernel": platform.release(),
            "python": platform.python_version(),
            "openssl": ssl.OPENSSL_VERSION,
        },
        "topology": topology,
        "path": _path_summary(cfg),
        "params": params,
        "overrides": dict(overrides),
        "sockets": {"client": client_res.get("socket"), "server": server_res.get("socket")},
        "sysctls": sysctls,
        "tls": tls_info,
        "captures": {
            role: {
                "file": files[role].name,
                "netns": topology[role]["netns"],
                "iface": topology[role]["iface"],
                "packets": cap_stats["cli" if role == "client" else "srv"].captured,
                "dropped_by_kernel": cap_stats[
                    "cli" if role == "client" else "srv"
                ].dropped_by_kernel,
                "bytes": files[role].stat().st_size,
            }
            for role in roles
        },
        "forwarder": {
            "stats": fwd["stats"],
            "events": fwd["events"],
            "trace_truncated": fwd["trace_truncated"],
            "tun_tx_dropped": tun_drops,
            "realtime": fwd.get("realtime"),
            "spin_ns": fwd.get("spin_ns"),
            "stalls": fwd.get("stalls", []),
        },
        "ground_truth": truth,
    }
    if "middle" in files:
        topology["middle"] = {
            "position": "the forwarder, halfway along the path (root netns)",
            "file": files["middle"].name,
        }
        doc["captures"]["middle"] = {
            "file": files["middle"].name,
            "position": "forwarder",
            "netns": None,
            "iface": None,
            "packets": fwd["middle"]["packets"],
            "dropped_by_kernel": None,
            "bytes": files["middle"].stat().st_size,
            "truncated": fwd["middle"]["truncated"],
            "split_ms": {d: [v / 1e6 for v in sp] for d, sp in fwd["middle"]["split_ns"].items()},
        }
    (out / "scenario.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return doc
