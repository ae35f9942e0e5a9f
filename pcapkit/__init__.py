"""pcapkit — name the cause of a slow streaming API from a packet capture.

>>> import pcapkit
>>> t = pcapkit.open("fixtures/....pcapng")       # doctest: +SKIP
>>> t.flows[["flow", "client_ip", "server_port", "s2c_bytes"]]   # doctest: +SKIP

The import name is ``pcapkit``; the distribution is ``pcapkit-forensics`` (PyPI's
unrelated ``pypcapkit`` installs a package of the same import name: the two
cannot share one environment).
"""

import os
import sys
from typing import TYPE_CHECKING, Any

from .errors import CaptureTooBroken, NotACapture, PcapkitError, UnsupportedLinkType

if TYPE_CHECKING:
    from .trace import StreamBytes, Trace, open

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``Trace``, ``open`` and ``StreamBytes`` load pcapkit.trace (and pandas) on first
    use, so ``pcapkit --help`` and ``import pcapkit.errors`` start without them."""
    if name == "open" and "pcapkit.trace" not in sys.modules:
        return _open_first
    if name in ("Trace", "open", "StreamBytes"):
        import gc

        # pcapkit.trace brings pandas, numpy and pyarrow (~300k objects, none garbage):
        # the cyclic collector's passes during that import only walk them (a full one
        # among them), so it is off until the import is done, then as it was
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            from . import trace
        finally:
            if was_enabled:
                gc.enable()
        return getattr(trace, name)
    import importlib
    import importlib.util

    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        # ``pcapkit.schema`` and the like after a bare ``import pcapkit``, as when the
        # package imported its tables eagerly
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _open_first(path, *args, **kwargs):  # type: ignore[no-untyped-def]
    """:func:`pcapkit.trace.open` (its documentation) when pcapkit.trace is not loaded
    yet: the record walk of a big classic pcap starts in a forked child
    (:mod:`pcapkit.io.prefetch`) while this process imports numpy, pandas and pyarrow
    (~0.5 s); the reader then takes the child's offsets instead of walking."""
    from .io import prefetch

    if "pcapkit.trace" not in sys.modules and isinstance(path, (str, os.PathLike)):
        prefetch.start(path)
    try:
        trace_open = __getattr__("Trace") and sys.modules[f"{__name__}.trace"].open
        return trace_open(path, *args, **kwargs)
    finally:
        prefetch.abandon_all()  # a walk the reader did not take (it failed before)


def diff(before, after, **kwargs):  # type: ignore[no-untyped-def]
    """Compare two captures (paths or traces): :func:`pcapkit.report.diff.diff`."""
    from .report.diff import diff as _diff

    return _diff(before, after, **kwargs)


__all__ = [
    "open",
    "diff",
    "Trace",
    "StreamBytes",
    "PcapkitError",
    "NotACapture",
    "UnsupportedLinkType",
    "CaptureTooBroken",
    "__version__",
]
