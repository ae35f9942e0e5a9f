"""Lost handshakes: ``syn_retransmission`` (issue 22).

Mechanism: a connection cannot carry a byte before its three-way handshake completes.
A lost SYN (or the SYN/ACK answering it) is repaired only by the client's SYN timer —
1 s on Linux and RFC 6298 §2.1 (``TCP_TIMEOUT_INIT``), 3 s on older stacks (RFC 1122) —
or by the server's SYN/ACK timer (Linux: 1 s, ``inet_rtx_syn_ack``), doubling each
time.  No RTT sample exists yet, so the wait is a whole timer, not a round trip.

Signature at the capture point P: the client's SYN sent more than once with the same ISN
(a new ISN is a new connection), or the server's SYN/ACK more than once, and a handshake
that completed (the client's ACK of the server's ISN + 1).  Cost = what the first request
waited: t(handshake-completing ACK) − t(first SYN) − one round trip (what the handshake
takes without loss: SYN → SYN/ACK → ACK spans d_C + d_S at every vantage, §1.1).  The
round trip is the flow's refined legs (§1.2: data → ACK samples, which the repeated
handshake packets cannot corrupt), bounded by the exchange that completed it.

What each vantage can see (the finding says which packet was lost where it can):

* a SYN/ACK seen at P and the client still repeating its SYN (or the server repeating its
  SYN/ACK with no ACK between): the SYN/ACK (or the client's ACK of it) was lost between
  P and the client;
* P at the server and the first SYN unanswered there: the server's host dropped it
  (listen queue full, SYN cookies off, a firewall) — the SYN reached it;
* otherwise the first SYN got no answer beyond P: the SYN or its SYN/ACK was lost
  (a client-side capture cannot tell which).  A SYN lost before the server's capture
  point is invisible there: the server sees one SYN and a normal handshake.

Counter-checks: a repeat answered by a slow first SYN/ACK (a slow path, not a loss) costs
nothing beyond the round trip, which the data → ACK samples measure (not the handshake's
own legs, which the repeats corrupt; TSecr cannot tell: Linux echoes the first SYN's TSval
in every SYN/ACK) — below ``min_cost_ms``, no finding; a handshake that never completed
(refused, filtered, a scan) is not a delay of any request — no finding.
"""

from __future__ import annotations

import numpy as np

from ..net.decode import ACK, RST, SYN
from .base import Evidence, Finding
from .context import DIRS, DetectContext
from .spec import DetectorSpec, Kind, Threshold
from .tcp_model import sampled_legs_ns
from .waits import request_waiting, request_words

SPEC = DetectorSpec(
    kinds=(Kind("syn_retransmission", "L1", "issue 22; RFC 6298 §2.1, §5.7", holds=True),),
    thresholds=(
        Threshold(
            "min_cost_ms",
            "ms",
            "RFC 6298 §5.7: a lost SYN waits the initial RTO (1 s; 3 s on older stacks); a "
            "repeat that cost less than 10 ms was not a wait anyone felt (judgement)",
        ),
    ),
)
KINDS = SPEC.kind_names

MIN_COST_MS = 10.0
MS = 1_000_000


def detect(ctx: DetectContext, *, min_cost_ms: float = MIN_COST_MS) -> list[Finding]:
    out: list[Finding] = []
    for f in ctx.tcp_flows():
        fnd = _flow(ctx, f, min_cost_ms)
        if fnd is not None:
            out.append(fnd)
    return out


def _flow(ctx: DetectContext, f: int, min_cost_ms: float) -> Finding | None:
    p = ctx.packets_of(f)
    if p.frame.shape[0] < 3:
        return None
    syn = (p.flags & SYN) != 0
    ack = (p.flags & ACK) != 0
    c_syn = np.nonzero(syn & ~ack & (p.dir == 0))[0]
    s_syn = np.nonzero(syn & ack & (p.dir == 1))[0]
    if c_syn.shape[0] + s_syn.shape[0] < 3 or not s_syn.shape[0] or not c_syn.shape[0]:
        return None  # one SYN and one SYN/ACK (or none): nothing was repeated
    # the handshake-completing ACK: the client's first non-SYN ACK of the server's ISN + 1
    # after a SYN/ACK (stream offsets: ack −1 … 0 is ISN + 1)
    done = np.nonzero((p.dir == 0) & ~syn & ack & (p.ack == 0) & (p.frame > p.frame[s_syn[0]]))[0]
    if not done.shape[0] or ((p.flags[: done[0]] & RST) != 0).any():
        return None  # never completed in the capture (or refused): no request waited
    i_done = int(done[0])
    c_syn = c_syn[c_syn < i_done]
    s_syn = s_syn[s_syn < i_done]
    if c_syn.shape[0] + s_syn.shape[0] < 3:
        return None
    t0, t_done = int(p.ts[c_syn[0]]), int(p.ts[i_done])
    last_sa = int(s_syn[-1])  # the SYN/ACK the client answered: the last one before its ACK
    # one round trip d_C + d_S (what the handshake takes without loss, at any vantage).
    # d_S: the refined server leg (the first SYN/ACK after the last SYN before it, lowered
    # by data → ACK samples).  d_C: lowered by data samples, or the handshake's own when the
    # client answered the first SYN/ACK P saw; else unknown — then the client answered the
    # last SYN/ACK before its ACK, so the cost is at least t(that SYN/ACK) − t0 − d_S.
    dc_hs, ds_hs = ctx.legs_ns(f)
    sc, ss = sampled_legs_ns(ctx, f)
    first_sa = int(s_syn[0])
    clean = first_sa == last_sa and not (c_syn > first_sa).any()
    dc = sc if sc is not None else (dc_hs if clean else None)
    ds = ss if ss is not None else (ds_hs if s_syn.shape[0] == 1 else None)
    if ds is None:  # the SYN/ACKs repeat: the shortest SYN → SYN/ACK at P
        prev = [int(p.ts[i]) - int(p.ts[c_syn[c_syn < i][-1]]) for i in s_syn if (c_syn < i).any()]
        ds = min(prev) if prev else 0
    dc_ok = dc is not None
    method = "measured_interval"
    if dc_ok:
        assert dc is not None
        rtt = dc + ds
        cost = t_done - t0 - rtt
    else:
        rtt = ds + (t_done - int(p.ts[last_sa]))
        cost = int(p.ts[last_sa]) - t0 - ds
        method = "lower_bound"
    if cost < min_cost_ms * MS:
        return None
    # where P sits (the handshake's label is what the repeats corrupt)
    side = "unknown"
    if dc_ok and dc is not None:
        if dc <= 0.3 * ds:
            side = "client"
        elif ds <= 0.3 * dc:
            side = "server"
        else:
            side = "middle"
    # a repeated SYN proves a SYN/ACK seen here did not reach the client only if it left
    # the client after that SYN/ACK could have arrived: ≥ d_C after P saw it (a SYN timer
    # and a SYN/ACK timer of 1 s each often cross on the path)
    slack = max(MS, dc // 4) if dc is not None else None
    late = [
        (int(a), int(b))
        for a in s_syn.tolist()
        for b in c_syn.tolist()
        if slack is not None and dc is not None and int(p.ts[b]) - int(p.ts[a]) >= dc + slack
    ]
    sa_repeats = s_syn.shape[0] > 1
    checks = [
        f"the handshake completed (frame {int(p.frame[i_done])}): a request waited for it",
        "one connection: every SYN carries the same initial sequence number",
        "the round trip from data → ACK samples, not from the repeated handshake packets"
        if sc is not None and ss is not None
        else "no data → ACK sample for a leg: the handshake's own legs stand in",
    ]
    if late:
        a, b = late[0]
        lost = "syn_ack"
        where = (
            f"the SYN/ACK (frame {int(p.frame[a])}) passed this capture point but did not "
            f"reach the client's TCP: it sent its SYN again (frame {int(p.frame[b])}) after "
            "the SYN/ACK should have arrived (lost between here and the client)"
        )
    elif sa_repeats:
        lost = "syn_ack"
        where = (
            "the server answered the first SYN (its SYN/ACK repeats: no ACK came back), so a "
            "SYN/ACK or the client's ACK of it was lost, not the SYN"
            + (" — after leaving this capture point at the server" if side == "server" else "")
        )
    elif side == "server":
        lost = "syn_dropped_by_server"
        where = (
            f"the first SYN reached the server's capture point (frame {int(p.frame[c_syn[0]])}) "
            "and got no answer: the server's host dropped it (listen queue full, a firewall)"
        )
    else:
        lost = "syn_or_syn_ack"
        where = (
            f"the first SYN (frame {int(p.frame[c_syn[0]])}) got no answer here: it was lost "
            "on its way to the server, or its SYN/ACK on the way back (this vantage cannot "
            "tell which; a SYN lost before the server is invisible at the server)"
        )
    req = request_waiting(ctx, f, t_done + 1)
    who = request_words(req)
    n_syn, n_sa = int(c_syn.shape[0]), int(s_syn.shape[0])
    ev: list[Evidence] = [Evidence(int(p.frame[c_syn[0]]), "first SYN", t0)]
    for i in c_syn[1:].tolist():
        ev.append(Evidence(int(p.frame[i]), "SYN retransmission", int(p.ts[i])))
    ev.append(Evidence(int(p.frame[first_sa]), "SYN/ACK", int(p.ts[first_sa])))
    for i in s_syn[1:].tolist():
        ev.append(Evidence(int(p.frame[i]), "SYN/ACK retransmission", int(p.ts[i])))
    ev.append(Evidence(int(p.frame[i_done]), "handshake complete", t_done))
    if req and req["frame"] is not None:
        ev.append(Evidence(int(req["frame"]), "request that waited", None))
    r = ctx.flow(f)
    explanation = (
        f"The TCP handshake took {(t_done - t0) / MS:.0f} ms instead of one round trip"
        + (f" ({rtt / MS:.1f} ms)" if method == "measured_interval" else "")
        + ": "
        f"{n_syn} SYN{'s' if n_syn != 1 else ''} and {n_sa} "
        f"SYN/ACK{'s' if n_sa != 1 else ''} were sent — {where}. The repair waited for the "
        "handshake's retransmission timer (1 s on Linux, 3 s on older stacks; no round-trip "
        f"estimate exists yet), so the connection could carry nothing for "
        + ("at least " if method == "lower_bound" else "")
        + f"{cost / MS:.0f} ms"
        + (f": {who} waited that long." if who else ".")
    )
    return Finding(
        kind="syn_retransmission",
        request=None if req is None else req["id"],
        flow=f,
        dir=DIRS[0],
        t_start_ns=t0,
        t_end_ns=t_done,
        cost_ms=cost / MS,
        cost_method=method,
        evidence=ev,
        vantage=side,
        confidence=0.9 if lost != "syn_or_syn_ack" else 0.85,
        checks=checks,
        explanation=explanation,
        remedy=(
            "The loss is on the path or at the server's host (a full listen queue drops SYNs: "
            "raise the backlog / net.core.somaxconn, check SYN cookies and firewalls). "
            "Clients can race a second connection attempt after a short wait (Happy "
            "Eyeballs-style, RFC 8305) rather than wait for the 1 s SYN timer, and keep "
            "connections alive and reused so a handshake is rarely on a request's path."
        ),
        display_filter=f"tcp.stream == {int(r.stream)} && tcp.flags.syn == 1",
        details={
            "lost": lost,
            "syns": n_syn,
            "syn_acks": n_sa,
            "handshake_ms": (t_done - t0) / MS,
            "rtt_ms": rtt / MS if method == "measured_interval" else None,
            "request": req,
        },
    )
