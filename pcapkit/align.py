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

from typing import Any

import numpy as np

from .net.tcp import KINDS, DirectionIndex

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
    from .net.tcp import _group_cummax, _group_last_index

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

    def locate(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if k == 0:
            return np.full(x.shape, -1), np.full(x.shape, -1)
        i = np.searchsorted(p_start, x, side="right") - 1
        j = np.maximum(i, 0)
        ok = (i >= 0) & (x < p_end[j])
        return np.where(ok, p_frame[j], -1), np.where(ok, p_ts[j], -1)

    first_frame, first_ts = locate(off)
    lf2, lt2 = locate(last)
    if k:
        # in-order delivery (DirectionIndex.delivered), restarted per direction
        cm = _group_cummax(p_frame, pg)
        holder = _group_last_index(p_frame == cm, pg)
        gap = np.ones(k, bool)
        gap[1:] = p_start[1:] > p_end[:-1]
        first_of_g = np.r_[True, pg[1:] != pg[:-1]]
        gap = np.where(first_of_g, p_start > base[pg], gap)
        broken = _group_cummax(gap.astype(np.int64), pg) > 0
        i = np.searchsorted(p_start, last, side="right") - 1
        j = np.maximum(i, 0)
        ok = (i >= 0) & (last < p_end[j]) & ~broken[j]
        last_frame = np.where(ok, cm[j], lf2)  # behind a hole never filled: the carrier
        last_ts = np.where(ok, p_ts[np.maximum(holder[j], 0)], lt2)
        i0 = np.searchsorted(p_end, off, side="right")
        i1 = np.searchsorted(p_start, end, side="left")
        spanned = np.maximum(i1 - i0, 0)
        # captured bytes in [base, x): whole pieces before x plus the part of the piece holding x
        cap_len = np.clip(p_cap - p_start, 0, None)
        csum = np.concatenate([[0], np.cumsum(cap_len)])

        def captured_before(x: np.ndarray) -> np.ndarray:
            ii = np.searchsorted(p_start, x, side="right") - 1
            ic = np.maximum(ii, 0)
            part = np.clip(x - p_start[ic], 0, cap_len[ic])
            return np.where(ii >= 0, csum[ic] + part, 0)

        missing = np.maximum(rec_len - (captured_before(end) - captured_before(off)), 0)
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
    if sf.shape[0]:
        pos = np.minimum(np.searchsorted(sf, lf2), sf.shape[0] - 1)
        hit = (lf2 >= 0) & (sf[pos] == lf2)
        row = order[pos]
        psh_end = hit & seg["psh"][row] & (s_end[row] == end)
    else:
        psh_end = np.zeros(n, bool)

    # push units: PSH segments that delivered new bytes; a sentinel at each direction's
    # start restarts the numbering, so unit = PSH ends in (start, x] of its direction
    ends = np.sort(np.concatenate([s_end[(seg["new_bytes"] > 0) & seg["psh"]], base]))
    unit_g = np.searchsorted(ends, last, side="right")
    unit = unit_g - np.searchsorted(ends, base[rec_group], side="right")
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
    Vectorised: a capture with a million records costs a few ``np.unique`` calls.
    """
    if flow.shape[0] == 0:
        return {}
    flows, fi = np.unique(flow, return_inverse=True)
    is_app = content_type == 23
    has_app = np.bincount(fi, weights=is_app, minlength=flows.shape[0]) > 0
    sel = is_app | ~has_app[fi]
    fs, ds, us, ps = fi[sel], direction[sel].astype(np.int64), push_unit[sel], psh_end[sel]
    n_rec = np.bincount(fs, minlength=flows.shape[0])
    n_psh = np.bincount(fs, weights=ps.astype(np.float64), minlength=flows.shape[0])
    # push units: unique (flow, dir, unit) with the number of records ending in each
    ukey = np.stack([fs, ds, us.astype(np.int64)], axis=1)
    uniq, per_unit = np.unique(ukey, axis=0, return_counts=True)
    uflow = uniq[:, 0] if uniq.shape[0] else np.zeros(0, np.int64)
    n_units = np.bincount(uflow, minlength=flows.shape[0])
    n_single = np.bincount(uflow, weights=per_unit == 1, minlength=flows.shape[0])
    pairs, pair_n = np.unique(np.stack([uflow, per_unit], axis=1), axis=0, return_counts=True)
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
