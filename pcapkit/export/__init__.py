"""Exports of a trace to other tools' formats (qlog for qvis)."""
