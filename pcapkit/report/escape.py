"""Captured bytes are attacker-controlled: nothing from a capture reaches a terminal raw.

:func:`printable` rewrites every character a terminal would act on — C0 controls (but
newline and tab), DEL, the C1 controls (ESC ``[`` sequences' 8-bit form, OSC, CSI…) and
the Unicode bidirectional overrides that can reorder a line (Trojan Source) — as the
escape a Python literal would use (``\\x1b``, ``\\u202e``), as tshark shows such bytes.
Every text a command prints goes through it (:mod:`pcapkit.cli`).
"""

from __future__ import annotations

import re

# C0 but \t and \n; DEL; C1; bidi embeddings, overrides and isolates; line/paragraph
# separators (a terminal may break the line there)
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: str) -> str:
    """``text`` with every character a terminal would interpret written as an escape."""
    return _UNSAFE.sub(_escape, text)
