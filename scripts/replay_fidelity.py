"""Replay every TCP/TLS/QUIC lab fixture and tabulate fidelity (issue 19; needs root).

``python scripts/replay_fidelity.py [--vantage client|server] OUTDIR [FIXTURE[:all] ...]`` runs
``pcapkit replay`` (on the fixture's server.pcapng unless ``--vantage client``; flow 0,
``--remedy auto``; ``FIXTURE:all``: every TCP flow together) on each fixture and prints one
markdown row per
fixture: the original's and the faithful replay's finding kinds, the TTFB/TTFT/gap p95
errors (replay − original, ms), whether the faithful run is within tolerance, and what the
remedies removed.  Refusals are rows too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pcapkit
from pcapkit.replay import ReplayError, replay

FIXTURES = (
    "tls_sse_nagle tls_sse_nodelay tls_sse_think tls_sse_drop tcp_cork tcp_cork_cleared "
    "tls_tiny_records tls_buffered_records tls_record_split_write tls_record_whole_write "
    "server_think nagle_wwr nagle_wwr_nodelay tls_small_records_drop tls_large_record_drop "
    "fast_retransmit tail_ok delivery_stall rto_lost_retransmission rto_tail_loss "
    "tls_reuse tls_no_reuse tls_resumed tls_resumption_rejected slow_start_restart "
    "slow_start_restart_off zero_window zero_window_control handshake_ok syn_ok syn_lost "
    "synack_lost ack_stall black_hole grpc_stream h2_sse_nodrop bulk_veth_gso_tls "
    "h2_flow_control h2_flow_control_large "
    # HTTP/3 over QUIC (aioquic at both ends)
    "h3_sse_nodrop h3_sse_drop h3_streams_nodrop h3_streams_drop h3_flow_control "
    "h3_flow_control_large h3_small_certificate h3_amplification_limit h3_stream_complete "
    "h3_stream_timeout h3_concurrency_limited h3_concurrency_limited_control "
    "h3_resumed_0rtt h3_resumed_no_0rtt "
    # several connections (every TCP flow of the capture replayed together)
    "tls_no_reuse:all tls_resumed:all tls_resumption_rejected:all stream_timeout:all "
    "hedged_duplicate:all connection_pool_queueing:all connection_pool_queueing_control:all"
).split()


def _fmt(v: object) -> str:
    return "–" if v is None else f"{v:+.1f}" if isinstance(v, float) else str(v)


def main(argv: list[str]) -> int:
    if (
        not argv
        or argv[0] in ("-h", "--help")
        or argv[0].startswith("-")
        and argv[0] != "--vantage"
    ):
        print(__doc__.strip(), file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    vantage = "server"
    if argv[:1] == ["--vantage"]:
        vantage, argv = argv[1], argv[2:]
    out = Path(argv[0])
    names = argv[1:] or FIXTURES
    root = Path(__file__).resolve().parents[1] / "fixtures"
    print(
        "| fixture | original kinds | faithful kinds | TTFB err | TTFT err | gap p95 err | "
        "TTLB err (not judged) | reproduced | remedies: removed (TTLB) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    rows = {}
    for spec in names:
        # FIXTURE, or FIXTURE:all — every TCP (or QUIC) flow of the capture, together
        name, _, which = spec.partition(":")
        cap = root / name / f"{vantage}.pcapng"
        flows: int | list[int] = 0
        if which == "all":
            with pcapkit.open(cap) as t:
                proto = t.flows["proto"].iloc[0]  # every flow of the first one's kind
                flows = [int(f) for f in t.flows[t.flows["proto"] == proto]["flow"]]
        try:
            s = replay(cap, flow=flows, outdir=out / spec, remedies=["auto"])
        except ReplayError as e:
            print(f"| `{name}` | refused: {e} | | | | | | | |")
            continue
        except Exception as e:  # noqa: BLE001 - a failed run is a row, the table goes on
            print(f"| `{name}` | failed: {type(e).__name__}: {str(e)[:120]} | | | | | | | |")
            continue
        r = s["runs"]
        fid = r["faithful"]["fidelity"]
        rem = "; ".join(
            f"{k[7:]}: {', '.join(v['remedy']['removed']) or 'nothing'}"
            + (f" (+{', '.join(v['remedy']['appeared'])})" if v["remedy"]["appeared"] else "")
            + (f" ({v['ttlb_ms']:.1f} ms)" if v.get("ttlb_ms") is not None else "")
            for k, v in r.items()
            if k.startswith("remedy-")
        )
        print(
            f"| `{name}` | {', '.join(r['original']['kinds']) or '–'} | "
            f"{', '.join(r['faithful']['kinds']) or '–'} | {_fmt(fid['ttfb_ms_error'])} | "
            f"{_fmt(fid['ttft_ms_error'])} | {_fmt(fid['gap_p95_ms_error'])} | "
            f"{_fmt(fid.get('ttlb_ms_error'))} | "
            f"{'yes' if fid['reproduced'] else 'no'} | {rem or '–'} |",
            flush=True,
        )
        rows[name] = s
    out.mkdir(parents=True, exist_ok=True)
    (out / "fidelity.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
