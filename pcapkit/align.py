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

Per connection KPIs (DETECTION.md §5.4) come from :func:`alignment_kpis`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .net.tcp import KINDS, DirectionIndex

_RETX_KINDS = np.array(
    [
        KINDS.index(k)
        for k in (
            "out_of_order",
            "retransmission",
            "spurious_retransmission",
            "overlap_same",
            "overlap_diff",
        )
    ]
)


def align_direction(
    rec_off: np.ndarray,
    rec_len: np.ndarray,
    idx: DirectionIndex,
    seg: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Alignment columns for records of one direction.

    ``seg`` holds this direction's rows of the segments table (frame, offset,
    end, psh, kind, new_bytes), in any order.
    """
    n = rec_off.shape[0]
    rec_end = rec_off + rec_len
    last = np.maximum(rec_end - 1, rec_off)
    first_frame, first_ts = idx.locate(rec_off)
    last_frame, last_ts = idx.delivered(last)
    # behind a hole that was never filled: fall back to the frame that carried the byte
    lf2, lt2 = idx.locate(last)
    behind = last_frame < 0
    last_frame = np.where(behind, lf2, last_frame)
    last_ts = np.where(behind, lt2, last_ts)

    k = idx.start.shape[0]
    if k:
        i0 = np.searchsorted(idx.end, rec_off, side="right")
        i1 = np.searchsorted(idx.start, rec_end, side="left")
        spanned = np.maximum(i1 - i0, 0)
        # captured bytes in [0, x): whole pieces before x plus the part of the piece holding x
        cap_len = np.clip(idx.cap_end - idx.start, 0, None)
        csum = np.concatenate([[0], np.cumsum(cap_len)])

        def captured_before(x: np.ndarray) -> np.ndarray:
            i = np.searchsorted(idx.start, x, side="right") - 1
            ic = np.maximum(i, 0)
            part = np.clip(x - idx.start[ic], 0, cap_len[ic])
            return np.where(i >= 0, csum[ic] + part, 0)

        covered = captured_before(rec_end) - captured_before(rec_off)
        missing = np.maximum(rec_len - covered, 0)
    else:
        spanned = np.zeros(n, np.int64)
        missing = rec_len.copy()

    # PSH: the segment that first delivered the last byte, and whether the record ends with it
    s_frame = seg["frame"]
    order = np.argsort(s_frame, kind="stable")
    sf = s_frame[order]
    pos = np.searchsorted(sf, lf2)
    pos_ok = (lf2 >= 0) & (pos < sf.shape[0])
    pos_c = np.minimum(pos, max(sf.shape[0] - 1, 0))
    hit = pos_ok & (sf[pos_c] == lf2) if sf.shape[0] else np.zeros(n, bool)
    row = order[pos_c] if sf.shape[0] else np.zeros(n, np.int64)
    seg_end = np.where(hit, seg["end"][row], -1) if sf.shape[0] else np.full(n, -1)
    seg_psh = np.where(hit, seg["psh"][row], False) if sf.shape[0] else np.zeros(n, bool)
    psh_end = seg_psh & (seg_end == rec_end)

    # push units: PSH segments that delivered new bytes, in offset order
    newdata = seg["new_bytes"] > 0
    psh_ends = np.sort(seg["end"][newdata & seg["psh"]])
    # unit id of a byte at offset x = number of PSH ends ≤ x
    unit = np.searchsorted(psh_ends, last, side="right")
    _, inv, counts = np.unique(unit, return_inverse=True, return_counts=True)
    in_unit = counts[inv.reshape(-1)] if n else np.zeros(0, np.int64)

    # retransmissions touching the record
    rk = np.isin(seg["kind"], _RETX_KINDS) & (seg["end"] > seg["offset"])
    if rk.any():
        rs = seg["offset"][rk]
        re_ = seg["end"][rk]
        o = np.argsort(rs, kind="stable")
        rs, re_ = rs[o], re_[o]
        pm = np.maximum.accumulate(re_)
        j = np.searchsorted(rs, rec_end, side="left") - 1
        retx = (j >= 0) & (pm[np.maximum(j, 0)] > rec_off)
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
