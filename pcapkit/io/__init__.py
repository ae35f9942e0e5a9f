"""Capture input/output: pcap and pcapng over an mmap, gzip input, writers, secrets."""

from .reader import RawCapture, read_capture

__all__ = ["RawCapture", "read_capture"]
