"""Kernel, RFC and DETECTION.md constants that more than one detector (or the TCP model,
:mod:`.tcp_model`) uses — one value, one unit, one source each.

Times are integer nanoseconds (``*_NS``, DESIGN.md §2); sizes are bytes or segments.
Detectors keep their own threshold keyword arguments (names, units and defaults as they
were); where a threshold is one of these constants its default is computed from here
(e.g. ``rto_min_ms: float = TCP_RTO_MIN_NS / MS``), so the number lives in one place.
Constants only one detector uses stay in that detector, next to the rule they serve.

TLS content types are :class:`ContentType` (RFC 8446 §5.1), the dissector's IntEnum
re-exported through :mod:`pcapkit.sessions.tls` (only ``sessions`` imports
``dissectors``); never bare 20…23.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..sessions.tls import HEADER_LENGTH, MAX_PLAINTEXT_LENGTH, ContentType
from .spec import Threshold

MS = 1_000_000  # ns per millisecond

# --- Linux TCP timers (include/net/tcp.h, kernel 6.1; DETECTION.md §2.1, §3.1) ----------
# TCP_RTO_MIN = HZ/5: the floor of rttvar in __tcp_set_rto (RTO ≈ srtt + max(200 ms,
# 4·mdev)) and of tcp_probe0_base() — the probe timer that flushes a corked partial
# segment and paces zero-window probes (tcp_write_wakeup).
TCP_RTO_MIN_NS = 200 * MS
# TCP_DELACK_MIN = TCP_ATO_MIN = HZ/25: Linux never delays an ACK less than this;
# TCP_DELACK_MAX = HZ/5 (the default icsk_delack_max).
TCP_DELACK_MIN_NS = 40 * MS
TCP_DELACK_MAX_NS = 200 * MS
# One jiffy at HZ=100, the coarsest timer granularity of a common kernel build: a timer
# fires up to this late (DETECTION.md §2.1: "+0…10 ms" at HZ=100).
JIFFY_HZ100_NS = 10 * MS

# --- RFCs ------------------------------------------------------------------------------
# RFC 1122 §4.2.3.2: "the delay MUST be less than 0.5 seconds" — a longer ACK delay is not
# a delayed-ACK timer (receiver stall, lost ACK, …).
RFC1122_ACK_DELAY_MAX_NS = 500 * MS
# RFC 6928 initial congestion window (Linux TCP_INIT_CWND): 10 segments.
IW_SEGMENTS = 10
# RFC 8446 §5.1: the record header (type, legacy version, length) is 5 bytes and the
# plaintext of one record "MUST NOT exceed 2^14 bytes" (the dissector's constants).
TLS_HEADER = HEADER_LENGTH
TLS_MAX_PLAINTEXT = MAX_PLAINTEXT_LENGTH

# --- Delayed-ACK timer classes (DETECTION.md §2.3) --------------------------------------
# A receiver delay ≥ 30 ms is a timer: below Linux's 40 ms floor, above LAN jitter.
DELACK_TIMER_MIN_NS = 30 * MS
# OS guess from the receiver's ACK delay D, in ms: (low, high, name, words).
DELACK_OS_BANDS_MS = (
    (35.0, 60.0, "linux", "Linux's ≥ 40 ms delayed-ACK timer (TCP_DELACK_MIN) plus up to a jiffy"),
    (90.0, 110.0, "bsd_macos", "the BSD/macOS 100 ms delayed-ACK timer"),
    (150.0, 220.0, "windows", "the Windows 200 ms delayed-ACK timer (TcpDelAckTicks)"),
)

# --- "Released by an ACK": the coupling tolerance (DETECTION.md §1.1, §2.3) --------------
# A segment released by a packet from Y leaves X when that packet arrives: at the capture
# point t(S) − t(packet) ≈ d_X.  Tolerance: max(LAG_TOL_MIN, 3·jitter_X) where X's
# reaction jitter is measured (robust σ of X's immediate pure ACKs of Y's data, seen at
# P, with ≥ JITTER_MIN_SAMPLES of them), else the proxy max(LAG_TOL_MIN, LAG_TOL_FRACTION
# · d_X) ("scheduling jitter scales with path noise", §2.3).  The proxy is not added when
# the jitter is measured: on a 30 ms leg it allows ±7.5 ms, wide enough for an
# application cadence to couple by chance.
LAG_TOL_MIN_NS = 500_000
LAG_TOL_FRACTION = 0.25
JITTER_MIN_SAMPLES = 4
# A release can be late, never early: a busy sender may process the ACK a little later
# (softirq deferred to ksoftirqd; the lab's 2-core host showed 0.8 ms).  Allowed on the
# late side only, well under one jiffy at HZ=250 (4 ms).  The coupling window is thus
# −tol ≤ t(S) − t(packet) − d_X ≤ tol + LATE_SLACK (tcp_model.DirView.coupled).
LATE_SLACK_NS = 2 * MS

# --- Nagle holds (DETECTION.md §2.3, §8.1a) ----------------------------------------------
# "≥ 3 coupled exchanges make coincidence negligible" (§2.3) …
MIN_REPEATS = 3
# … and they must be at least half of the direction's testable S1/S2 pairs before a hold
# released by a quick ACK (N1) is believed: an application cadence close to the RTT
# couples now and then by chance (§8.1a), Nagle couples every time.
MIN_COUPLED_SHARE = 0.5

# --- Flights and timers seen on the wire -----------------------------------------------
# DETECTION.md §5.2 / §7.1: pieces ≥ ½ RTT apart were sent in different flights (the
# sender waited for ACKs between them).
FLIGHT_BREAK_RTT = 0.5
# … and at least this far apart: §1.4 warns off causal readings of gaps < 50 µs; on
# loopback and LANs (RTT ~0.05–0.5 ms) sub-millisecond gaps are scheduling, not flights,
# and a wait that short is not a delay anyone feels (judgement: one HZ=1000 jiffy).
FLIGHT_GAP_MIN_NS = 1 * MS
# §3.2 C2: autocork/TSQ releases on TX completion — µs to sub-ms after the previous
# segment.
AUTOCORK_MAX_GAP_NS = 1 * MS
# The probe timer fires RTO after the write; RTO's variance term is unknown (only srtt is
# on the wire), so a cork release is allowed up to 25 % above the RTO estimate (judgement;
# §3.2 clusters releases at 200–240 ms; lab: 236 ms for RTO 232 ms, loopback 208 ms).
RTO_HIGH_FACTOR = 1.25

__all__ = [
    "AUTOCORK_MAX_GAP_NS",
    "DELACK_OS_BANDS_MS",
    "DELACK_TIMER_MIN_NS",
    "FLIGHT_BREAK_RTT",
    "FLIGHT_GAP_MIN_NS",
    "IW_SEGMENTS",
    "JIFFY_HZ100_NS",
    "JITTER_MIN_SAMPLES",
    "LAG_TOL_FRACTION",
    "LAG_TOL_MIN_NS",
    "LATE_SLACK_NS",
    "MIN_COUPLED_SHARE",
    "MIN_REPEATS",
    "MS",
    "RFC1122_ACK_DELAY_MAX_NS",
    "RTO_HIGH_FACTOR",
    "TCP_DELACK_MAX_NS",
    "TCP_DELACK_MIN_NS",
    "TCP_RTO_MIN_NS",
    "TLS_HEADER",
    "TLS_MAX_PLAINTEXT",
    "ContentType",
]


# --- the settable coupling window (one for every detector) ---------------------------------
@dataclass(frozen=True)
class Coupling:
    """The one "released by an ACK" window every detector uses (DETECTION.md §2.3): X's
    packet left ``d_X`` after a packet from Y, within −tol … tol + late, where tol is
    max(``tol_min_ms``, 3·jitter_X) with X's reaction jitter measured, else
    max(``tol_min_ms``, ``tol_fraction``·d_X).  Settable as ``tcp.<field>``
    (:data:`COUPLING_SETTINGS`), once for all detectors; ``DetectContext.coupling``."""

    tol_min_ms: float = LAG_TOL_MIN_NS / MS
    tol_fraction: float = LAG_TOL_FRACTION
    late_slack_ms: float = LATE_SLACK_NS / MS

    @property
    def late_ns(self) -> int:
        return int(self.late_slack_ms * MS)


# The model's settable thresholds (``tcp.<name>``, pcapkit thresholds): the fields of
# Coupling, with their defaults there.
COUPLING_SETTINGS = (
    Threshold(
        "tol_min_ms",
        "ms",
        "DETECTION.md §2.3: floor of the release-lag tolerance max(0.5 ms, 3·jitter_X), "
        "or max(0.5 ms, ¼·d_X) when X's jitter cannot be measured",
    ),
    Threshold(
        "tol_fraction",
        "fraction",
        "DETECTION.md §2.3: ¼·d_X, used when X's jitter cannot be measured",
        maximum=1.0,
    ),
    Threshold(
        "late_slack_ms",
        "ms",
        "a release can be late on a busy host (0.8 ms seen in the lab), well under a HZ=250 jiffy",
    ),
)

# The findings table holds times as int64 nanoseconds: no finding time lies outside these.
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
