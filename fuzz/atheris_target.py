"""One dissector target under atheris (coverage-guided, libFuzzer):

    python -m fuzz.atheris_target http2 CORPUS_DIR -max_total_time=60

The dissectors are imported instrumented; an exception other than a DissectError is a
crash (libFuzzer writes the input to ``-artifact_prefix``).  ``pip install atheris``
(a wheel on Linux x86-64 for CPython 3.8–3.12); :mod:`fuzz.run` drives it.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["dissectors", "hpack", "fuzz"]):
    # every module a target imports lazily, imported here so that it is instrumented
    import dissectors.grpc
    import dissectors.http1
    import dissectors.http2
    import dissectors.http3
    import dissectors.qpack
    import dissectors.quic.connection
    import dissectors.quic.frames
    import dissectors.quic.packet
    import dissectors.sse
    import dissectors.tls.handshake
    import dissectors.tls.keylog
    import dissectors.tls.record
    import dissectors.tls.session  # noqa: F401
    import fuzz.seeds  # noqa: F401
    from dissectors.errors import DissectError
    from fuzz.targets import TARGETS


def main() -> None:
    name = sys.argv.pop(1)
    t = TARGETS[name]

    def one(data: bytes) -> None:
        try:
            t(data)
        except DissectError:
            pass

    atheris.Setup(sys.argv, one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
