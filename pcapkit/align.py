"""TLS record ↔ TCP segment ↔ PSH alignment (the ``records`` table).

Every record found in a reassembled direction at ``[offset, offset + length)``
is stamped through the direction's index (DESIGN.md §2):

* ``first_frame`` / ``first_ts_ns`` — the segment that first carried the
  record's first byte;
* ``last_frame`` / ``last_ts_ns`` — the frame at which the record's last byte
  became readable in order (all earlier bytes had arrived): where Wireshark
  (with out-of-order reassembly) shows the record, and when the receiver could
  decrypt it;
* ``last_byte_frame`` / ``last_byte_ts_ns`` — the frame that first carried the
  last byte; the difference to ``last_frame`` is head-of-line blocking;
* ``segments`` — how many first-seen segment pieces carried its bytes;
* ``psh_end`` — its last byte is the last byte of a segment with PSH set
  (DETECTION.md §1.5–§1.6: on an unconstrained Linux sender every record ends a
  PSH segment; deviations are evidence of coalescing or partial writes);
* ``push_unit`` — the PSH-to-PSH unit (numbered per direction) holding its last
  byte, and ``records_in_unit`` — how many records end in that unit (§5.4);
* ``retransmitted`` — a retransmitted, out-of-order or overlapping segment
  touched its bytes; ``missing_bytes`` — bytes of it never captured.

Per connection KPIs (DETECTION.md §5.4) come from :func:`alignment_kpis` (one
table) or :func:`alignment_kpis_by_flow` (every connection in one pass).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from . import schema
from ._parallel import map_in_threads
from .net.streams import empty_index
from .net.tcp import KINDS, DirectionIndex, group_cummax, group_last_index
from .sessions.timing import Split, split_handshake
from .sessions.tls import (
    DECRYPT_STATUSES,
    EPOCHS,
    TlsFlow,
    is_tls13_version,
    record_columns,
    record_overhead,
    tls_group_name,
    tls_version_name,
)

# segment kinds that resend or fill: codes of net.tcp.KINDS out_of_order … overlap_diff
_RETX_LO, _RETX_HI = KINDS.index("out_of_order"), KINDS.index("overlap_diff")
assert KINDS[_RETX_LO : _RETX_HI + 1] == (
    "out_of_order",
    "retransmission",
    "spurious_retransmission",
    "overlap_same",
    "overlap_diff",
)

# the segments-table columns align_all reads
ALIGN_SEGMENT_COLUMNS = ("frame", "offset", "end", "psh", "kind", "new_bytes")


def align_all(
    rec_group: np.ndarray,
    rec_off: np.ndarray,
    rec_len: np.ndarray,
    indexes: list[DirectionIndex],
    seg_group: np.ndarray,
    seg: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Alignment columns for the records of many directions in one vectorised pass.

    ``rec_group`` numbers each record's direction (0…G-1, sorted; records sorted by
    offset within it); ``indexes[g]`` is that direction's piece index and
    ``seg_group`` / ``seg`` its rows of the segments table (frame, offset, end, psh,
    kind, new_bytes).  Each direction's offsets are shifted into a range of their
    own, so one ``searchsorted`` serves all directions; per-direction running
    values (in-order delivery, holes, push units) restart at each range.
    """
    n = rec_off.shape[0]
    G = len(indexes)
    rec_end = rec_off + rec_len
    # disjoint ranges: base[g] .. base[g] + span[g]
    span = np.zeros(G, np.int64)
    np.maximum.at(span, rec_group, rec_end)
    for g, ix in enumerate(indexes):
        if ix.end.shape[0]:
            span[g] = max(span[g], int(ix.end[-1]))
    if seg_group.shape[0]:
        np.maximum.at(span, seg_group, seg["end"])
    base = np.concatenate([[0], np.cumsum(span + 1)[:-1]])
    kcount = np.array([ix.start.shape[0] for ix in indexes], np.int64)
    pg = np.repeat(np.arange(G), kcount)
    pshift = base[pg]
    p_start = np.concatenate([ix.start for ix in indexes] or [np.zeros(0, np.int64)]) + pshift
    p_end = np.concatenate([ix.end for ix in indexes] or [np.zeros(0, np.int64)]) + pshift
    p_cap = np.concatenate([ix.cap_end for ix in indexes] or [np.zeros(0, np.int64)]) + pshift
    p_frame = np.concatenate([ix.frame for ix in indexes] or [np.zeros(0, np.int64)])
    p_ts = np.concatenate([ix.ts_ns for ix in indexes] or [np.zeros(0, np.int64)])
    k = p_start.shape[0]

    off = rec_off + base[rec_group]
    end = rec_end + base[rec_group]
    last = np.maximum(end - 1, off)

    def locate(i: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Frame and time of the piece holding ``x`` (its piece ``i``: the last
        starting at or before it), -1 in a hole."""
        if k == 0:
            return np.full(x.shape, -1), np.full(x.shape, -1)
        j = np.maximum(i, 0)
        ok = (i >= 0) & (x < p_end[j])
        return np.where(ok, p_frame[j], -1), np.where(ok, p_ts[j], -1)

    # the piece searches, once each (pieces start strictly increasing)
    i_off = np.searchsorted(p_start, off, side="right") - 1
    # a record inside one piece (most: many records per segment) needs no other search:
    # the piece holds its last byte, is the first piece ending after its offset, and the
    # next piece is the first starting at or after its end (pieces never overlap)
    if k and bool((p_start[1:] >= p_end[:-1]).all()):
        inside = (i_off >= 0) & (end <= p_end[np.maximum(i_off, 0)])
        out_i = np.flatnonzero(~inside)
    else:
        out_i = np.arange(n)
    i_last = i_off.copy()
    if out_i.shape[0]:
        i_last[out_i] = np.searchsorted(p_start, last[out_i], side="right") - 1
    first_frame, first_ts = locate(i_off, off)
    lf2, lt2 = locate(i_last, last)
    if k:
        # in-order delivery (DirectionIndex.delivered), restarted per direction
        cm = group_cummax(p_frame, pg)
        holder = group_last_index(p_frame == cm, pg)
        gap = np.ones(k, bool)
        gap[1:] = p_start[1:] > p_end[:-1]
        first_of_g = np.r_[True, pg[1:] != pg[:-1]]
        gap = np.where(first_of_g, p_start > base[pg], gap)
        broken = group_cummax(gap.astype(np.int64), pg) > 0
        i = i_last
        j = np.maximum(i, 0)
        ok = (i >= 0) & (last < p_end[j]) & ~broken[j]
        last_frame = np.where(ok, cm[j], lf2)  # behind a hole never filled: the carrier
        last_ts = np.where(ok, p_ts[np.maximum(holder[j], 0)], lt2)
        i0 = i_off.copy()
        i1 = i_off + 1
        if out_i.shape[0]:
            i0[out_i] = np.searchsorted(p_end, off[out_i], side="right")
            i1[out_i] = np.searchsorted(p_start, end[out_i], side="left")
        spanned = np.maximum(i1 - i0, 0)
        # captured bytes in [base, x): whole pieces before x plus the part of the piece holding x
        cap_len = np.clip(p_cap - p_start, 0, None)
        csum = np.concatenate([[0], np.cumsum(cap_len)])

        def captured_before(ii: np.ndarray, x: np.ndarray) -> np.ndarray:
            ic = np.maximum(ii, 0)
            part = np.clip(x - p_start[ic], 0, cap_len[ic])
            return np.where(ii >= 0, csum[ic] + part, 0)

        # inside one piece: its captured bytes in [off, end)
        j = np.maximum(i_off, 0)
        ps, cl = p_start[j], cap_len[j]
        missing = rec_len - (np.minimum(end - ps, cl) - np.minimum(off - ps, cl))
        if out_i.shape[0]:
            ii1, e_o = i1[out_i], end[out_i]
            # the last piece starting at or before end: i1 - 1, or i1 when a piece starts
            # at end (when no two pieces start at one offset)
            if bool((p_start[1:] > p_start[:-1]).all()):
                i_end = ii1 - 1 + (p_start[np.minimum(ii1, k - 1)] == e_o) * (ii1 < k)
            else:
                i_end = np.searchsorted(p_start, e_o, side="right") - 1
            missing[out_i] = rec_len[out_i] - (
                captured_before(i_end, e_o) - captured_before(i_off[out_i], off[out_i])
            )
        np.maximum(missing, 0, out=missing)
    else:
        last_frame, last_ts = lf2, lt2
        spanned = np.zeros(n, np.int64)
        missing = rec_len.copy()

    # PSH: the segment that first delivered the last byte, and whether the record ends with it
    s_frame = seg["frame"]
    s_end = seg["end"] + base[seg_group] if seg_group.shape[0] else seg["end"]
    s_off = seg["offset"] + base[seg_group] if seg_group.shape[0] else seg["offset"]
    order = np.argsort(s_frame, kind="stable")
    sf = s_frame[order]
    if sf.shape[0] and k:
        # searched once per piece: lf2 is the frame of piece i_last when it is not -1
        pp = np.minimum(np.searchsorted(sf, p_frame), sf.shape[0] - 1)
        j = np.maximum(i_last, 0)
        pos = pp[j]
        hit = (lf2 >= 0) & (sf[pos] == lf2)
        row = order[pos]
        psh_end = hit & seg["psh"][row] & (s_end[row] == end)
    else:
        psh_end = np.zeros(n, bool)

    # push units: PSH segments that delivered new bytes; a sentinel at each direction's
    # start restarts the numbering, so unit = PSH ends in (start, x] of its direction
    ends = np.sort(np.concatenate([s_end[(seg["new_bytes"] > 0) & seg["psh"]], base]))
    if k:
        # searched once per piece: the count is the same for every byte of a piece that
        # no PSH end falls inside (almost all: PSH ends are where segments end)
        u0 = np.searchsorted(ends, p_start, side="right")
        same = u0 == np.searchsorted(ends, p_end - 1, side="right")
        j = np.maximum(i_last, 0)
        fast = same[j] & (i_last >= 0) & (last >= p_start[j]) & (last < p_end[j])
        unit_g = u0[j]
        slow = np.flatnonzero(~fast)
        if slow.shape[0]:
            unit_g[slow] = np.searchsorted(ends, last[slow], side="right")
    else:
        unit_g = np.searchsorted(ends, last, side="right")
    unit = unit_g - np.searchsorted(ends, base, side="right")[rec_group]
    in_unit = np.zeros(n, np.int64)
    if n:
        # records are sorted by direction and offset, so global unit ids never decrease
        bnd = np.r_[0, np.nonzero(np.diff(unit_g))[0] + 1, n]
        in_unit = np.repeat(np.diff(bnd), np.diff(bnd))

    # retransmissions touching the record
    kind = seg["kind"]
    rk = (kind >= _RETX_LO) & (kind <= _RETX_HI) & (seg["end"] > seg["offset"])
    if rk.any():
        rs, re_ = s_off[rk], s_end[rk]
        o = np.argsort(rs, kind="stable")
        rs, re_ = rs[o], re_[o]
        pm = np.maximum.accumulate(re_)
        j = np.searchsorted(rs, end, side="left") - 1
        retx = (j >= 0) & (pm[np.maximum(j, 0)] > off)
    else:
        retx = np.zeros(n, bool)

    return {
        "first_frame": first_frame,
        "last_frame": last_frame,
        "first_ts_ns": first_ts,
        "last_ts_ns": last_ts,
        "last_byte_frame": lf2,
        "last_byte_ts_ns": lt2,
        "segments": spanned,
        "psh_end": psh_end,
        "push_unit": unit,
        "records_in_unit": in_unit,
        "retransmitted": retx,
        "missing_bytes": missing,
    }


def alignment_kpis(records: Any) -> dict[str, Any]:
    """DETECTION.md §5.4 per direction: % records ending at PSH, % push units with one
    record, records-per-segment histogram (application-data records only, when known)."""
    out: dict[str, Any] = {}
    if len(records) == 0:
        return {
            "records": 0,
            "pct_psh_end": None,
            "pct_single_record_units": None,
            "records_per_unit_hist": {},
        }
    psh = records["psh_end"].to_numpy(bool)
    units = records.groupby(["dir", "push_unit"], observed=True).size()
    out["records"] = int(len(records))
    out["pct_psh_end"] = round(100.0 * psh.mean(), 1)
    out["pct_single_record_units"] = round(100.0 * float((units == 1).mean()), 1)
    hist = units.value_counts().sort_index()
    out["records_per_unit_hist"] = {int(k): int(v) for k, v in hist.items()}
    return out


def _unique_pairs(a: np.ndarray, b: np.ndarray, counts: bool = False) -> tuple[np.ndarray, ...]:
    """The distinct (a, b) pairs in lexicographic order, as ``np.unique(np.stack([a, b],
    axis=1), axis=0, return_counts=True)`` gives them: (a, b, count) with ``counts``,
    else (a, count).  ``a`` is ≥ 0; one int64 key per pair when it fits."""
    if a.shape[0] == 0:
        z = np.zeros(0, np.int64)
        return (z, z, z) if counts else (z, z)
    lo = int(b.min())
    width = int(b.max()) - lo + 1
    if (int(a.max()) + 1) * width >= 1 << 62:  # would overflow: the row sort
        uniq, n = np.unique(np.stack([a, b], axis=1), axis=0, return_counts=True)
        return (uniq[:, 0], uniq[:, 1], n) if counts else (uniq[:, 0], n)
    k = a * width + (b - lo)
    if bool((k[1:] >= k[:-1]).all()):
        # already sorted (a records table's (flow, dir, push unit) is): runs, not a sort
        first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        key, n = k[first], np.diff(np.r_[first, k.shape[0]])
    else:
        key, n = np.unique(k, return_counts=True)
    del k
    ua = key // width
    return (ua, key - ua * width + lo, n) if counts else (ua, n)


def _flow_runs(flow: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct flows of a records column and each row's index among them, as
    ``np.unique(flow, return_inverse=True)`` gives them — without the sort when the rows
    are sorted by flow, as a records table's are (``flow`` non-empty)."""
    if bool((flow[1:] >= flow[:-1]).all()):
        change = np.r_[True, flow[1:] != flow[:-1]]
        return flow[change], schema.run_index(change)
    flows, fi = np.unique(flow, return_inverse=True)
    return flows, fi


def _sorted_runs(f: np.ndarray, d: np.ndarray, u: np.ndarray) -> np.ndarray | None:
    """First row of every distinct (f, d, u) when the rows are in lexicographic order
    (a records table's flow index, dir code and push unit are), else None."""
    if f.shape[0] == 0:
        return np.zeros(0, np.int64)
    same_f = f[1:] == f[:-1]
    same_fd = same_f & (d[1:] == d[:-1])
    if not (
        bool((f[1:] >= f[:-1]).all())
        and bool((~same_f | (d[1:] >= d[:-1])).all())
        and bool((~same_fd | (u[1:] >= u[:-1])).all())
    ):
        return None
    return np.flatnonzero(np.r_[True, ~same_fd | (u[1:] != u[:-1])])


# records per pass of alignment_kpis_by_flow over a table sorted by flow (whole flows;
# the passes' temporaries stay in cache: 0.67 s for 7.9 M records in one pass, 0.22 s
# in passes of 1 << 16)
KPI_SLICE = 1 << 16


def alignment_kpis_by_flow(
    flow: np.ndarray,
    direction: np.ndarray,
    content_type: np.ndarray,
    psh_end: np.ndarray,
    push_unit: np.ndarray,
) -> dict[int, dict[str, Any]]:
    """:func:`alignment_kpis` for every connection of a records table at once.

    Per flow, application-data records (content type 23) are measured when the
    flow has any, else all its records — the same choice ``Trace.tls`` documents.
    Vectorised: a capture with a million records costs a few ``np.unique`` calls, made
    on ``KPI_SLICE`` records of whole flows at a time when the table is sorted by flow
    (as a records table is; every value is per flow).
    """
    n = flow.shape[0]
    if n <= KPI_SLICE or not bool((flow[1:] >= flow[:-1]).all()):
        return _alignment_kpis(flow, direction, content_type, psh_end, push_unit)
    cuts = [0]
    while cuts[-1] < n:
        b = min(cuts[-1] + KPI_SLICE, n)
        if b < n:  # on to the end of the last flow begun
            b = int(np.searchsorted(flow, flow[b - 1], side="right"))
        cuts.append(b)

    def one(ab: tuple[int, int]) -> dict[int, dict[str, Any]]:
        a, b = ab
        return _alignment_kpis(
            flow[a:b], direction[a:b], content_type[a:b], psh_end[a:b], push_unit[a:b]
        )

    # the passes on threads (their numpy calls release the GIL), merged in table order
    out: dict[int, dict[str, Any]] = {}
    for part in map_in_threads(one, list(zip(cuts[:-1], cuts[1:], strict=True))):
        out.update(part)
    return out


def _alignment_kpis(
    flow: np.ndarray,
    direction: np.ndarray,
    content_type: np.ndarray,
    psh_end: np.ndarray,
    push_unit: np.ndarray,
) -> dict[int, dict[str, Any]]:
    """:func:`alignment_kpis_by_flow` in one pass."""
    if flow.shape[0] == 0:
        return {}
    flows, fi = _flow_runs(flow)
    is_app = content_type == 23
    has_app = np.bincount(fi, weights=is_app, minlength=flows.shape[0]) > 0
    sel = is_app | ~has_app[fi]
    del is_app
    fs, ds, us, ps = fi[sel], direction[sel], push_unit[sel], psh_end[sel]
    del fi, sel
    n_rec = np.bincount(fs, minlength=flows.shape[0])
    n_psh = np.bincount(fs, weights=ps, minlength=flows.shape[0])
    del ps
    # push units: unique (flow, dir, unit) with the number of records ending in each
    runs = _sorted_runs(fs, ds, us)
    if runs is not None:  # in table order already: where the triple changes
        uflow, per_unit = fs[runs], np.diff(np.r_[runs, fs.shape[0]])
    else:  # one int64 key per record (a 1-D sort, not np.unique(axis=0)'s row sort)
        uflow, per_unit = _unique_pairs(fs * 2 + ds.astype(np.int64), us.astype(np.int64))
        uflow >>= 1
    del fs, ds, us, runs
    n_units = np.bincount(uflow, minlength=flows.shape[0])
    n_single = np.bincount(uflow, weights=per_unit == 1, minlength=flows.shape[0])
    pf, pk, pair_n = _unique_pairs(uflow, per_unit, counts=True)
    pairs = np.stack([pf, pk], axis=1)
    hists: dict[int, dict[int, int]] = {}
    for (f, k), c in zip(pairs.tolist(), pair_n.tolist(), strict=True):
        hists.setdefault(f, {})[int(k)] = int(c)
    out: dict[int, dict[str, Any]] = {}
    for i, f in enumerate(flows.tolist()):
        nr, nu = int(n_rec[i]), int(n_units[i])
        out[int(f)] = {
            "records": nr,
            "pct_psh_end": round(100.0 * n_psh[i] / nr, 1) if nr else None,
            "pct_single_record_units": round(100.0 * n_single[i] / nu, 1) if nu else None,
            "records_per_unit_hist": hists.get(i, {}),
        }
    return out


# records per align_all call in records_table (whole directions; bounds its temporaries:
# two slices are aligned at once on two threads; at 1 << 18 that raised sse-100k's peak
# RSS by 45 MB, 14 %)
ALIGN_CHUNK = 1 << 17

# records columns computed by align_all
ALIGN_COLUMNS = (
    "first_frame",
    "last_frame",
    "first_ts_ns",
    "last_ts_ns",
    "last_byte_frame",
    "last_byte_ts_ns",
    "segments",
    "psh_end",
    "push_unit",
    "records_in_unit",
    "retransmitted",
    "missing_bytes",
)


def records_table(
    tls_flows: list[TlsFlow],
    index: Mapping[tuple[int, int], DirectionIndex],
    segments: Mapping[str, np.ndarray],
    nflows: int,
) -> pd.DataFrame:
    """One row per TLS record, aligned with TCP frames and PSH; see
    ``pcapkit.schema.describe("records")``.

    ``index`` maps (flow, dir code) to the direction's piece index and ``segments``
    holds the segment columns of the TCP analysis (:data:`ALIGN_SEGMENT_COLUMNS`
    plus ``flow`` and ``dir``).
    """
    rc = record_columns(tls_flows)
    if rc.n == 0:
        return schema.frame("records", n=0)
    statuses = DECRYPT_STATUSES
    seg = segments
    # segments sliced per (flow, dir) by binary search, not by a mask per flow
    skey = seg["flow"] * 2 + seg["dir"]
    sorder = np.argsort(skey, kind="stable")
    # first sorted row of every (flow, dir) key, and one past the last key
    key_start = np.searchsorted(skey[sorder], np.arange(2 * nflows + 1)).tolist()
    del skey
    indexes = [index.get(g) or empty_index() for g in rc.groups]
    seg_rows = [sorder[key_start[f * 2 + d] : key_start[f * 2 + d + 1]] for f, d in rc.groups]
    data: dict[str, Any] = rc.data
    n = rc.n
    # aligned a slice of directions at a time (every value is per direction): the
    # temporaries of align_all stay a few MB however many records the capture has; the
    # slices on a few threads (numpy releases the GIL in its loops), each writing its own
    # rows of the columns
    g_first = rc.group_start.tolist()
    chunks: list[tuple[int, int]] = []
    g0 = 0
    while g0 < len(indexes):
        g1 = g0 + 1
        while g1 < len(indexes) and g_first[g1] - g_first[g0] < ALIGN_CHUNK:
            g1 += 1
        chunks.append((g0, g1))
        g0 = g1
    # the columns at the table's dtypes (values fit: see the schema)
    al = {c: np.empty(n, schema.dtype_of("records", c)) for c in ALIGN_COLUMNS}

    def align_chunk(chunk: tuple[int, int]) -> None:
        g0, g1 = chunk
        r0, r1 = g_first[g0], g_first[g1]
        rows = np.concatenate(seg_rows[g0:g1])
        seg_group = np.repeat(np.arange(g1 - g0), [r.shape[0] for r in seg_rows[g0:g1]])
        part = align_all(
            np.repeat(np.arange(g1 - g0), np.diff(g_first[g0 : g1 + 1])),
            data["offset"][r0:r1],
            data["length"][r0:r1],
            indexes[g0:g1],
            seg_group,
            {k: seg[k][rows] for k in ALIGN_SEGMENT_COLUMNS},
        )
        for c, v in part.items():
            al[c][r0:r1] = v

    map_in_threads(align_chunk, chunks)
    data.update(al)
    # header-walked records with bytes never captured are incomplete
    incomplete = data.pop("_bulk") & (al["missing_bytes"] > 0)
    data["status"][incomplete] = statuses.index("incomplete")
    del incomplete
    data["dir"] = schema.categorical(data["dir"], schema.DIRS)
    data["plaintext_len"] = schema.masked(data["plaintext_len"], data["plaintext_len"] < 0, "Int32")
    data["status"] = schema.categorical(data["status"], statuses)
    data["epoch"] = schema.categorical(data["epoch"], EPOCHS)
    data["handshake"] = schema.strings(data["handshake"], rc.handshake_names)
    return schema.frame("records", data, n)


def _record_counts(
    flow: np.ndarray, decrypted: np.ndarray
) -> tuple[dict[int, int], dict[int, int]]:
    """Records per flow, and decrypted records per flow (flows with any), as
    ``groupby("flow").size()`` gives them, without a copy of the table."""
    if flow.shape[0] == 0:
        return {}, {}
    if bool((flow[1:] >= flow[:-1]).all()):
        # sorted by flow, as a records table is: the runs' lengths, and the decrypted
        # rows placed among the runs — no index per record (a 63 MB temporary at 7.9 M
        # records, 0.15 s of fresh pages at sse-1M)
        at = np.flatnonzero(np.r_[True, flow[1:] != flow[:-1]])
        flows = flow[at]
        n = np.diff(np.append(at, flow.shape[0]))
        run = np.searchsorted(at, np.flatnonzero(decrypted), side="right") - 1
        nd = np.bincount(run, minlength=flows.shape[0])
    else:
        flows, fi = _flow_runs(flow)
        n = np.bincount(fi, minlength=flows.shape[0])
        nd = np.bincount(fi[decrypted], minlength=flows.shape[0])
    fl = flows.tolist()
    counts = dict(zip(fl, n.tolist(), strict=True))
    dec = {f: c for f, c in zip(fl, nd.tolist(), strict=True) if c}
    return counts, dec


def tls_table(
    tls_flows: list[TlsFlow],
    records: pd.DataFrame,
    hs_times: Mapping[int, tuple[int, int]],
    milestones: pd.DataFrame | None = None,
    legs: Mapping[int, tuple[int | None, int | None]] | None = None,
) -> pd.DataFrame:
    """One row per TLS session; see ``pcapkit.schema.describe("tls")``.

    ``hs_times`` is :func:`handshake_times` of the records, ``milestones`` their
    :func:`handshake_milestones` and ``legs`` each flow's (client, server) round trip
    from the capture point in ns: with both, the handshake is split into network,
    server, flight and client time (:func:`pcapkit.sessions.timing.split_handshake`)."""
    recs = records
    splits = _splits(milestones, legs or {})
    kpis = alignment_kpis_by_flow(
        recs["flow"].to_numpy(np.int64),
        recs["dir"].cat.codes.to_numpy(),
        recs["content_type"].to_numpy(np.int16),
        recs["psh_end"].to_numpy(bool),
        recs["push_unit"].to_numpy(),
    )
    hs_ms = {f: (t1 - t0) / 1e6 for f, (t0, t1) in hs_times.items()}
    counts, dec = _record_counts(
        recs["flow"].to_numpy(np.int64), (recs["status"] == "decrypted").to_numpy(bool)
    )
    no_kpi: dict[str, Any] = {
        "pct_psh_end": None,
        "pct_single_record_units": None,
        "records_per_unit_hist": {},
    }
    rows: dict[str, list[Any]] = {c: [] for c in schema.columns("tls")}
    for tf in tls_flows:
        sm = tf.summary
        kpi = kpis.get(tf.flow, no_kpi)
        rows["flow"].append(tf.flow)
        rows["version"].append(tls_version_name(sm.version) if sm.version else None)
        rows["cipher"].append(sm.cipher_suite_name)
        rows["record_overhead"].append(record_overhead(sm.version, sm.cipher_suite))
        rows["sni"].append(sm.sni)
        rows["alpn"].append(sm.alpn)
        rows["alpn_offered"].append(",".join(sm.alpn_offered) if sm.alpn_offered else None)
        rows["versions_offered"].append(
            ",".join(tls_version_name(v) for v in sm.offered_versions) or None
        )
        g = sm.key_exchange_group
        rows["key_exchange_group"].append(None if g is None else tls_group_name(g))
        rows["cipher_suites_offered"].append(
            ",".join(f"0x{c:04x}" for c in sm.cipher_suites_offered)
            if sm.cipher_suites_offered
            else None
        )
        rows["resumption_offered"].append(sm.resumption_offered)
        rows["resumption_accepted"].append(sm.resumption_accepted)
        rows["resumption_kind"].append(sm.resumption_kind)
        rows["early_data_offered"].append(sm.early_data_offered)
        rows["early_data_accepted"].append(sm.early_data_accepted)
        rows["hello_retry_request"].append(sm.hello_retry_request)
        rows["handshake_complete"].append(sm.handshake_complete)
        rows["handshake_ms"].append(hs_ms.get(tf.flow))
        sp = splits.get(tf.flow, Split())
        rows["handshake_network_ms"].append(sp.network_ms)
        rows["handshake_server_ms"].append(sp.server_ms)
        rows["handshake_flight_ms"].append(sp.flight_ms)
        rows["handshake_client_ms"].append(sp.client_ms)
        rows["decrypted"].append(sm.decrypted)
        rows["why_not"].append(sm.why_not)
        rows["records"].append(int(counts.get(tf.flow, 0)))  # incl. header-walked (bulk)
        rows["decrypted_records"].append(int(dec.get(tf.flow, 0)))
        rows["key_updates"].append(sm.key_updates)
        rows["cert_chain_len"].append(len(sm.server_certificate_lengths) or None)
        rows["pct_psh_end"].append(kpi["pct_psh_end"])
        rows["pct_single_record_units"].append(kpi["pct_single_record_units"])
        rows["records_per_unit"].append(kpi["records_per_unit_hist"])
        rows["roles_swapped"].append(sm.roles_swapped)
    n = len(rows["flow"])
    if n == 0:
        return schema.frame("tls", n=0)
    return schema.frame("tls", dict(rows), n)  # nullable columns: the schema's dtypes


def _splits(
    milestones: pd.DataFrame | None, legs: Mapping[int, tuple[int | None, int | None]]
) -> dict[int, Split]:
    if milestones is None or milestones.empty:
        return {}
    out = {}
    rows: Any = milestones.itertuples(index=False)  # namedtuples of the declared columns
    for m in rows:
        dc, ds = legs.get(int(m.flow), (None, None))
        out[int(m.flow)] = split_handshake(
            _opt(m.client_hello_ts_ns),
            _opt(m.server_hello_ts_ns),
            _opt(m.server_flight_end_ts_ns),
            _opt(m.client_answer_ts_ns),
            _opt(m.client_finished_ts_ns),
            dc,
            ds,
        )
    return out


def _opt(v: Any) -> int | None:
    return None if v is None or v is pd.NA else int(v)


def _client_hello_and_finished(
    recs: pd.DataFrame, versions: Mapping[int, int | None]
) -> tuple[dict[int, int], dict[int, int]]:
    """Per flow, the row of the ClientHello record and of the client's Finished record.

    The Finished is the client's first record after the ClientHello in the handshake
    epoch (TLS 1.3) or the first encrypted one (TLS 1.2, after ChangeCipherSpec), never
    early data.  Records are sorted by (flow, dir, offset), so "first" is the first row
    of a mask.
    """
    if recs.empty:
        return {}, {}
    flow = recs["flow"].to_numpy(np.int64)
    c2s = (recs["dir"] == "c2s").to_numpy(bool)
    # compared in the column's own dtype (int16): an int64 copy of it was a fresh 60 MB
    # allocation at 7.9 M records, 0.01-0.15 s as the page faults went
    outer = np.asarray(recs["outer_content_type"].to_numpy())
    cand = np.nonzero(c2s & (outer == 22))[0]
    # the handshake texts of the candidates only (not an object per record)
    hs = recs["handshake"].take(cand).to_numpy(object)
    ch_rows = [i for i, h in zip(cand.tolist(), hs.tolist(), strict=True) if "ClientHello" in h]
    if not ch_rows:
        return {}, {}
    ch_flow, first = np.unique(flow[ch_rows], return_index=True)
    ch_at = np.asarray(ch_rows)[first]
    ch = dict(zip(ch_flow.tolist(), ch_at.tolist(), strict=True))
    ch_off = np.full(int(flow.max()) + 1, np.iinfo(np.int64).max, np.int64)
    ch_off[ch_flow] = recs["offset"].to_numpy(np.int64)[ch_at]
    tls13 = np.zeros(ch_off.shape[0], bool)
    for f, v in versions.items():
        if f < tls13.shape[0]:
            tls13[f] = is_tls13_version(v)
    ep = recs["epoch"]
    if isinstance(ep.dtype, pd.CategoricalDtype):
        # compared as category codes (a text per record would be ~350 MB at 7.9 M records)
        cats = list(ep.cat.categories)
        code = {e: (cats.index(e) if e in cats else -2) for e in ("handshake", "application")}
        in_epoch = ep.cat.codes.to_numpy() == np.where(
            tls13[flow], code["handshake"], code["application"]
        )
    else:
        in_epoch = ep.to_numpy(object) == np.where(tls13[flow], "handshake", "application")
    fin = (
        c2s
        & in_epoch
        & ~recs["early_data"].to_numpy(bool)
        & (recs["offset"].to_numpy(np.int64) > ch_off[flow])
    )
    rows = np.nonzero(fin)[0]
    f_flow, f_first = np.unique(flow[rows], return_index=True)
    done = {f: r for f, r in zip(f_flow.tolist(), rows[f_first].tolist(), strict=True) if f in ch}
    return ch, done


def handshake_times(
    recs: pd.DataFrame, versions: Mapping[int, int | None]
) -> dict[int, tuple[int, int]]:
    """Per flow: (ClientHello first byte seen, the client's Finished record readable), ns."""
    ch, done = _client_hello_and_finished(recs, versions)
    if not done:
        return {}
    first_ts = recs["first_ts_ns"].to_numpy(np.int64)
    last_ts = recs["last_ts_ns"].to_numpy(np.int64)
    return {f: (int(first_ts[ch[f]]), int(last_ts[r])) for f, r in done.items()}


def handshake_milestones(recs: pd.DataFrame, versions: Mapping[int, int | None]) -> pd.DataFrame:
    """One row per TLS session with a ClientHello: when each handshake milestone was seen
    (``schema.describe("tls_handshake")``; :mod:`pcapkit.sessions.timing`).

    The server's first record is its first record of the connection (the ServerHello),
    seen at or after the ClientHello; the end of its flight is the last of its records
    complete at or before the client's Finished (what the client could have waited on).
    """
    ch, done = _client_hello_and_finished(recs, versions)
    if not ch:
        return schema.frame("tls_handshake", n=0)
    flow = recs["flow"].to_numpy(np.int64)
    s2c = (recs["dir"] == "s2c").to_numpy(bool)
    offset = recs["offset"].to_numpy(np.int64)
    key = flow * 2 + s2c  # records are sorted by (flow, dir, offset): one slice per key
    first_ts = recs["first_ts_ns"].to_numpy(np.int64)
    last_ts = recs["last_ts_ns"].to_numpy(np.int64)
    first_fr = recs["first_frame"].to_numpy(np.int64)
    last_fr = recs["last_frame"].to_numpy(np.int64)
    srows = np.nonzero(s2c)[0]
    s_flow = flow[srows]
    # the server's rows of each flow: one slice of srows (records are sorted by flow, dir)
    lo = np.searchsorted(s_flow, np.asarray(sorted(ch), np.int64), side="left")
    hi = np.searchsorted(s_flow, np.asarray(sorted(ch), np.int64), side="right")
    cols: dict[str, list[Any]] = {c: [] for c in schema.columns("tls_handshake")}
    for f, a, b in zip(sorted(ch), lo.tolist(), hi.tolist(), strict=True):
        c = ch[f]
        t0 = int(first_ts[c])
        cols["flow"].append(f)
        cols["client_hello_frame"].append(int(first_fr[c]))
        cols["client_hello_ts_ns"].append(t0)
        d = done.get(f)
        cols["client_finished_frame"].append(None if d is None else int(last_fr[d]))
        cols["client_finished_ts_ns"].append(None if d is None else int(last_ts[d]))
        mine = srows[a:b]
        first = mine[:1] if mine.shape[0] and first_ts[mine[0]] >= t0 else mine[:0]
        cols["server_hello_frame"].append(int(first_fr[first[0]]) if first.shape[0] else None)
        cols["server_hello_ts_ns"].append(int(first_ts[first[0]]) if first.shape[0] else None)
        end = None
        if d is not None and first.shape[0]:
            before = mine[last_ts[mine] <= last_ts[d]]
            if before.shape[0]:
                end = int(before[np.argmax(last_ts[before])])
        cols["server_flight_end_frame"].append(None if end is None else int(last_fr[end]))
        cols["server_flight_end_ts_ns"].append(None if end is None else int(last_ts[end]))
        # the client's first record after that flight: where its own work ended
        answer = None
        if end is not None:
            k0, k1 = np.searchsorted(key, [2 * f, 2 * f + 1])
            crows = np.arange(k0, k1)
            crows = crows[offset[crows] > offset[c]]
            after = crows[first_ts[crows] >= last_ts[end]]
            if after.shape[0]:
                answer = int(after[0])
        cols["client_answer_frame"].append(None if answer is None else int(first_fr[answer]))
        cols["client_answer_ts_ns"].append(None if answer is None else int(first_ts[answer]))
    data: dict[str, Any] = {
        c: v if c == "flow" else pd.array(v, dtype="Int64") for c, v in cols.items()
    }
    return schema.frame("tls_handshake", data, len(cols["flow"]))
