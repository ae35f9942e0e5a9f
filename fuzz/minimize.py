"""Shrink a failing capture to the frames that still make it fail (delta debugging).

    python -m fuzz.minimize fuzz/work/crashes/files-….bin out.pcapng

Frames are removed in halves, then one by one, while :func:`fuzz.files.check` still
reports a failure with the same signature (where it was raised); the result is written
as pcapng with the input's interfaces and secrets, ready to become a regression test.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable

from .files import FileSeed, check, serialise
from .run import signature


def load(path: str) -> FileSeed:
    from pcapkit.io import read_capture

    cap = read_capture(path)
    try:
        frames = [(int(cap.ts_ns[i]), cap.frame_bytes(i + 1)) for i in range(cap.frames)]
        lt = cap.interfaces[0].linktype if cap.interfaces else 101
        return FileSeed(path, lt, frames, [s.data for s in cap.secrets])
    finally:
        cap.close()


def failure_of(data: bytes) -> set[str]:
    fd, p = tempfile.mkstemp(suffix=".pcapng")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    try:
        return {f"{x.where}: {signature(x.text)}" for x in check(p)}
    finally:
        os.unlink(p)


def minimize(seed: FileSeed, keep: Callable[[bytes], bool]) -> FileSeed:
    frames = list(seed.frames)
    n = 2
    while len(frames) >= 2:
        chunk = max(1, len(frames) // n)
        removed = False
        for i in range(0, len(frames), chunk):
            trial = frames[:i] + frames[i + chunk :]
            if trial and keep(serialise(seed, trial)):
                frames, removed = trial, True
                n = max(n - 1, 2)
                break
        if not removed:
            if chunk == 1:
                break
            n = min(len(frames), n * 2)
    return FileSeed(seed.name, seed.linktype, frames, seed.secrets)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("crash")
    ap.add_argument("out")
    a = ap.parse_args()
    seed = load(a.crash)
    want = failure_of(serialise(seed))
    if not want:
        raise SystemExit(f"{a.crash}: no failure to keep")
    small = minimize(seed, lambda d: bool(failure_of(d) & want))
    with open(a.out, "wb") as f:
        f.write(serialise(small))
    print(f"{len(seed.frames)} -> {len(small.frames)} frames: {sorted(want)}")


if __name__ == "__main__":
    main()
