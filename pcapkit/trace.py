"""``Trace``: the public facade over one capture (``pcapkit.open``).

A lazy cache that wires the layers' table builders (DESIGN.md §1), nothing more:
every table is built on first use by the layer that owns it and kept.  Every one
is a pandas DataFrame with the columns declared in :mod:`pcapkit.schema`
(``pcapkit.schema.describe(name)``):

* ``packets``, ``flows``, ``segments`` — :mod:`pcapkit.net.tables`;
* ``records``, ``tls`` — :mod:`pcapkit.align` over :mod:`pcapkit.sessions.tls`;
* ``quic``, ``messages`` (QUIC frames) — :mod:`pcapkit.sessions.quic`;
* ``messages``, ``requests``, ``h2_windows``, ``qpack_blocked`` —
  :mod:`pcapkit.sessions.http`;
* ``findings``, ``gaps`` — :mod:`pcapkit.detect`;
* ``anomalies`` — every layer's rows, :mod:`pcapkit.anomalies`.

Limits (issue 15, :mod:`pcapkit.limits`): ``pcapkit.open(path, limits={...})`` bounds
what a capture can claim (gzip inflation, connections analysed in detail, streams and
messages per connection, handshake bytes buffered); past a limit the analysis goes on and
an anomaly says what was only counted.  Connections beyond the ``connections`` limit keep
their rows in ``packets``, ``flows`` and ``segments`` but are not dissected (TLS, QUIC,
HTTP) nor examined by the detectors (:attr:`Trace.flows_in_detail`).

Failure isolation (issue 15): an unexpected exception while the TLS, QUIC or HTTP layer
dissects one connection, or inside one detector, drops that unit's output and becomes an
``internal_error`` row of ``anomalies`` (layer, flow or detector, exception type and
message, where it was raised); the analysis goes on.  Detector errors join the table once
the findings were computed.  ``PCAPKIT_STRICT=1`` raises them instead (debugging).

``Trace.stream(flow, "c2s"|"s2c")`` returns one direction's reassembled bytes;
``Trace.plaintext(flow, dir)`` the decrypted application data of one direction.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar, cast

import numpy as np
import pandas as pd

from . import schema
from .anomalies import anomalies_table, isolate
from .errors import UnsupportedLinkType
from .io.reader import LINKTYPE_NONE, RawCapture, read_capture
from .limits import Limits, limit_anomaly
from .limits import resolve as resolve_limits
from .net.decode import LINKTYPE_NAMES, PROTO_TCP, PROTO_UDP, SUPPORTED_LINKTYPES, Decoded, decode
from .net.flows import FlowTable, build_flows
from .net.streams import StreamBytes, empty_index, tcp_stream, udp_stream
from .net.tables import (
    flows_table,
    linktype_anomalies,
    packets_table,
    sack_blocks_table,
    segments_table,
)
from .net.tcp import DirectionIndex, TcpAnalysis, analyze_tcp

__all__ = ["Progress", "StreamBytes", "Trace", "open"]

Progress = Callable[[str, float], None]
_T = TypeVar("_T")
DIR_CODES = {"c2s": 0, "s2c": 1}


@dataclass
class _Net:
    dec: Decoded
    flows: FlowTable
    tcp: TcpAnalysis


class Trace:
    """One capture, analysed on demand.  Use :func:`pcapkit.open`.

    ``retime`` maps the capture's timestamps (int64 ns) onto another clock before any
    table is built (:mod:`pcapkit.vantage` puts a server capture on its client's).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        keylog: str | os.PathLike[str] | bytes | None = None,
        *,
        progress: Progress | None = None,
        redact: bool = True,
        embedded_keys: bool = True,
        thresholds: Mapping[str, Any] | None = None,
        limits: Mapping[str, Any] | None = None,
        retime: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> None:
        if thresholds:  # a bad name or value fails here, not after the read
            from .detect.registry import resolve_thresholds

            resolve_thresholds(thresholds)
        self.limits: Limits = resolve_limits(limits)
        self.thresholds = dict(thresholds or {})
        # internal_error rows of the connections and detectors that failed (isolated)
        self._errors: list[dict[str, Any]] = []
        self._anomaly_cache: tuple[int, pd.DataFrame] | None = None
        self.path = os.fspath(path)
        self.redact_secrets = redact
        self.embedded_keys = embedded_keys
        self._progress = progress
        self._report("read", 0.0)
        self.raw: RawCapture = read_capture(
            self.path, lambda f: self._report("read", f), limits=self.limits
        )
        self._report("read", 1.0)
        if retime is not None:  # another clock (pcapkit.vantage): before any table is built
            self.raw.ts_ns = np.asarray(retime(self.raw.ts_ns), np.int64)
        self.keylog = keylog
        lts = {i.linktype for i in self.raw.interfaces}
        used = set(np.unique(self.raw.linktype).tolist()) if self.raw.frames else set()
        if used and not (used & (SUPPORTED_LINKTYPES | {LINKTYPE_NONE})):
            names = ", ".join(str(x) for x in sorted(lts))
            self.raw.close()
            raise UnsupportedLinkType(
                f"{self.path}: link type {names} is not supported "
                f"(supported: {', '.join(str(x) for x in sorted(SUPPORTED_LINKTYPES))})"
            )

    # -- plumbing --------------------------------------------------------------
    def _report(self, stage: str, frac: float) -> None:
        if self._progress is not None:
            self._progress(stage, frac)

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Trace {self.path!r}: {self.raw.frames} frames>"

    @cached_property
    def _net(self) -> _Net:
        self._report("decode", 0.0)
        dec = decode(self.raw)
        self.raw.head_parts = []  # the header bytes the reader copied are decoded: free them
        self._report("flows", 0.4)
        ft = build_flows(dec)
        self._report("reassembly", 0.6)
        tcp = analyze_tcp(dec, ft, self.raw.ts_ns, self.raw.buf)
        self.raw.release()  # payload compared and classified: the mapping's pages can go
        self._report("reassembly", 1.0)
        return _Net(dec=dec, flows=ft, tcp=tcp)

    # -- net -------------------------------------------------------------------
    @property
    def frames(self) -> int:
        return self.raw.frames

    @cached_property
    def packets(self) -> pd.DataFrame:
        """One row per frame; see ``pcapkit.schema.describe("packets")``."""
        n = self._net
        return packets_table(self.raw, n.dec, n.flows, n.tcp)

    @cached_property
    def flows(self) -> pd.DataFrame:
        """One row per TCP connection / UDP flow; see ``schema.describe("flows")``."""
        n = self._net
        return flows_table(self.raw, n.dec, n.flows, n.tcp)

    @cached_property
    def segments(self) -> pd.DataFrame:
        """TCP segments with payload, classified; see ``schema.describe("segments")``."""
        return segments_table(self._net.tcp)

    @cached_property
    def sack_blocks(self) -> pd.DataFrame:
        """Every SACK block with its edges as stream offsets of the acknowledged direction;
        see ``schema.describe("sack_blocks")``."""
        return sack_blocks_table(self._net.dec, self.packets)

    # -- the connections limit ------------------------------------------------------
    @cached_property
    def _detail(self) -> np.ndarray:
        """Per flow: analysed in detail (``connections`` limit; connections that carried
        payload first, then in capture order)."""
        ft = self._net.flows
        n, cap = ft.count, self.limits["connections"]
        if n <= cap:
            return np.ones(n, bool)
        pf = ft.pkt_flow
        sel = pf >= 0
        pay = self._net.dec.cols["payload_caplen"]
        carried = np.bincount(pf[sel], weights=pay[sel], minlength=n) > 0
        keep = np.zeros(n, bool)
        keep[np.lexsort((np.arange(n), ~carried))[:cap]] = True
        return keep

    def _in_detail(self, flows: list[int]) -> list[int]:
        keep = self._detail
        return [f for f in flows if keep[f]]

    @property
    def flows_in_detail(self) -> pd.DataFrame:
        """The rows of :attr:`flows` analysed in detail: all of them unless the capture
        holds more connections than the ``connections`` limit."""
        keep = self._detail
        return self.flows if keep.all() else self.flows[keep].reset_index(drop=True)

    def _limit_anomalies(self) -> list[dict[str, Any]]:
        keep = self._detail
        if keep.all():
            return []
        ft = self._net.flows
        beyond = ~keep
        pf = ft.pkt_flow
        pk = (pf >= 0) & beyond[np.maximum(pf, 0)]
        nbytes = int(self._net.dec.cols["payload_caplen"][pk].sum())
        cap = self.limits["connections"]
        return [
            limit_anomaly(
                "connection_limit_exceeded",
                f"{ft.count} connections, the connections limit is {cap}: {int(beyond.sum())} "
                f"more ({int(pk.sum())} packets, {nbytes} payload bytes) are counted and "
                "listed in flows, not dissected (TLS, QUIC, HTTP), examined by the detectors "
                "nor listed in the JSON report's flows (--limit connections=N)",
                frame=int(np.nonzero(pk)[0][0]) + 1 if pk.any() else None,
            )
        ]

    @cached_property
    def _layer_anomalies(self) -> list[dict[str, Any]]:
        return (
            self._limit_anomalies()
            + list(self.raw.anomalies)
            + list(self._net.dec.anomalies)
            + list(self._net.tcp.anomalies)
            + self._tls_anomalies()
            + list(self._app.anomalies)
            + list(self.quic_anomalies)
            + list(self._keys.anomalies)
            + self._keylog_match()
            + linktype_anomalies(self.raw)
        )

    @property
    def internal_errors(self) -> list[dict[str, Any]]:
        """The ``internal_error`` rows of what was computed so far (connections and
        detectors pcapkit failed on, isolated)."""
        return list(self._errors)

    @property
    def anomalies(self) -> pd.DataFrame:
        """Everything that could not be parsed, one row each; see
        ``schema.describe("anomalies")``.  ``internal_error`` rows say where pcapkit itself
        failed on one connection or in one detector (those of detectors once the findings
        were computed)."""
        rows = self._layer_anomalies
        n = len(self._errors)
        if self._anomaly_cache is None or self._anomaly_cache[0] != n:
            table = anomalies_table(rows + self._errors, self._net.flows.pkt_flow)
            self._anomaly_cache = (n, table)
        return self._anomaly_cache[1]

    # -- TLS -------------------------------------------------------------------
    @property
    def secrets(self) -> list[Any]:
        """The capture's Decryption Secrets Blocks, unless opened with embedded_keys=False."""
        return list(self.raw.secrets) if self.embedded_keys else []

    @cached_property
    def _keys(self) -> Any:
        """The key log of every source (:class:`pcapkit.sessions.tls.KeySources`)."""
        from .sessions.tls import load_keys

        return load_keys(self.keylog, self.secrets)

    def _keylog_match(self) -> list[dict[str, Any]]:
        """A row when the key log matches no ClientHello of the capture."""
        from .sessions.tls import keylog_match

        if not len(self._keys.keylog):
            return []
        quic = [qf.conn.client_random for qf in self._quic]
        return keylog_match(self._keys, self._tls, quic)

    @property
    def key_sources(self) -> list[str]:
        """Where the keys come from, and what of each source could not be used (never the
        keys themselves)."""
        return list(self._keys.sources)

    @cached_property
    def _tls(self) -> list[Any]:
        from ._pages import small_pages
        from .sessions.tls import run_tls

        net = self._net
        self._report("tls", 0.0)
        keys = self._keys
        tcp_flows = self._in_detail(np.nonzero(net.flows.proto == PROTO_TCP)[0].tolist())
        with small_pages():  # (measured in pcapkit._pages)
            out = run_tls(
                self.raw.buf,
                tcp_flows,
                net.tcp.index,
                keys,
                errors=self._errors,
                limits=self.limits,
            )
        self.raw.release()  # the record walk touched every header's page
        self._report("tls", 1.0)
        return out

    def _tls_anomalies(self) -> list[dict[str, Any]]:
        from .sessions.tls import anomaly_rows

        return anomaly_rows(self._tls, self._net.tcp.index)

    @cached_property
    def records(self) -> pd.DataFrame:
        """One row per TLS record, aligned with TCP frames and PSH; see
        ``schema.describe("records")``."""
        from ._pages import small_pages
        from .align import records_table

        net = self._net
        with small_pages():  # the record walk's temporaries (measured in pcapkit._pages)
            return records_table(self._tls, net.tcp.index, net.tcp.segments, net.flows.count)

    @cached_property
    def tls(self) -> pd.DataFrame:
        """One row per TLS session; see ``schema.describe("tls")``."""
        from .align import tls_table

        return tls_table(
            self._tls, self.records, self._handshake_times, self.tls_handshake, self._legs_ns()
        )

    @cached_property
    def tls_handshake(self) -> pd.DataFrame:
        """When each TLS handshake milestone was seen; see ``schema.describe("tls_handshake")``."""
        from .align import handshake_milestones

        versions = {tf.flow: tf.summary.version for tf in self._tls}
        return handshake_milestones(self.records, versions)

    def _legs_ns(self) -> dict[int, tuple[int | None, int | None]]:
        """Each TCP flow's (client, server) round trip from the capture point, ns."""
        f = self.flows
        dc = f["client_leg_ms"].to_numpy(dtype=float, na_value=np.nan)
        ds = f["server_leg_ms"].to_numpy(dtype=float, na_value=np.nan)

        def ns(v: float) -> int | None:
            return None if np.isnan(v) else int(round(v * 1e6))

        return {
            int(fl): (ns(a), ns(b))
            for fl, a, b in zip(f["flow"].tolist(), dc.tolist(), ds.tolist(), strict=True)
        }

    @cached_property
    def _handshake_times(self) -> dict[int, tuple[int, int]]:
        from .align import handshake_times

        versions = {tf.flow: tf.summary.version for tf in self._tls}
        return handshake_times(self.records, versions)

    @cached_property
    def _record_keys(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The records' direction keys in (flow, dir, offset) order and the permutation to
        it (:func:`pcapkit.schema.record_dir_keys`): read by the HTTP layer and the
        detectors (0.08 s at 7.9 M records, made once)."""
        return schema.record_dir_keys(self.records)

    # -- HTTP ------------------------------------------------------------------
    @cached_property
    def _app(self) -> Any:
        from .sessions.http import HttpInputs, build

        self._report("http", 0.0)
        net = self._net
        flows = self.flows
        inp = HttpInputs(
            buf=self.raw.buf,
            tcp_flows=self._in_detail(np.nonzero(net.flows.proto == PROTO_TCP)[0].tolist()),
            index=net.tcp.index,
            tls_flows=self._tls,
            records=self.records,
            record_keys=self._record_keys,
            first_ts_ns=flows["first_ts_ns"].to_numpy(np.int64),
            syn_seen=flows["handshake"].to_numpy(bool),
            tls_done=self._handshake_times,
            quic_flows=self._quic,
        )
        out = build(
            inp, redact_secrets=self.redact_secrets, errors=self._errors, limits=self.limits
        )
        self.raw.release()
        self._report("http", 1.0)
        return out

    @cached_property
    def messages(self) -> pd.DataFrame:
        """HTTP/1.1 heads, SSE events, HTTP/2 frames, gRPC messages and QUIC frames, ordered
        by (flow, dir, stream, offset); see ``schema.describe("messages")``."""
        from .sessions.http import messages_table

        return messages_table(self._app, self.quic_messages)

    @cached_property
    def requests(self) -> pd.DataFrame:
        """One row per HTTP exchange with its timeline; see ``schema.describe("requests")``."""
        from .sessions.http import requests_table

        return requests_table(self._app)

    @cached_property
    def h2_windows(self) -> pd.DataFrame:
        """HTTP/2 DATA and WINDOW_UPDATE frames with the send windows after each; see
        ``schema.describe("h2_windows")``."""
        from .sessions.http import h2_windows_table

        return h2_windows_table(self._app)

    @cached_property
    def qpack_blocked(self) -> pd.DataFrame:
        """HTTP/3 field sections that waited for QPACK encoder instructions; see
        ``schema.describe("qpack_blocked")``."""
        from .sessions.http import qpack_blocked_table

        return qpack_blocked_table(self._app)

    # -- QUIC ----------------------------------------------------------------------
    @cached_property
    def _quic(self) -> list[Any]:
        """One :class:`pcapkit.sessions.quic.QuicFlow` per QUIC connection."""
        self._report("quic", 0.0)
        c, ft, buf = self._net.dec.cols, self._net.flows, self.raw.buf
        if not (ft.proto == PROTO_UDP).any():
            # no UDP flow, no QUIC connection: the QUIC dissectors (~60 ms of imports)
            # are not loaded
            self.raw.release()
            self._report("quic", 1.0)
            return []
        from .sessions.quic import quic_flow_ids, run_quic

        ids = quic_flow_ids(buf, c["payload_off"], c["payload_caplen"], ft.proto, ft.first_idx)
        ids = self._in_detail(ids)
        out = run_quic(
            ids,
            buf=buf,
            ts_ns=self.raw.ts_ns,
            payload_off=c["payload_off"],
            payload_caplen=c["payload_caplen"],
            payload_len=c["payload_len"],
            pkt_flow=ft.pkt_flow,
            pkt_dir=ft.pkt_dir,
            keylog=self._keys.keylog if ids else None,
            errors=self._errors,
            limits=self.limits,
        )
        self.raw.release()  # every datagram was read
        self._report("quic", 1.0)
        return out

    def _quic_table(self, fn: Callable[[list[Any]], _T]) -> _T:
        """``fn(self._quic)``; a connection on which ``fn`` fails is dropped from every
        QUIC table built after (an ``internal_error`` row), the others are kept."""
        try:
            return fn(self._quic)
        except Exception as exc:  # noqa: BLE001 - find the connection, keep the others
            bad = []
            for qf in self._quic:
                try:
                    fn([qf])
                except Exception as e:  # noqa: BLE001
                    bad.append(qf)
                    self._errors.append(isolate("quic", e, flow=qf.flow, what=fn.__name__))
            if not bad:
                raise exc from None  # not one connection's failure
            self._quic[:] = [qf for qf in self._quic if qf not in bad]
            return fn(self._quic)

    @cached_property
    def quic(self) -> pd.DataFrame:
        """One row per QUIC connection; see ``schema.describe("quic")``."""
        if not self._quic:  # as summary_rows([]): no row (sessions.quic not imported)
            return schema.frame("quic", n=0)
        from .sessions.quic import summary_rows

        rows = self._quic_table(summary_rows)
        n = len(rows["flow"])
        if n == 0:
            return schema.frame("quic", n=0)
        return schema.frame("quic", dict(rows), n)  # Float64 etc.: the schema's dtypes

    @cached_property
    def quic_messages(self) -> pd.DataFrame:
        """QUIC frames (not PADDING) with the columns of ``schema.describe("messages")``."""
        if not self._quic:  # as message_rows([]): no row
            return schema.frame("messages", n=0)
        from .sessions.quic import message_rows

        m = self._quic_table(message_rows)
        n = len(m["flow"])
        if n == 0:
            return schema.frame("messages", n=0)
        data: dict[str, Any] = dict(m)
        data["dir"] = schema.categorical(
            np.asarray([DIR_CODES[d] for d in m["dir"]], np.int64), schema.DIRS
        )
        for k in ("stream", "frame", "ts_ns", "request"):
            data[k] = pd.array(m[k], dtype="Int64")
        return schema.frame("messages", data, n)

    @cached_property
    def quic_anomalies(self) -> list[dict[str, Any]]:
        """What the QUIC dissector could not parse (rows of the "anomalies" schema)."""
        if not self._quic:  # as anomaly_rows([])
            return []
        from .sessions.quic import anomaly_rows

        return self._quic_table(anomaly_rows)

    @cached_property
    def quic_packets(self) -> pd.DataFrame:
        """One row per QUIC packet; see ``schema.describe("quic_packets")``."""
        if not self._quic:  # as packet_table([])
            return schema.frame("quic_packets", n=0)
        from .sessions.quic import packet_table

        return self._quic_table(packet_table)

    @cached_property
    def quic_frames(self) -> pd.DataFrame:
        """One row per frame of every decrypted QUIC packet (PADDING included); see
        ``schema.describe("quic_frames")``."""
        if not self._quic:  # as frame_table([])
            return schema.frame("quic_frames", n=0)
        from .sessions.quic import frame_table

        return self._quic_table(frame_table)

    @cached_property
    def quic_tls(self) -> pd.DataFrame:
        """TLS handshake messages of the QUIC connections with their extensions' facts and
        transport parameters; see ``schema.describe("quic_tls")``."""
        if not self._quic:  # as tls_table([])
            return schema.frame("quic_tls", n=0)
        from .sessions.quic import tls_table

        return self._quic_table(tls_table)

    @cached_property
    def quic_handshake(self) -> pd.DataFrame:
        """Handshake milestones per QUIC connection; see ``schema.describe("quic_handshake")``."""
        if not self._quic:  # as handshake_table([])
            return schema.frame("quic_handshake", n=0)
        from .sessions.quic import handshake_table

        return self._quic_table(handshake_table)

    def quic_stream(self, flow: int, stream_id: int, direction: str) -> StreamBytes:
        """Reassembled bytes of one QUIC stream direction (``c2s``/``s2c`` of the flow).

        Holes are not filled (``.gaps`` lists them, as for :meth:`stream`).  Raises
        KeyError when the flow is not a QUIC connection or the stream carried no data
        in that direction.
        """
        self._flow_dir(flow, direction)
        for qf in self._quic:
            if qf.flow != flow:
                continue
            qd = qf.quic_dir(direction)
            if (stream_id, qd) not in set(qf.conn.streams()):
                raise KeyError(f"flow {flow} has no QUIC stream {stream_id} in {direction}")
            sd = qf.conn.stream_bytes(stream_id, qd)
            return StreamBytes.from_chunks(sd.data, sd.chunks, sd.gaps)
        raise KeyError(f"flow {flow} is not a QUIC connection")

    def plaintext(self, flow: int, direction: str) -> bytes:
        """Decrypted application data of one direction, in order (b"" without keys).

        Records that could not be decrypted contribute nothing; ``Trace.records``
        says which and why (``status``).
        """
        from .sessions.tls import plaintext

        self._flow_dir(flow, direction)
        return plaintext(self._tls, flow, direction)

    # -- detection ---------------------------------------------------------------
    @cached_property
    def detect_context(self) -> Any:
        """The tables, indexed per flow for the detectors (:mod:`pcapkit.detect`)."""
        from .detect import DetectContext

        packets, flows, segments = self.packets, self.flows, self.segments
        if not self._detail.all():  # the detectors examine the connections in detail only
            ids = np.nonzero(self._detail)[0]
            packets = packets[packets["flow"].isin(ids).to_numpy(bool)].reset_index(drop=True)
            flows = self.flows_in_detail
            segments = segments[segments["flow"].isin(ids).to_numpy(bool)].reset_index(drop=True)
        return DetectContext(
            packets,
            flows,
            segments,
            self.records,
            self.tls,
            requests=self.requests,
            messages=self.messages,
            h2_windows=self.h2_windows,
            qpack_blocked=self.qpack_blocked,
            quic=self.quic,
            quic_packets=self.quic_packets,
            quic_frames=self.quic_frames,
            quic_tls=self.quic_tls,
            quic_handshake=self.quic_handshake,
            tls_handshake=self.tls_handshake,
            record_keys=self._record_keys,  # (of self.records, as passed above)
        )

    @cached_property
    def finding_objects(self) -> list[Any]:
        """Findings as :class:`pcapkit.detect.Finding` objects, worst first."""
        from .detect import run_detectors

        self._report("detect", 0.0)
        out = run_detectors(self.detect_context, settings=self.thresholds, errors=self._errors)
        self._report("detect", 1.0)
        return out

    @cached_property
    def findings(self) -> pd.DataFrame:
        """Pathologies found, worst first; see ``schema.describe("findings")``."""
        from .detect.base import findings_table

        return findings_table(self.finding_objects)

    @cached_property
    def hol_counterfactual(self) -> pd.DataFrame:
        """Per connection with head-of-line blocking: what QUIC saved (HTTP/3) or would have
        saved (HTTP/2 over TCP), same losses and repair times assumed
        (:mod:`pcapkit.detect.counterfactual`, DETECTION.md §11.7)."""
        from .detect.counterfactual import hol_counterfactual

        return hol_counterfactual(self.finding_objects, self.quic_frames)

    @cached_property
    def gaps(self) -> pd.DataFrame:
        """Why each streamed response waited: the first event (TTFT) and every long gap,
        split into path, network findings and server time (:mod:`pcapkit.detect.gaps`)."""
        from .detect.gaps import attribute

        legs: dict[int, float | None] = {}
        if self._quic:
            from .sessions.quic import server_leg_ms

            legs = {qf.flow: server_leg_ms(qf) for qf in self._quic}
        return attribute(
            self.requests,
            self.messages,
            self.flows,
            self.finding_objects,
            server_legs={f: v for f, v in legs.items() if v is not None},
            packets=self.packets,
        )

    @property
    def one_way(self) -> pd.DataFrame:
        """Each TCP segment's and UDP datagram's one-way delay, or where it was lost: needs
        both ends' captures (``pcapkit.open([client, server])``); empty for one capture.  See
        ``schema.describe("one_way")``."""
        return schema.frame("one_way", n=0)

    # -- streams -----------------------------------------------------------------
    def _flow_dir(self, flow: int, direction: str) -> tuple[int, int]:
        if direction not in DIR_CODES:
            raise ValueError(f"direction must be 'c2s' or 's2c', not {direction!r}")
        if not 0 <= flow < self._net.flows.count:
            raise KeyError(f"no flow {flow} (the capture has {self._net.flows.count})")
        return int(flow), DIR_CODES[direction]

    def stream_index(self, flow: int, direction: str) -> DirectionIndex:
        """Offset → (frame, ts_ns) index of one TCP direction (first-seen pieces)."""
        key = self._flow_dir(flow, direction)
        return self._net.tcp.index.get(key) or empty_index()

    def stream(self, flow: int, direction: str) -> StreamBytes:
        """Reassembled payload of one direction (TCP) or concatenated datagrams (UDP)."""
        f, d = self._flow_dir(flow, direction)
        if self._net.flows.proto[f] == PROTO_UDP:
            sel = self.datagram_frames(f, d)
            c = self._net.dec.cols
            return udp_stream(self.raw.buf, c["payload_off"][sel], c["payload_caplen"][sel])
        return tcp_stream(self.raw.buf, self.stream_index(flow, direction))

    def frame_bytes(self, frame: int) -> bytes:
        """The captured bytes of ``frame`` (Wireshark's 1-based number), link header on."""
        if not 1 <= frame <= self.raw.frames:
            raise KeyError(f"no frame {frame} (the capture has {self.raw.frames})")
        o = int(self.raw.data_off[frame - 1])
        return self.raw.buf[o : o + int(self.raw.caplen[frame - 1])].tobytes()

    def slice(self, flows: list[int], path: str | os.PathLike[str]) -> int:
        """Write the frames of ``flows`` to a pcapng at ``path``, with the key-log lines of
        their TLS and QUIC sessions (only theirs) in a Decryption Secrets Block, so the
        slice can be shared and still decrypts.  Returns the number of frames written."""
        from .io.writer import SECRETS_TLS_KEYLOG, write_frames
        from .sessions.tls import keylog_lines

        for f in flows:
            self._flow_dir(f, "c2s")
        rows = np.nonzero(np.isin(self._net.flows.pkt_flow, np.asarray(flows, np.int64)))[0]
        wanted = set(flows)
        randoms = [
            tf.summary.client_random
            for tf in self._tls
            if tf.flow in wanted and tf.summary.client_random
        ]
        if any(self._net.flows.proto[f] == PROTO_UDP for f in flows):
            randoms += [qf.conn.client_random for qf in self._quic if qf.flow in wanted]
        keys = keylog_lines(self._keys, [r for r in randoms if r])
        return write_frames(self.raw, rows.tolist(), path, [(SECRETS_TLS_KEYLOG, keys)])

    def datagram_frames(self, flow: int, d: int) -> np.ndarray:
        """Packet rows (frame - 1) of one UDP flow direction (``d``: 0 c2s, 1 s2c)."""
        ft = self._net.flows
        return np.nonzero((ft.pkt_flow == flow) & (ft.pkt_dir == d))[0]

    def datagrams(self, flow: int, direction: str) -> list[tuple[int, bytes]]:
        """UDP payloads of one direction as (frame, bytes)."""
        f, d = self._flow_dir(flow, direction)
        c = self._net.dec.cols
        buf = self.raw.buf
        sel = self.datagram_frames(f, d)
        return [
            (
                int(i) + 1,
                buf[
                    int(c["payload_off"][i]) : int(c["payload_off"][i] + c["payload_caplen"][i])
                ].tobytes(),
            )
            for i in sel
        ]

    # -- summary -------------------------------------------------------------------
    def capture_summary(self) -> dict[str, Any]:
        """The ``capture`` object of the JSON report."""
        _ = self._tls  # key sources are known once TLS ran
        raw = self.raw
        ts = raw.ts_ns
        c = self._net.dec.cols
        return {
            "path": self.path,
            "format": raw.format,
            "compressed": raw.compressed,
            "file_size": raw.file_size,
            "frames": raw.frames,
            "first_ts_ns": int(ts.min()) if raw.frames else None,
            "last_ts_ns": int(ts.max()) if raw.frames else None,
            "duration_ms": round((int(ts.max()) - int(ts.min())) / 1e6, 3) if raw.frames else 0.0,
            "interfaces": [
                {
                    "index": i.index,
                    "linktype": i.linktype,
                    "linktype_name": LINKTYPE_NAMES.get(i.linktype, "unsupported"),
                    "name": i.name,
                }
                for i in raw.interfaces
            ],
            "tcp_packets": int((c["l4"] == PROTO_TCP).sum()),
            "udp_packets": int((c["l4"] == PROTO_UDP).sum()),
            "flows": self._net.flows.count,
            "secrets_blocks": len(raw.secrets),
            "anomalies": int(len(self.anomalies)),
        }


def open(  # noqa: A001 - the public name users type: pcapkit.open(path)
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    keylog: str | os.PathLike[str] | bytes | None = None,
    *,
    progress: Progress | None = None,
    redact: bool = True,
    embedded_keys: bool = True,
    thresholds: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
) -> Trace:
    """Open a pcap/pcapng capture (optionally gzip-compressed).

    ``keylog`` is an NSS key log (path or bytes) for TLS/QUIC decryption; keys in
    the file's Decryption Secrets Blocks are used as well.  ``redact`` (default)
    hides the values of credential headers (authorization, cookies) in
    ``Trace.requests``.  ``embedded_keys=False`` ignores the pcapng Decryption Secrets
    Blocks (analyse a capture as a third party without keys would).
    ``thresholds`` sets detector thresholds by name, e.g. ``{"nagle.late_slack_ms":
    3.0}`` (``pcapkit thresholds`` lists them with defaults, units and sources; an
    unknown name or a bad value raises :class:`pcapkit.detect.ThresholdError`, a
    ``ValueError``).  ``limits`` sets resource limits by name, e.g. ``{"connections":
    50_000}`` (``pcapkit limits`` lists them with defaults and reasons; a bad one raises
    :class:`pcapkit.limits.LimitError`, a ``ValueError``).  Raises
    :class:`pcapkit.errors.PcapkitError` subclasses for whole-file problems.

    ``path`` may be a list of two captures, ``[client, server]``, of the same traffic
    from its two ends: the result is a :class:`pcapkit.vantage.TwoVantageTrace`, the
    client's Trace with the server's (``.server``) on the client's clock (``.clock``:
    offset, drift and uncertainty), per-segment one-way delays (``.one_way``) and gaps
    split into client, network and server time.  Raises
    :class:`pcapkit.vantage.NoCommonTraffic` when the two share no traffic.
    """
    if isinstance(path, (list, tuple)):
        from .vantage import open_pair

        return open_pair(
            path,
            keylog,
            progress=progress,
            redact=redact,
            embedded_keys=embedded_keys,
            thresholds=thresholds,
            limits=limits,
        )
    return Trace(
        cast("str | os.PathLike[str]", path),
        keylog,
        progress=progress,
        redact=redact,
        embedded_keys=embedded_keys,
        thresholds=thresholds,
        limits=limits,
    )
