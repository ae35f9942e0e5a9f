"""Memory pages: numpy's transparent huge pages off where the analysis churns through
temporaries, and the C heap's free pages given back before the detectors.

numpy asks Linux for transparent huge pages (``madvise(MADV_HUGEPAGE)``) for every array
of 4 MB or more.  The TLS record walk and the records' alignment make and drop many such
arrays, and with huge pages the kernel cleared about four times the bytes
(``clear_page_erms``: 20 % of the samples of ``open(p).records`` at sse-1M with huge
pages, 5 % without).  Measured at sse-1M, THP in madvise mode, 3-4 rounds each:
``open(p).records`` 4.6-5.1 s → 3.8-4.0 s; the records phase in the analysis 2.6-3.5 s
→ 2.1 s.  Elsewhere small pages do not pay: the detectors' fork then copies more page
tables (+0.5 s of system time at sse-1M), so :func:`small_pages` covers the records
only, and the command line turns huge pages off for the whole process
(:func:`no_numpy_hugepages`).

A ``NUMPY_MADVISE_HUGEPAGE`` set in the environment is the user's word: both leave numpy
as it is then.  numpy's switch is process-wide; :func:`small_pages` turns it off while
any thread is inside and back to what it was when the last one leaves.

:func:`release_free_memory` (glibc's ``malloc_trim(0)``): what the tables' construction
freed inside the C heap (pandas', Arrow's and the interpreter's allocations, between
live ones) stays resident until it is reused; the detectors, which hold the analysis's
peak, reuse little of it.  Given back before them (:func:`pcapkit.detect.run_detectors`),
``pcapkit analyze``'s peak RSS at 1M packets fell 884 → 828 MiB on h2 (0.97 → 0.91× the
file) and 1889 → 1838 MiB on sse, 2 rounds each, the wall time unchanged (the call
itself: 11 ms on a 1.7 GB heap, < 1 ms on a small one; in the library, whose threads
have heaps of their own, 1716 → 1420 MiB resident at sse-1M).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

ENV = "NUMPY_MADVISE_HUGEPAGE"

_lock = threading.Lock()
_inside = 0
_before: bool | None = None


def _setter() -> Callable[[bool], bool] | None:
    """numpy's ``_set_madvise_hugepage`` (returns the previous state), when numpy is
    loaded and has it."""
    np = sys.modules.get("numpy")
    core = getattr(np, "_core", None) or getattr(np, "core", None)
    return getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)


def no_numpy_hugepages() -> None:
    """Huge pages off for this process and its children (the environment numpy reads at
    import), unless the environment already says; for the command line."""
    if ENV in os.environ:
        return
    os.environ[ENV] = "0"
    setter = _setter()
    if setter is not None:  # numpy already loaded: set it now
        setter(False)


@contextmanager
def small_pages() -> Iterator[None]:
    """numpy's huge pages off inside (see the module's docstring)."""
    global _inside, _before
    setter = _setter()
    if setter is None or ENV in os.environ:
        yield
        return
    with _lock:
        if _inside == 0:
            _before = bool(setter(False))
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0 and _before is not None:
                setter(_before)
                _before = None


_trim: Callable[[int], int] | None = None
_trim_known = False


def release_free_memory() -> bool:
    """Give the C heap's free pages back to the kernel (glibc ``malloc_trim(0)``; see the
    module's docstring).  True when it ran; False where there is no such call (not
    glibc), which is then a no-op."""
    global _trim, _trim_known
    if not _trim_known:
        _trim_known = True
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                _trim = ctypes.CDLL(None).malloc_trim
            except (OSError, AttributeError):  # musl and others: no malloc_trim
                _trim = None
    if _trim is None:
        return False
    _trim(0)
    return True
