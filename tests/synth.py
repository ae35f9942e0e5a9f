"""SYNTHETIC packets for unit tests of edge cases (built with scapy, not real traffic).

Real-traffic tests use the project's fixtures (made by the lab) and the external
corpus; these helpers only build frames that exercise one parser rule at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

C_IP, S_IP = "10.1.0.1", "10.2.0.2"
C6, S6 = "2001:db8::1", "2001:db8::2"


@dataclass
class Conn:
    """A scripted TCP connection: builds frames with consistent seq/ack numbers."""

    cport: int = 40000
    sport: int = 443
    cisn: int = 1000
    sisn: int = 5000
    v6: bool = False
    t0: int = 1_700_000_000_000_000_000
    frames: list[tuple[int, bytes]] = field(default_factory=list)
    c_next: int = 0  # next offset to send c2s
    s_next: int = 0

    def ip(self, c2s: bool) -> Packet:
        if self.v6:
            return IPv6(src=C6, dst=S6) if c2s else IPv6(src=S6, dst=C6)
        return IP(src=C_IP, dst=S_IP) if c2s else IP(src=S_IP, dst=C_IP)

    def raw(
        self,
        t_us: float,
        c2s: bool,
        flags: str,
        seq: int,
        ack: int,
        payload: bytes = b"",
        options: list | None = None,
        window: int = 65535,
    ) -> bytes:
        tcp = TCP(
            sport=self.cport if c2s else self.sport,
            dport=self.sport if c2s else self.cport,
            flags=flags,
            seq=seq & 0xFFFFFFFF,
            ack=ack & 0xFFFFFFFF,
            window=window,
            options=options or [],
        )
        pkt = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / self.ip(c2s) / tcp
        if payload:
            pkt = pkt / Raw(payload)
        data = bytes(pkt)
        self.frames.append((self.t0 + int(t_us * 1000), data))
        return data

    def handshake(
        self, t_us: float = 0, rtt_us: float = 20_000, client_leg_us: float = 50, opts: bool = True
    ) -> None:
        syn_opts = (
            [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1, 0)), ("NOP", None), ("WScale", 7)]
            if opts
            else []
        )
        self.raw(t_us, True, "S", self.cisn, 0, options=syn_opts)
        self.raw(t_us + rtt_us, False, "SA", self.sisn, self.cisn + 1, options=syn_opts)
        self.raw(t_us + rtt_us + client_leg_us, True, "A", self.cisn + 1, self.sisn + 1)

    def c2s(
        self, t_us: float, payload: bytes, *, offset: int | None = None, flags: str = "PA"
    ) -> bytes:
        off = self.c_next if offset is None else offset
        data = self.raw(
            t_us, True, flags, self.cisn + 1 + off, self.sisn + 1 + self.s_next, payload
        )
        self.c_next = max(self.c_next, off + len(payload))
        return data

    def s2c(
        self,
        t_us: float,
        payload: bytes,
        *,
        offset: int | None = None,
        flags: str = "PA",
        window: int = 65535,
    ) -> bytes:
        off = self.s_next if offset is None else offset
        data = self.raw(
            t_us,
            False,
            flags,
            self.sisn + 1 + off,
            self.cisn + 1 + self.c_next,
            payload,
            window=window,
        )
        self.s_next = max(self.s_next, off + len(payload))
        return data

    def ack_c(self, t_us: float, window: int = 65535, ack_off: int | None = None) -> bytes:
        """Pure ACK from the client acknowledging the server stream."""
        a = self.s_next if ack_off is None else ack_off
        return self.raw(
            t_us, True, "A", self.cisn + 1 + self.c_next, self.sisn + 1 + a, window=window
        )

    def ack_s(self, t_us: float, window: int = 65535, ack_off: int | None = None) -> bytes:
        a = self.c_next if ack_off is None else ack_off
        return self.raw(
            t_us, False, "A", self.sisn + 1 + self.s_next, self.cisn + 1 + a, window=window
        )


def udp_frame(payload: bytes, sport: int = 5353, dport: int = 53) -> bytes:
    return bytes(Ether() / IP(src=C_IP, dst=S_IP) / UDP(sport=sport, dport=dport) / Raw(payload))
