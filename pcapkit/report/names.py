"""Names the command line shows before any capture is read: the JSON report's keys and
the metrics ``pcapkit diff`` compares.  Plain data, no pandas: ``pcapkit --help`` and
the option parsing import this, not the report modules (start-up, issue 16)."""

from __future__ import annotations

# The report's top-level keys, in order (the README's JSON section and ``--help`` are
# checked against this list by tests/test_cli.py).
JSON_KEYS = (
    "schema_version",
    "capture",
    "coverage",
    "flows",
    "tls",
    "quic",
    "requests",
    "gaps",
    "hol_counterfactual",
    "findings",
    "anomalies",
)

# metric → (better when lower?, unit, judged for the verdict: "always" | "same_workload")
METRICS: dict[str, tuple[bool, str, str]] = {
    "ttfb_ms": (True, "ms", "always"),
    "ttft_ms": (True, "ms", "always"),
    "response_ms": (True, "ms", "always"),
    "gap_p50_ms": (True, "ms", "always"),
    "gap_p95_ms": (True, "ms", "always"),
    "gap_max_ms": (True, "ms", "always"),
    "events_per_s": (False, "1/s", "always"),
    "bytes_per_s": (False, "B/s", "always"),
    "exchange_ms": (True, "ms", "always"),
    "handshake_ms": (True, "ms", "always"),
    "findings_cost_ms": (True, "ms", "always"),
    "connections": (True, "", "same_workload"),
    "handshakes": (True, "", "same_workload"),
    "resumed_handshakes": (False, "", "same_workload"),
    "requests_per_connection": (False, "", "same_workload"),
}
