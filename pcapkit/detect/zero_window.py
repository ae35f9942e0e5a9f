"""Zero receive window (R2, DETECTION.md §7.2).

Mechanism: a receiver whose application does not read fills its buffer and
advertises window 0; the sender stops, probes on the persist timer (RFC 9293
§3.8.6.1; Linux: first probe after max(RTO, 200 ms), exponential backoff, a
0-byte segment at snd_una − 1 that Wireshark labels keep-alive) and resumes when
the receiver's window update arrives.

Signature: ACKs from Y with window 0 (no SYN/FIN/RST), then a window update
(window > 0) from Y.  Cost = t(window reopens) − t(first zero-window ACK): both
packets travel Y → capture point, so the interval is unbiased by the vantage
(§1.1).  Probe penalty: when the reopening was answered to a probe rather than
sent spontaneously, part of the stall is the persist timer's.

Counter-checks: end of connection (FIN/RST from Y at or before the zero window)
is not a stall; a zero window while X had nothing left to send costs nothing
(X must send new data after the reopen, or have probed).
"""

from __future__ import annotations

import numpy as np

from ..net.decode import ACK, FIN, RST, SYN
from .base import Evidence, Finding, frame_filter
from .constants import MS, TCP_RTO_MIN_NS
from .context import DetectContext
from .spec import DetectorSpec, Kind, Threshold

SPEC = DetectorSpec(
    kinds=(Kind("zero_window", "R2", "DETECTION.md §7.2", holds=True),),
    thresholds=(
        Threshold(
            "min_stall_ms", "ms", "report every zero-window stall (0); raise to ignore short ones"
        ),
    ),
)
KINDS = SPEC.kind_names

# RFC 9293 §3.8.6.1 / Linux tcp_probe0_base: probes start after max(RTO, TCP_RTO_MIN =
# 200 ms); a stall shorter than TCP_RTO_MIN could not have been probed at all.  Used only
# to say whether the reopening came after probing.


def detect(ctx: DetectContext, *, min_stall_ms: float = 0.0) -> list[Finding]:
    """Zero-window episodes per flow and direction of the *data* (the stalled sender)."""
    out: list[Finding] = []
    for f in ctx.tcp_flows():
        p = ctx.packets_of(f)
        if p.frame.shape[0] == 0:
            continue
        for d in (0, 1):  # d = direction of the stalled data; Y sends in 1 - d
            y = p.dir == 1 - d
            closing = (p.flags & (FIN | RST)) != 0
            zero = (
                y & (p.win_raw == 0) & ((p.flags & (FIN | SYN | RST)) == 0) & ((p.flags & ACK) != 0)
            )
            if not zero.any():
                continue
            idx = np.nonzero(y)[0]
            zeros = np.nonzero(zero)[0]
            k = 0
            while k < zeros.shape[0]:
                z0 = int(zeros[k])
                # episode: from z0 until Y advertises a window > 0
                later_y = idx[idx > z0]
                reopen = later_y[(p.win_raw[later_y] > 0) | closing[later_y]]
                r = int(reopen[0]) if reopen.shape[0] else None
                ep_zero = zeros[(zeros >= z0) & ((zeros < r) if r is not None else True)]
                k += ep_zero.shape[0]
                if r is None or closing[r]:
                    continue  # never reopened in the capture, or the connection ended
                x_after = np.nonzero(
                    (p.dir == d) & (np.arange(p.frame.shape[0]) > r) & (p.length > 1)
                )[0]
                # probes: 0/1-byte segments from X while the window is shut (Linux sends
                # 0-byte probes at snd_una − 1; Wireshark's definition is 1 byte)
                pos = np.arange(p.frame.shape[0])
                probes = np.nonzero(
                    (p.dir == d)
                    & (pos > z0)
                    & (pos < r)
                    & (p.length <= 1)
                    & ((p.flags & 0x07) == 0)
                )[0]
                if x_after.shape[0] == 0 and probes.shape[0] == 0:
                    continue  # the sender had nothing more to send: no cost
                t0, t1 = int(p.ts[z0]), int(p.ts[r])
                cost = (t1 - t0) / 1e6
                if cost < min_stall_ms:
                    continue
                ev = [
                    Evidence(int(p.frame[j]), "zero_window_ack", int(p.ts[j])) for j in ep_zero[:3]
                ]
                ev += [Evidence(int(p.frame[j]), "probe", int(p.ts[j])) for j in probes[:5]]
                ev.append(Evidence(int(p.frame[r]), "window_update", t1))
                if x_after.shape[0]:
                    ev.append(
                        Evidence(int(p.frame[x_after[0]]), "resumed_data", int(p.ts[x_after[0]]))
                    )
                receiver = ctx.peer(f, d)
                by_probe = probes.shape[0] > 0 and cost >= TCP_RTO_MIN_NS / MS
                out.append(
                    Finding(
                        kind="zero_window",
                        flow=f,
                        dir=("c2s", "s2c")[d],
                        t_start_ns=t0,
                        t_end_ns=t1,
                        cost_ms=cost,
                        cost_method="measured_interval",
                        evidence=ev,
                        vantage=ctx.vantage(f),
                        confidence=0.95,
                        checks=[
                            "window 0 advertised without SYN/FIN/RST",
                            "window reopened before the connection closed",
                            "sender had data to send (probes or data after the reopen)",
                        ],
                        explanation=(
                            f"The {receiver} advertised a zero receive window for {cost:.1f} ms "
                            f"({ep_zero.shape[0]} zero-window ACKs"
                            + (f", {probes.shape[0]} probes" if probes.shape[0] else "")
                            + "): its application stopped reading, the socket buffer filled, and "
                            f"the {ctx.endpoint(f, d)} could not send until the window reopened."
                            + (
                                " The reopening was found by a persist-timer probe."
                                if by_probe
                                else ""
                            )
                        ),
                        remedy=(
                            "The receiving application is the bottleneck: read the socket "
                            "continuously (a dedicated reader, larger reads, no blocking work on the "
                            "read path) or enlarge its receive buffer (SO_RCVBUF / tcp_rmem) if the "
                            "pauses are short and bursts are expected; if this is intended "
                            "backpressure, nothing is wrong on the network."
                        ),
                        display_filter=f"tcp.stream == {int(ctx.flow(f).stream)} && "
                        "(tcp.analysis.zero_window || tcp.analysis.window_update || "
                        "tcp.analysis.keep_alive || tcp.analysis.zero_window_probe)",
                        details={
                            "zero_window_acks": int(ep_zero.shape[0]),
                            "probes": int(probes.shape[0]),
                            "frames_filter": frame_filter([e.frame for e in ev]),
                        },
                    )
                )
    return out
