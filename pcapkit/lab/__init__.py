"""The lab: real traffic under controlled impairment, captured at both ends → fixtures.

Two network namespaces (client, server) with real kernel TCP and Python ``ssl`` are joined
by the project's userspace forwarder (delay, rate, deterministic drops, reordering) over TUN
devices; tcpdump captures both ends on one clock.  See DESIGN.md §6 and DETECTION.md §8.

Public API: :func:`run`, :func:`list_scenarios`, :func:`cleanup_stale`; the ``lab`` click
group lives in :mod:`pcapkit.lab.cli`.  Replay's lab half is here too: the scripted
client and server of a socket-level replay (:mod:`.reenact`, run through
``runner.run_scenario``) and the packet sender (:mod:`.pktsend`).  Only the CLI and
:mod:`pcapkit.replay` (which derives the script from a capture) import this package.
Needs root (:class:`RootRequiredError` otherwise).
"""

from __future__ import annotations

from .errors import CaptureError, LabError, RootRequiredError
from .netns import cleanup_stale
from .runner import list_scenarios, run

__all__ = [
    "CaptureError",
    "LabError",
    "RootRequiredError",
    "cleanup_stale",
    "list_scenarios",
    "run",
]
