"""Whole-file errors: one clear line for the user, a non-zero exit in the CLI.

Per-packet problems never raise: they become rows of ``Trace.anomalies``
(DESIGN.md §4).  Only a problem with the whole input raises one of these.
"""

from __future__ import annotations

# PCAPKIT_STRICT=1 re-raises what isolate() would turn into a row (debugging, tests)
STRICT_ENV = "PCAPKIT_STRICT"


class PcapkitError(Exception):
    """Base of every error pcapkit raises for a whole input."""


class NotACapture(PcapkitError):
    """The file is neither pcap nor pcapng (nor a gzip of either)."""


class UnsupportedLinkType(PcapkitError):
    """No packet of the capture is on a link type pcapkit can decode."""


class CaptureTooBroken(PcapkitError):
    """The file starts like a capture but its headers cannot be read at all."""
