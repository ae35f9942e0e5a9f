"""Capture input/output: pcap and pcapng over an mmap, gzip input, writers, secrets."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .reader import RawCapture, read_capture

__all__ = ["RawCapture", "read_capture"]


def __getattr__(name: str) -> Any:
    """``RawCapture`` and ``read_capture`` load the reader (numpy) on first use:
    :mod:`pcapkit.io.prefetch` runs before numpy is imported."""
    if name in __all__:
        from . import reader

        return getattr(reader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
