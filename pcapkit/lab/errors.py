"""Errors of the lab (impaired-path scenarios); one clear message each, no tracebacks needed."""

from __future__ import annotations


class LabError(RuntimeError):
    """A lab run could not be set up, ran wrong, or produced an unusable fixture."""


class RootRequiredError(LabError):
    """The lab needs root: network namespaces, TUN devices and packet capture."""


class CaptureError(LabError):
    """tcpdump failed, or dropped packets (a fixture with holes is not a fixture)."""
