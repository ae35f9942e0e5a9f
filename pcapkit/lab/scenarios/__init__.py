"""The scenario registry: named, reproducible traffic recipes, mostly positive/control pairs.

A :class:`Scenario` says what runs where (a server function in the server namespace, a
client function in the client namespace — real kernel TCP and Python ``ssl``), with which
path impairment and socket options (its ``params``, every one overridable from
:func:`pcapkit.lab.runner.run` or ``pcapkit lab run --set``), which pathology its captures
must show (``expected``, empty for a control), and how to turn what the processes and the
forwarder recorded into ground truth for ``scenario.json``.

Pairs and lone controls: most scenarios come as a positive and its control, each naming
the other in ``pair`` (the control's ``controls`` = the positive's ``expected``).  A control
may also stand alone (``pair=None``): healthy traffic that must trigger none of several
pathologies at once — the bulk transfers of :mod:`.bulk` (DETECTION.md §1.4 offload
artefacts; issue 5 "no false alarms on healthy traffic") have no positive twin.  A
positive always has a pair.

Topology (``topology``, DETECTION.md §8.1; :mod:`pcapkit.lab.netns`): ``"tun"`` (default)
is the forwarder path — two namespaces joined by the userspace forwarder over TUN, with
delay, rate, drops and the optional middle vantage, wire-sized segments.  Two
forwarder-less topologies exist for the offload artefacts the TUN path cannot show:
``"loopback"`` (client and server in one namespace over ``lo``: MSS 65 483, 64 KB
segments; one capture, ``client.pcapng``, which is both ends' vantage) and ``"veth"`` (a
veth pair between two namespaces, offloads left on: GSO super-segments at both ends).
They have no path impairment (the path parameters must stay at their zero defaults) and
no middle vantage.

Scenario modules register themselves on import; :func:`load_all` imports the built-in ones.
The recipes follow DETECTION.md §8.2 (positive / control matrix) and §8.1a (practical notes).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Pathology names used in ``expected`` / ``controls`` / ``incidental`` — stable public names
# (detectors and CI refer to them) — with DETECTION.md's code and section.
PATHOLOGIES: dict[str, tuple[str, str]] = {
    "nagle": ("N1", "DETECTION.md §2"),
    "nagle_delayed_ack": ("N2", "DETECTION.md §2"),
    "delayed_ack": ("D1", "DETECTION.md §2.7"),
    "tcp_cork": ("C1", "DETECTION.md §3"),
    "tcp_hol_blocking": ("H1", "DETECTION.md §4.1"),
    "h2_flow_control_stall": ("H2", "DETECTION.md §4.2"),
    "h2_send_buffer_hol": ("H3", "DETECTION.md §4.3"),
    "quic_stream_hol": ("Q1", "DETECTION.md §4.4"),
    "h3_single_stream_hol": ("Q3", "DETECTION.md §4.5"),
    "quic_flow_control_stall": ("Q2", "DETECTION.md §4.5; RFC 9000 §4"),
    "zero_rtt_unused": ("Q4", "DETECTION.md §7.6; RFC 9001 §4.6"),
    "quic_handshake_extra_rtt": ("Q5", "DETECTION.md §7.5; RFC 9000 §8.1"),
    "tls_tiny_records": ("T1", "DETECTION.md §5.1"),
    "tls_record_spanning": ("T2", "DETECTION.md §5.2"),
    "tls_record_split_write": ("T3", "DETECTION.md §5.3"),
    "tls_records_coalesced": ("T3", "DETECTION.md §5.4"),
    "slow_start_restart": ("R1", "DETECTION.md §7.1"),
    "zero_window": ("R2", "DETECTION.md §7.2"),
    "receiver_limited": ("R7", "DETECTION.md §11.5"),
    "connection_pool_queueing": ("P1", "DETECTION.md §11.3"),
    "h2_concurrency_limited": ("P2", "DETECTION.md §11.4"),
    "connection_not_reused": ("R3", "DETECTION.md §7.3"),
    "tls_resumption_missing": ("R4", "DETECTION.md §7.4"),
    "sse_batching": ("S1", "issue 6: events arrive in bursts"),
    "syn_retransmission": ("L1", "issue 22; RFC 6298 §2.1, §5.7"),
    "rto_stall": ("L2", "issue 22; RFC 6298 §5, RFC 8985 §7"),
    "connection_dead": ("L3", "issue 22; RFC 6298 §5.5, RFC 1122 §4.2.3.5"),
    "delivery_stall": ("L4", "issue 22: a path that delivers nothing for many round trips"),
    "loss_recovery": ("L5", "issue 22; RFC 5681 §3.2, RFC 8985"),
    "retry_ignored_retry_after": ("A1", "DETECTION.md §11.1"),
    "retry_amplification": ("A2", "DETECTION.md §11.2"),
    "client_timeout": ("A3", "DETECTION.md §11.6"),
}

# Parameters every scenario understands (the path and the run); scenarios add their own.
COMMON_PARAMS: dict[str, Any] = {
    "delay_ms": 10.0,  # one-way delay, both directions (RTT = 2 × delay)
    "delay_c2s_ms": None,  # per-direction override of delay_ms
    "delay_s2c_ms": None,
    "rate_mbit": None,  # both directions; None = unlimited
    "drop_c2s": [],  # 1-based payload-packet indices to drop, client → server
    "drop_s2c": [],
    "reorder_c2s": [],  # payload packets held back reorder_extra_ms so later ones overtake
    "reorder_s2c": [],
    "reorder_extra_ms": 5.0,
    "drop_syn_c2s": [],  # 1-based indices of the client's SYNs to drop (a lost handshake)
    "drop_syn_s2c": [],  # … of the server's SYN/ACKs
    "blackhole_c2s_after": None,  # after N payload packets, drop everything client → server
    "blackhole_s2c_after": None,
    "stall_c2s_after": None,  # after N payload packets, hold the direction for stall_ms
    "stall_s2c_after": None,
    "stall_ms": 0.0,
    "cc": "cubic",  # TCP_CONGESTION on both sockets (the host default here is bbr, which
    #                 paces and has its own idle handling: not what the recipes assume)
    "port": 9000,
    "sysctl_cli": {},  # per-namespace sysctls, e.g. {"net.ipv4.tcp_slow_start_after_idle": 0}
    "sysctl_srv": {},
    "timeout_s": 60.0,  # whole traffic phase; a stuck app is killed and the run fails
    "realtime_forwarder": True,  # SCHED_FIFO for the forwarder: without it a busy 2-core host
    #                              adds 1–4 ms outliers to single releases
}

GroundTruthFn = Callable[["RunData"], dict[str, Any]]
# Checks a finished run's scenario.json: a list of problems, empty when the run shows what the
# variant promises (the pathology for a positive, its absence for a control).
ValidateFn = Callable[[dict[str, Any]], list[str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunData:
    """What a finished run hands to a scenario's ground-truth function."""

    params: Mapping[str, Any]
    client: Mapping[str, Any]  # the client function's returned dict
    server: Mapping[str, Any]
    forwarder: Mapping[str, Any]  # the forwarder's log (stats, events, trace)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    name: str
    summary: str
    expected: tuple[str, ...]  # pathology names (PATHOLOGIES keys); () for a control
    # the other variant (control of a positive, positive of a control); None for a lone
    # control (healthy traffic controlling for several pathologies, no positive twin)
    pair: str | None
    server: str  # "module:function" run in the server namespace
    client: str  # "module:function" run in the client namespace
    params: Mapping[str, Any] = field(default_factory=dict)  # scenario defaults
    tls: bool = False
    ground_truth: GroundTruthFn | None = None
    help_example: str = ""
    # a control names the pathologies it controls for (its pair's ``expected``); () otherwise
    controls: tuple[str, ...] = ()
    # present in both variants as a side effect of the recipe (e.g. the TCP head-of-line
    # blocking every drop causes): a detector may report it or not, neither is an error
    incidental: tuple[str, ...] = ()
    what: str = ""  # one line for the fixtures README: what the capture shows
    validate: ValidateFn | None = None
    topology: str = "tun"  # "tun" (forwarder path) | "loopback" | "veth" (see above)
    # `pcapkit lab fixtures` also writes middle.pcapng (forwarder topology only); False
    # where the fixture budget (fixtures.FOLDER_BUDGET_BYTES) has no room for a third capture
    fixture_middle: bool = True
    # a positive's pathologies the wire cannot show at some vantages (pathology → vantages):
    # a SYN lost before the server's capture point never reaches it.  There the detector
    # must stay silent, and the vantages need not agree on it.
    unseen: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def variant(self) -> str:
        return "positive" if self.expected else "control"

    def defaults(self) -> dict[str, Any]:
        return {**COMMON_PARAMS, **self.params}

    def resolve(self, overrides: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults updated by ``overrides``; unknown keys are an error (typos must not pass)."""
        base = self.defaults()
        unknown = sorted(set(overrides) - set(base))
        if unknown:
            raise KeyError(
                f"unknown parameter(s) for {self.name}: {', '.join(unknown)} "
                f"(known: {', '.join(sorted(base))})"
            )
        base.update(overrides)
        return base


REGISTRY: dict[str, Scenario] = {}
_BUILTIN_MODULES = (
    "pcapkit.lab.scenarios.nagle",
    "pcapkit.lab.scenarios.tls_sse",
    "pcapkit.lab.scenarios.tls_records",
    "pcapkit.lab.scenarios.tls_partial",
    "pcapkit.lab.scenarios.cork",
    "pcapkit.lab.scenarios.rwnd",
    "pcapkit.lab.scenarios.concurrency",
    "pcapkit.lab.scenarios.ssr",
    "pcapkit.lab.scenarios.h2",
    "pcapkit.lab.scenarios.h2_stream",
    "pcapkit.lab.scenarios.h3",
    "pcapkit.lab.scenarios.reuse",
    "pcapkit.lab.scenarios.bulk",
    "pcapkit.lab.scenarios.stalls",
    "pcapkit.lab.scenarios.retries",
)
TOPOLOGIES = ("tun", "loopback", "veth")


def register(scenario: Scenario) -> Scenario:
    if scenario.name in REGISTRY:
        raise ValueError(f"scenario {scenario.name} registered twice")
    for p in (*scenario.expected, *scenario.controls, *scenario.incidental):
        if p not in PATHOLOGIES:
            raise ValueError(f"{scenario.name}: unknown pathology {p!r}")
    if scenario.expected and scenario.controls:
        raise ValueError(f"{scenario.name}: a positive does not control for anything")
    if not scenario.expected and not scenario.controls:
        raise ValueError(f"{scenario.name}: a control must say what it controls for")
    if scenario.expected and scenario.pair is None:
        raise ValueError(f"{scenario.name}: a positive needs its control (pair)")
    for p, where in scenario.unseen.items():
        if p not in scenario.expected or not set(where) <= {"client", "server", "middle"}:
            raise ValueError(f"{scenario.name}: unseen names {p!r} at {where!r}")
    if scenario.topology not in TOPOLOGIES:
        raise ValueError(f"{scenario.name}: unknown topology {scenario.topology!r}")
    REGISTRY[scenario.name] = scenario
    return scenario


def load_all() -> dict[str, Scenario]:
    for mod in _BUILTIN_MODULES:
        importlib.import_module(mod)
    return REGISTRY


def get(name: str) -> Scenario:
    load_all()
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"no scenario {name!r}; known: {', '.join(sorted(REGISTRY))}") from None
