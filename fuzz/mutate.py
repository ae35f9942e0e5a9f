"""Byte-string mutations (deterministic for a given ``random.Random``), libFuzzer-style:
bit flips, interesting integers written over length fields, inserted, deleted, repeated
and spliced spans.  Used by the file-level fuzzer and by the dissector fuzzers when
atheris is not used."""

from __future__ import annotations

import random
import struct

# values that sit on boundaries of length fields and counters
INTERESTING = (
    0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 255, 256, 1199, 1200, 0x3FFF,
    0x4000, 0x4800, 0x4801, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0xFFFFFF, 0x1000000, 0x7FFFFFFF,
    0x80000000, 0xFFFFFFFF, 1 << 30, 1 << 60, (1 << 62) - 1,
)  # fmt: skip
MAX_LEN = 1 << 20  # mutants never grow beyond 1 MiB (a fuzzer explores, it does not bomb)


def _span(rng: random.Random, n: int) -> tuple[int, int]:
    a = rng.randrange(n)
    k = min(n - a, rng.choice((1, 2, 4, 8, 16, 64, 256, 1024)))
    return a, a + max(1, rng.randrange(k + 1))


def mutate(
    data: bytes, rng: random.Random, *, others: list[bytes] | tuple[bytes, ...] = ()
) -> bytes:
    """One mutant of ``data``: 1-8 stacked mutations (``others``: splice sources)."""
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4, 8))):
        op = rng.randrange(11)
        n = len(b)
        if n == 0 or op == 0:  # insert random bytes
            at = rng.randrange(n + 1)
            b[at:at] = rng.randbytes(rng.choice((1, 2, 4, 8, 32)))
        elif op == 1:  # flip a bit
            i = rng.randrange(n)
            b[i] ^= 1 << rng.randrange(8)
        elif op == 2:  # set a byte
            b[rng.randrange(n)] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
        elif op == 3:  # write an interesting integer (a length field), either byte order
            v = rng.choice(INTERESTING)
            width = rng.choice((1, 2, 3, 4, 8))
            v &= (1 << (8 * width)) - 1
            raw = v.to_bytes(width, rng.choice(("big", "little")))
            at = rng.randrange(n)
            b[at : at + width] = raw
        elif op == 4:  # delete a span
            a, e = _span(rng, n)
            del b[a:e]
        elif op == 5:  # repeat a span
            a, e = _span(rng, n)
            b[e:e] = b[a:e] * rng.choice((1, 2, 8, 64))
        elif op == 6:  # copy a span elsewhere
            a, e = _span(rng, n)
            at = rng.randrange(n)
            b[at : at + (e - a)] = b[a:e]
        elif op == 7 and others:  # splice from another seed
            o = rng.choice(others)
            if o:
                a, e = _span(rng, len(o))
                at = rng.randrange(n + 1)
                b[at:at] = o[a:e]
        elif op == 8:  # truncate
            del b[rng.randrange(n) :]
        elif op == 9:  # add or subtract a small delta to a 16/32-bit field
            at = rng.randrange(n)
            width = rng.choice((2, 4))
            if at + width <= n:
                fmt = "!H" if width == 2 else "!I"
                (v,) = struct.unpack_from(fmt, b, at)
                v = (v + rng.choice((-16, -4, -1, 1, 4, 16))) % (1 << (8 * width))
                struct.pack_into(fmt, b, at, v)
        else:  # random bytes over a span
            a, e = _span(rng, n)
            b[a:e] = rng.randbytes(e - a)
        if len(b) > MAX_LEN:
            del b[MAX_LEN:]
    return bytes(b)
