"""Report rendering: terminal text and stable JSON."""

from .json import analysis_json, to_jsonable, write_analysis_json
from .text import analysis_text, records_text

__all__ = ["analysis_json", "analysis_text", "records_text", "to_jsonable", "write_analysis_json"]
