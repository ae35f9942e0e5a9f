"""Report rendering: terminal text and stable JSON.

The renderers load on first use (PEP 562): ``pcapkit.report.names`` and the other
light modules import without pandas (start-up of the command line, issue 16)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .json import analysis_json, to_jsonable, write_analysis_json
    from .text import analysis_text, records_text

__all__ = ["analysis_json", "analysis_text", "records_text", "to_jsonable", "write_analysis_json"]
_WHERE = {
    "analysis_json": "json",
    "to_jsonable": "json",
    "write_analysis_json": "json",
    "analysis_text": "text",
    "records_text": "text",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
