"""The records alignment as it was before issue 16's piece-search shortcuts (main
9ac39c8): the oracle tests/test_align_reference.py compares :func:`pcapkit.align.align_all`
with.  Not collected (no ``test_`` prefix)."""

from __future__ import annotations

import numpy as np

from pcapkit.align import _RETX_HI, _RETX_LO
from pcapkit.net.tcp import DirectionIndex, group_cummax, group_last_index


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
    i_last = np.searchsorted(p_start, last, side="right") - 1
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
        i0 = np.searchsorted(p_end, off, side="right")
        i1 = np.searchsorted(p_start, end, side="left")
        spanned = np.maximum(i1 - i0, 0)
        # captured bytes in [base, x): whole pieces before x plus the part of the piece holding x
        cap_len = np.clip(p_cap - p_start, 0, None)
        csum = np.concatenate([[0], np.cumsum(cap_len)])

        def captured_before(ii: np.ndarray, x: np.ndarray) -> np.ndarray:
            ic = np.maximum(ii, 0)
            part = np.clip(x - p_start[ic], 0, cap_len[ic])
            return np.where(ii >= 0, csum[ic] + part, 0)

        # the last piece starting at or before end: i1 - 1, or i1 when a piece starts at
        # end (when no two pieces start at one offset)
        if bool((p_start[1:] > p_start[:-1]).all()):
            i_end = i1 - 1 + (p_start[np.minimum(i1, k - 1)] == end) * (i1 < k)
        else:
            i_end = np.searchsorted(p_start, end, side="right") - 1
        missing = np.maximum(
            rec_len - (captured_before(i_end, end) - captured_before(i_off, off)), 0
        )
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
