"""Nagle's algorithm and its interaction with delayed ACK (N1, N2: DETECTION.md §2).

Mechanism (§2.1).  RFC 896 and RFC 9293 §3.7.4: "If there is unacknowledged data
(i.e., SND.NXT > SND.UNA), then the sending TCP endpoint buffers all user data
(regardless of the PSH bit) until the outstanding data has been acknowledged or
until the TCP endpoint can send a full-sized segment" — SHOULD implement, MUST be
disableable (TCP_NODELAY).  Linux uses Minshall's variant: a partial segment is held
only while a previously sent *small* segment is unacknowledged (``tcp_nagle_check``,
``tcp_minshall_check``); full-sized segments and FIN are never held.  When the
receiver delays its ACK (RFC 1122 §4.2.3.2 / RFC 5681 §4.2: SHOULD delay, MUST ACK
within 0.5 s; Linux ≥ ``TCP_DELACK_MIN`` = 40 ms, Windows 200 ms, BSD/macOS 100 ms)
the held write waits one delayed-ACK timer plus one round trip.

Signature (§2.3), per direction X → Y, on new data only:

* S1, S2 consecutive new-data segments from X (nothing else from X in between,
  contiguous, no capture gap); S1 small in Minshall's sense (``len < eff_mss``; a GSO
  super-segment is small iff ``len mod eff_mss ≠ 0``, §1.3/§1.4); S2 partial too (a
  full MSS is never held by Nagle) and without FIN (``tcp_nagle_test`` lets FIN go);
* A = first packet from Y acknowledging S1, before S2, acknowledging exactly what X
  had sent (every sub-MSS segment);
* coupling: ``t(S2) − t(A) − d_X ∈ [−tol, tol + late slack]`` with ``tol = max(0.5 ms,
  3·jitter_X)`` when X's reaction jitter can be measured, else ``max(0.5 ms, 0.25·d_X)``
  (§2.3); a release is never early, but may be late on a busy sender;
* the wait: ``t(S2) − t(S1) ≥ d_X + d_Y − tol`` (S2 waited at least one RTT: not
  pacing, not back-to-back writes);
* ``D = t(A) − t(S1) − d_Y`` (the receiver's ACK delay, §1.1).  A pure ACK with
  D ∈ [30 ms, 500 ms] ⇒ ``nagle_delayed_ack`` (N2) with an OS guess from D; otherwise
  (quick ACK, piggy-backed release, ACK later than RFC 1122 allows) ⇒ ``nagle`` (N1).

The legs d_C, d_S are the handshake's, lowered by min-filtered data→ACK samples (§1.2:
the SYN/ACK leg includes the server's SYN processing).  Every "what had reached X"
question is asked causally: a packet from Y seen at P reaches X d_X after P sees it.

Cost (§2.4): t(S2) − t(S1).  At the sender's vantage it is an upper bound (it assumes
S2 was written right after S1, true for write-write-read; serialisation of a sub-MSS
segment is µs and neglected); at the receiver or in the middle it is a measured
interval (same-direction packets, unbiased by the vantage, §1.1).  ``details`` carry
the expected cost d_X + d_Y + D and the direction's count/total/p50/p95.

Counter-hypotheses (§2.5) checked per event and listed in ``checks``: cwnd-limited
(A acknowledges < 2·MSS in at most two segments — cwnd ≥ 2 outside loss recovery —
and no retransmission within 2 RTT: cwnd = 1 after an RTO mimics Nagle), rwnd-limited
(S1 did not fill Y's window, A opens room for S2), application request/response (no
data from Y reached X between A and S2; a piggy-backed A counts only when Y was sending
on its own, i.e. sent data after S1 before acknowledging it), pacing (coupling to the
ACK), loopback MSS (small is relative to the negotiated MSS), GSO super-segments,
capture drops (no gap, A does not acknowledge unseen data), keep-alives and zero-window
probes (not new data: they break the S1/S2 pair).  Nagle switched off: a partial
segment that left while an earlier small one could not yet have been acknowledged is
impossible with Nagle on, so such a direction (TCP_NODELAY) reports nothing.  A hold
released by a non-delayed ACK (N1) is reported only with corroboration: ≥ 3 coupled
holds that are also ≥ half of the direction's testable pairs (a chance coincidence
within ±tol of an ACK has probability ≈ 2·tol/gap per exchange, §2.3; an application
cadence near the RTT couples now and then, §8.1a), or TLS evidence that the held bytes
were waiting (several records completed in S2, or S1 ending inside a record).

The direction view, the legs, the coupling tolerance and the S1/A/S2 scan itself are the
shared TCP model (:mod:`.tcp_model`: :class:`~.tcp_model.DirView`,
:func:`~.tcp_model.find_holds`, :func:`~.tcp_model.accepted_holds`); this module turns
the accepted holds into findings.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Evidence, Finding, frame_filter
from .constants import (
    DELACK_TIMER_MIN_NS,
    MIN_COUPLED_SHARE,
    MIN_REPEATS,
    MS,
    RFC1122_ACK_DELAY_MAX_NS,
)
from .context import DIRS, DetectContext
from .spec import DetectorSpec, Kind, Threshold
from .tcp_model import (
    DirView,
    Hold,
    accepted_holds,
    cost_method_for,
    cost_stats,
    os_guess,
    role_name,
    scan_holds_all,
    side_of,
)

SPEC = DetectorSpec(
    kinds=(
        Kind("nagle", "N1", "DETECTION.md §2", holds=True),
        Kind("nagle_delayed_ack", "N2", "DETECTION.md §2", holds=True),
    ),
    thresholds=(
        Threshold(
            "delack_timer_min_ms",
            "ms",
            "DETECTION.md §2.3: a receiver delay ≥ 30 ms is a timer (Linux TCP_DELACK_MIN is 40 ms)",
        ),
        Threshold(
            "ack_delay_max_ms",
            "ms",
            "RFC 1122 §4.2.3.2: the ACK delay MUST be less than 0.5 seconds",
        ),
        Threshold(
            "min_repeats",
            "count",
            "DETECTION.md §2.3: ≥ 3 coupled exchanges make coincidence negligible",
            minimum=1,
        ),
        Threshold(
            "min_coupled_share",
            "fraction",
            "share of S1/S2 pairs coupled to an ACK before quick-ACK holds are believed (§8.1a)",
            maximum=1.0,
        ),
    ),
)
KINDS = SPEC.kind_names


def detect(
    ctx: DetectContext,
    *,
    delack_timer_min_ms: float = DELACK_TIMER_MIN_NS / MS,
    ack_delay_max_ms: float = RFC1122_ACK_DELAY_MAX_NS / MS,
    min_repeats: int = MIN_REPEATS,
    min_coupled_share: float = MIN_COUPLED_SHARE,
) -> list[Finding]:
    """Nagle holds (``nagle``) and Nagle × delayed-ACK holds (``nagle_delayed_ack``)."""
    out: list[Finding] = []
    views = [
        v for f in ctx.tcp_flows() for d in (0, 1) if (v := DirView.timed(ctx, f, d)) is not None
    ]
    # the scans that list no hold, for every direction at once (delayed_ack made those
    # of its directions with candidate ACKs already)
    scan_holds_all(
        ctx,
        [v for v in views if v.y_idx.size],
        delack_timer_min_ms=delack_timer_min_ms,
        ack_delay_max_ms=ack_delay_max_ms,
    )
    for view in views:
        kept = accepted_holds(
            ctx,
            view,
            delack_timer_min_ms=delack_timer_min_ms,
            ack_delay_max_ms=ack_delay_max_ms,
            min_repeats=min_repeats,
            min_coupled_share=min_coupled_share,
        )
        if kept:
            out.extend(_findings(ctx, view, kept))
    return out


def _findings(ctx: DetectContext, v: DirView, holds: list[Hold]) -> list[Finding]:
    f, d, p = v.f, v.d, v.p
    side = side_of(ctx, f, d)
    method = cost_method_for(side)
    sender, receiver = ctx.endpoint(f, d), ctx.peer(f, d)
    x_role, y_role = role_name(d), role_name(1 - d)
    stream = int(ctx.flow(f).stream)
    small_psh = int((np.asarray(v.small(np.arange(v.s_frame.size)), bool) & v.s_psh).sum())
    stats = {
        k: cost_stats([h.gap_ns / MS for h in holds if h.kind == k])
        for k in ("nagle", "nagle_delayed_ack")
    }
    out = []
    for h in holds:
        i1, ia, i2 = int(v.s_pi[h.j1]), h.a_pi, int(v.s_pi[h.j2])
        f1, fa, f2 = int(p.frame[i1]), int(p.frame[ia]), int(p.frame[i2])
        l1, l2 = int(v.s_len[h.j1]), int(v.s_len[h.j2])
        cost = h.gap_ns / MS
        d_ms = h.delay_ns / MS
        ev = [
            Evidence(f1, "first_segment", int(p.ts[i1])),
            Evidence(fa, "releasing_ack", int(p.ts[ia])),
            Evidence(f2, "held_segment", int(p.ts[i2])),
        ]
        frames_txt = f"frames {f1}, {fa}, {f2}"
        if h.kind == "nagle_delayed_ack":
            os_name, os_words = os_guess(d_ms)
            expl = (
                f"The {sender}'s {l2}-byte segment waited {cost:.1f} ms: Nagle's algorithm "
                f"held it behind the unacknowledged {l1}-byte segment before it until the "
                f"{receiver}'s delayed ACK arrived, and the {y_role} had held that ACK "
                f"≈{d_ms:.1f} ms ({os_words}) — {frames_txt}."
            )
            confidence = 0.95 if len(holds) >= 3 else 0.85
            expected = (v.d_x + v.d_y + h.delay_ns) / MS
        else:
            os_name = None
            why = {
                "quick_ack": f"the {y_role} acknowledged it at once, so the hold cost one round "
                "trip",
                "piggybacked": f"the ACK came piggy-backed on the {y_role}'s own data",
                "ack_too_late": f"the {y_role}'s ACK came {d_ms:.0f} ms late — longer than "
                "RFC 1122's 500 ms limit for a delayed ACK, so not a delayed-ACK timer "
                "(receiver stall or lost ACK)",
            }[h.note]
            expl = (
                f"The {sender}'s {l2}-byte segment waited {cost:.1f} ms: Nagle's algorithm "
                f"held it behind the unacknowledged {l1}-byte segment before it until the "
                f"{receiver} acknowledged that segment; {why} — {frames_txt}."
            )
            confidence = (0.7 if h.pure else 0.5) + (0.1 if len(holds) >= 3 else 0.0)
            expected = (v.d_x + v.d_y + max(h.delay_ns, 0)) / MS
        st = stats[h.kind]
        if st["count"] > 1:
            expl += (
                f" One of {st['count']} such holds in this direction (p50 {st['p50_ms']:.1f} ms, "
                f"p95 {st['p95_ms']:.1f} ms, {st['total_ms']:.0f} ms in all)."
            )
        remedy = (
            f"Set TCP_NODELAY on the {x_role}'s socket ({sender.split(' ', 1)[1]}), or hand each "
            "message to the kernel in one call (build header and body in one buffer, or "
            "writev/sendmsg with all parts) so no small write follows another small write "
            "within a round trip."
        )
        if h.kind == "nagle_delayed_ack":
            remedy += (
                f" TCP_QUICKACK on the {y_role}'s socket (re-armed after every recv) would only "
                "hide the symptom."
            )
        details: dict[str, Any] = {
            "s1_len": l1,
            "s2_len": l2,
            "gap_ms": round(cost, 3),
            "lag_ms": round(h.lag_ns / MS, 3),
            "ack_delay_ms": round(d_ms, 3),
            "d_x_ms": round(v.d_x / MS, 3),
            "d_y_ms": round(v.d_y / MS, 3),
            "tolerance_ms": round(h.tol_ns / MS, 3),
            "release": "pure_ack" if h.pure else "piggybacked",
            "expected_cost_ms": round(expected, 3),
            "vantage_side": side,
            "eff_mss": v.mss,
            "direction_holds": {k: s for k, s in stats.items() if s["count"]},
            "share_of_small_psh_segments": round(len(holds) / small_psh, 3) if small_psh else None,
            "frames_filter": frame_filter([f1, fa, f2]),
        }
        if os_name is not None:
            details["os_guess"] = os_name
        if h.note != "delayed_ack":
            details["note"] = h.note
        if h.tls_records or h.tls_split:
            details["tls_records_in_held_segment"] = h.tls_records
            details["s1_ends_inside_record"] = h.tls_split
        out.append(
            Finding(
                kind=h.kind,
                flow=f,
                dir=DIRS[d],
                t_start_ns=int(p.ts[i1]),
                t_end_ns=int(p.ts[i2]),
                cost_ms=cost,
                cost_method=method,
                evidence=ev,
                explanation=expl,
                remedy=remedy,
                display_filter=f"tcp.stream == {stream} && frame.number >= {f1} && "
                f"frame.number <= {f2}",
                vantage=ctx.vantage(f),
                confidence=min(confidence, 0.99),
                checks=list(h.checks),
                details=details,
            )
        )
    return out
