"""pytest plugin: capture a test's own traffic and assert on what pcapkit says of it.

Installed with pcapkit (entry point ``pytest11``: ``pcapkit``), it adds one fixture::

    def test_stream_is_not_held(pcapkit_capture):
        with pcapkit_capture("lo", bpf="tcp port 8443") as cap:
            run_my_client_against_my_server()      # SSLKEYLOGFILE is set meanwhile
        assert cap.trace.findings.empty
        assert cap.trace.requests.ttft_ms.max() < 200

``pcapkit_capture(interface="lo", *, bpf=None, tail_s=0.25, name=None)`` is a context
manager (:class:`pcapkit.io.capture.LiveCapture`): dumpcap captures ``interface`` for the
block's duration while ``SSLKEYLOGFILE`` names a private key log, the keys end up in the
pcapng (a Decryption Secrets Block), and ``cap.trace`` is the opened
:class:`pcapkit.Trace` (closed when the test ends).  ``cap.path`` is the capture, in the
test's ``tmp_path`` (pytest keeps the last runs' directories; a failing test's report
names the file), ``cap.keylog`` the key log's path during the block, ``cap.result`` the
:class:`~pcapkit.io.capture.CaptureResult` (packets, drops).

Capturing needs the rights that ``pcapkit capture`` needs (root, or a dumpcap with
CAP_NET_RAW and CAP_NET_ADMIN) and dumpcap itself: without them the test is *skipped*
with the reason, never failed.  ``pytest --pcapkit-interface IFACE`` changes the default
interface.  Importing this module costs nothing: pcapkit is imported when the fixture is
used.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .io.capture import CaptureResult
    from .trace import Trace


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pcapkit", "pcapkit: capture a test's own traffic")
    group.addoption(
        "--pcapkit-interface",
        default="lo",
        metavar="IFACE",
        help="default interface the pcapkit_capture fixture captures on (default: lo)",
    )


class Captured:
    """One capture made inside a test (what ``pcapkit_capture(...)`` yields)."""

    def __init__(self, path: Path, keylog: Path | None) -> None:
        self.path = path
        self.keylog = keylog
        self.result: CaptureResult | None = None
        self._trace: Trace | None = None

    @property
    def trace(self) -> Trace:
        """The capture opened with pcapkit (after the ``with`` block)."""
        if self.result is None:
            raise RuntimeError("the capture is still running: use .trace after the with-block")
        if self._trace is None:
            import pcapkit

            self._trace = pcapkit.open(self.path)
        return self._trace

    def close(self) -> None:
        if self._trace is not None:
            self._trace.close()
            self._trace = None


def _skip_reason() -> str | None:
    import shutil

    if shutil.which("dumpcap") is None:
        return "pcapkit_capture needs dumpcap (Debian: apt-get install tshark)"
    return None


@pytest.fixture
def pcapkit_capture(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[..., contextlib.AbstractContextManager[Captured]]]:
    """A context manager factory capturing this test's traffic; see the module docstring."""
    made: list[Captured] = []
    default_iface = request.config.getoption("--pcapkit-interface")

    @contextlib.contextmanager
    def start(
        interface: str | None = None,
        *,
        bpf: str | None = None,
        tail_s: float = 0.25,
        name: str | None = None,
    ) -> Iterator[Captured]:
        from .io.capture import CapturePermissionError, LiveCapture

        if (why := _skip_reason()) is not None:
            pytest.skip(why)
        path = tmp_path / (name or f"capture-{len(made) + 1}.pcapng")
        live = LiveCapture(interface or default_iface, path, bpf=bpf, tail_s=tail_s)
        try:
            live.__enter__()
        except CapturePermissionError as e:
            pytest.skip(f"pcapkit_capture: {e}")
        cap = Captured(path, live.keylog)
        made.append(cap)
        request.node.user_properties.append(("pcapkit_capture", str(path)))
        ok = False
        try:
            yield cap
            ok = True
        finally:
            if ok:
                live.__exit__(None, None, None)
                cap.result = live.result
            else:  # the block raised: stop the capture, keep the test's own exception
                with contextlib.suppress(Exception):
                    live.__exit__(None, None, None)
                    cap.result = live.result

    yield start
    for cap in made:
        cap.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing test's report names the captures it made (to open them by hand)."""
    rep = yield
    if rep.when == "call" and rep.failed:
        for key, value in item.user_properties:
            if key == "pcapkit_capture" and isinstance(value, str) and os.path.exists(value):
                rep.sections.append(("pcapkit capture", f"{value}  (pcapkit analyze {value})"))
    return rep
