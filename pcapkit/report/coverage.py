"""What pcapkit could read of a capture: the coverage a verdict stands on.

Transport findings (TCP timing, TLS record sizes, QUIC packets) need only headers, so
they cover every connection; application findings and the request timelines (HTTP/1.1,
SSE, HTTP/2, gRPC, HTTP/3) need the application bytes, so they cover only connections
in cleartext or decrypted.  A verdict of "nothing found" on a capture whose TLS or QUIC
could not be decrypted says what was not analysed (issue 13), never a clean bill.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ..rows import column_values
from ..schema import is_missing
from ..trace import Trace


def coverage(trace: Trace) -> dict[str, Any]:
    """The ``coverage`` object of the JSON report (counts, and the reasons records or
    connections stayed unreadable)."""
    # the columns' values as iterating them yields (no Series per step: this runs for
    # the text and the JSON report alike)
    proto = column_values(trace.flows.proto)
    n_tcp = sum(1 for p in proto if p == "tcp")
    n_udp = sum(1 for p in proto if p == "udp")
    tls, quic = trace.tls, trace.quic
    tls_flow, quic_flow = column_values(tls.flow), column_values(quic.flow)
    tls_flows = set(tls_flow)
    tls_read = {f for f, d in zip(tls_flow, column_values(tls.decrypted), strict=True) if d}
    # a TLS session counts as read when its application data decrypted (partly or whole)
    recs = trace.records
    if len(recs):
        # the decrypted rows from the status codes, then their content types: the records
        # table is the biggest table of a capture of many small records (millions of
        # rows), and nullable masks over all of it were the analysis's peak (issue 16)
        st = recs["status"]
        cats = st.cat.categories.tolist()
        if "decrypted" in cats:
            rows = np.flatnonzero(st.cat.codes.to_numpy() == cats.index("decrypted"))
            ct = recs["content_type"].iloc[rows].to_numpy(dtype=np.int64, na_value=-1)
            app = rows[ct == 23]
            tls_read |= set(np.unique(recs["flow"].to_numpy()[app]).tolist())
    quic_flows = set(quic_flow)
    quic_read = {f for f, d in zip(quic_flow, column_values(quic.decrypted), strict=True) if d}
    http_flows = set(column_values(trace.requests.flow))
    cleartext_http = http_flows - tls_flows - quic_flows
    why: Counter[str] = Counter()
    for flows, why_not, read in (
        (tls_flow, tls.why_not, tls_read),
        (quic_flow, quic.why_not, quic_read),
    ):
        for flow, w in zip(flows, column_values(why_not), strict=True):
            if int(flow) not in read:
                why[_reason(w)] += 1
    readable = tls_read | quic_read | cleartext_http
    packets = trace.packets
    pflow = packets.flow.to_numpy(dtype=float, na_value=np.nan)
    in_flow = ~np.isnan(pflow)
    frames_read = int(np.isin(pflow[in_flow], sorted(readable)).sum()) if readable else 0
    return {
        "frames": int(len(packets)),
        "frames_in_flows": int(in_flow.sum()),
        "frames_in_readable_connections": frames_read,
        "tcp_connections": n_tcp,
        "udp_flows": n_udp,
        "tls_sessions": len(tls_flows),
        "tls_decrypted": len(tls_read & tls_flows),
        "quic_connections": len(quic_flows),
        "quic_decrypted": len(quic_read),
        "cleartext_http_connections": len(cleartext_http),
        "not_decrypted_because": dict(why.most_common()),
    }


def _reason(why_not: Any) -> str:
    if why_not is None or is_missing(why_not):
        return "no application data seen"
    return str(why_not).split(":")[0].strip() or "unknown"


def unread(cov: dict[str, Any]) -> int:
    """TLS sessions and QUIC connections whose application data could not be read."""
    return int(
        cov["tls_sessions"] - cov["tls_decrypted"] + cov["quic_connections"] - cov["quic_decrypted"]
    )


def coverage_line(cov: dict[str, Any]) -> str:
    """One line for the text report: what was read, and what the findings can see."""
    parts = [f"{cov['tcp_connections']} TCP connection(s), {cov['udp_flows']} UDP flow(s)"]
    if cov["tls_sessions"]:
        parts.append(f"TLS {cov['tls_decrypted']}/{cov['tls_sessions']} decrypted")
    if cov["quic_connections"]:
        parts.append(f"QUIC {cov['quic_decrypted']}/{cov['quic_connections']} decrypted")
    if cov["cleartext_http_connections"]:
        parts.append(f"{cov['cleartext_http_connections']} cleartext HTTP")
    if cov["not_decrypted_because"]:
        parts.append(
            "not decrypted: "
            + ", ".join(f"{k} ×{v}" for k, v in cov["not_decrypted_because"].items())
        )
    line = "coverage: " + "; ".join(parts)
    if unread(cov):
        line += (
            f"; application data read in {cov['frames_in_readable_connections']} of "
            f"{cov['frames_in_flows']} frames: transport findings cover every connection, "
            "application findings (HTTP, SSE, HTTP/2, HTTP/3) only the readable ones"
        )
    return line
