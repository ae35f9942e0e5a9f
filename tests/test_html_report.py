"""The HTML report (``pcapkit report``): self-contained, escaped, and — in a real headless
Chromium from the distribution's packages (``chromium`` + ``chromium-driver``, installed by
.ci/run; skipped cleanly when absent) — loads without console errors, shows every finding
and chart with one SVG mark per table row, and runs nothing a capture carries.

Screenshots of two fixtures' reports are written to ``build/test-artifacts/`` (or
``$PCAPKIT_ARTIFACTS``)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import pcapkit
from pcapkit.cli import cli
from pcapkit.report.html import analysis_html, json_for_script

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
ARTIFACTS = Path(os.environ.get("PCAPKIT_ARTIFACTS", ROOT / "build" / "test-artifacts"))
HOSTILE = (
    ROOT / "tests" / "data" / "hostile_strings" / "client.pcapng"
)  # scripts/make_hostile_fixture.py
CAPTURES = [
    "tls_sse_nagle/client.pcapng",
    "h2_hol_drop/client.pcapng",
    "h3_sse_drop/client.pcapng",
    "h2_flow_control/client.pcapng",
]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def write_report(tmp_path: Path, capture: Path) -> Path:
    out = tmp_path / (capture.parent.name + ".html")
    r = CliRunner().invoke(cli, ["report", str(capture), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert r.output.startswith(f"{out}: ") and r.output.rstrip().endswith(" bytes")
    return out


# -- without a browser --------------------------------------------------------------------


def test_report_is_self_contained_and_small(tmp_path):
    for cap in CAPTURES:
        page = write_report(tmp_path, FIX / cap).read_text()
        assert page.startswith("<!doctype html>")
        # nothing fetched: no URL to load anything from, a CSP that allows nothing outside
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page, re.I)
        assert "default-src 'none'" in page
        assert len(page.encode()) < 200_000  # fixtures: 20–70 KB


def test_json_for_script_cannot_close_its_element():
    s = json_for_script({"a": "</script><!--<script>", "b": "\u2028&"})
    assert "<" not in s and ">" not in s and "&" not in s and "\u2028" not in s
    assert json.loads(s) == {"a": "</script><!--<script>", "b": "\u2028&"}


def test_hostile_strings_are_escaped_in_the_markup():
    with pcapkit.open(HOSTILE) as t:
        assert t.tls.sni.iloc[0].startswith("<script>")  # the capture really carries them
        assert "<img" in t.requests.authority.iloc[0]
        page = analysis_html(t)
    body = page.split("<body>", 1)[1]
    assert body.count("<script") == 2  # the chart data and the page's own script
    assert "<img" not in body and 'onerror="' not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;.x" in body  # the SNI, as text


def test_analyze_format_html_and_report_to_stdout():
    cap = str(FIX / "tls_sse_nagle/client.pcapng")
    a = CliRunner().invoke(cli, ["analyze", cap, "--format", "html", "--flow", "0"])
    b = CliRunner().invoke(cli, ["report", cap, "-o", "-", "--max-connections", "0"])
    assert a.exit_code == b.exit_code == 0
    assert a.output.startswith("<!doctype html>") and 'id="flow-0"' in a.output
    assert 'id="flow-0"' not in b.output and "1 more connection(s)" in b.output
    r = CliRunner().invoke(cli, ["report", str(FIX / "nope.pcap"), "-o", "-"])
    assert r.exit_code == 1 and r.output.startswith("pcapkit: error:")


# -- in Chromium ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("chromium and chromium-driver are not installed (.ci/run installs them)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the [test] extra")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for a in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",  # a small /dev/shm in containers
        "--disable-gpu",
        "--window-size=1200,1600",
    ):
        opts.add_argument(a)
    opts.binary_location = CHROMIUM
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # the distribution's driver, given explicitly: Selenium Manager downloads nothing
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    yield d
    d.quit()


def load(browser, path: Path) -> list[dict]:
    browser.get(path.as_uri())
    ready = browser.find_element("tag name", "body").get_attribute("data-charts-ready")
    assert ready is not None, "the page's script did not run"
    return browser.get_log("browser")


def count(browser, css: str) -> int:
    return int(browser.execute_script("return document.querySelectorAll(arguments[0]).length", css))


def layer(browser, chart_id: str, name: str) -> int:
    return count(browser, f'#{chart_id} g[data-layer="{name}"] .mark')


def screenshot_ok(browser, out: Path) -> None:
    from PIL import Image

    out.parent.mkdir(parents=True, exist_ok=True)
    h = int(browser.execute_script("return document.body.scrollHeight"))
    browser.set_window_size(1200, min(h + 120, 8000))
    browser.save_screenshot(str(out))
    img = Image.open(out).convert("L")
    hist = img.histogram()
    white = sum(hist[250:])
    assert white < 0.97 * img.width * img.height, "the screenshot is blank"
    assert len([v for v in hist if v]) > 30  # text, lines and colours, not one flat tone


@pytest.mark.parametrize("capture", CAPTURES)
def test_report_in_chromium(browser, tmp_path, capture):
    page = write_report(tmp_path, FIX / capture)
    logs = load(browser, page)
    assert [e for e in logs if e["level"] in ("SEVERE", "WARNING")] == []
    with pcapkit.open(FIX / capture) as t:
        f, m, s = t.findings, t.messages, t.segments
        assert count(browser, "section.finding") == len(f) >= 1
        kinds = browser.execute_script(
            "return [...document.querySelectorAll('section.finding')].map(e => e.dataset.kind)"
        )
        assert kinds == list(f.kind)
        filters = browser.execute_script(
            "return [...document.querySelectorAll('input.filter')].map(e => e.value)"
        )
        assert filters == list(f.display_filter)
        charts = browser.execute_script(
            "return [...document.querySelectorAll('figure.chart')].map(e => [e.id, e.dataset.kind])"
        )
        assert count(browser, "figure.chart svg") == len(charts) >= 3
        kinds_drawn = {k for _, k in charts}
        assert {"time_sequence", "handshake_ladder"} <= kinds_drawn or "h3" in capture
        for cid, kind in charts:
            if kind == "token_timeline":
                ev = m[(m.request == 0) & m.type.isin(["event", "message"])]
                if len(ev):
                    assert layer(browser, cid, "events") == len(ev)
                    assert layer(browser, cid, "gaps") == int((t.gaps.request == 0).sum())
            elif kind == "time_sequence":
                seg = s[(s.flow == 0) & (s.dir == "s2c")]
                new = seg.kind.astype(str) == "new"
                assert layer(browser, cid, "segments") == int(new.sum())
                assert layer(browser, cid, "retransmissions") == int((~new).sum())
                assert layer(browser, cid, "psh") == int(seg.psh.sum())
                assert layer(browser, cid, "holes") == int((seg.gap_before > 0).sum())
                sb = t.sack_blocks
                assert layer(browser, cid, "sack") == int(
                    ((sb.flow == 0) & (sb.dir == "c2s")).sum()
                )
            elif kind == "alignment_strip":
                r = t.records[(t.records.flow == 0) & (t.records.dir == "s2c")]
                assert layer(browser, cid, "records") == len(r)
            elif kind == "stream_waterfall":
                h2 = m[(m.protocol == "h2") & (m.stream > 0)]
                q = m[(m.protocol == "quic") & (m.type == "STREAM") & (m.stream % 4 == 0)]
                assert layer(browser, cid, "frames") == (len(h2) if len(h2) else len(q))
        # hover shows the frame numbers of the mark under the pointer
        from selenium.webdriver.common.action_chains import ActionChains

        mark = browser.find_element("css selector", "figure.chart .mark")
        ActionChains(browser).move_to_element(mark).perform()
        tip = browser.find_element("id", "tip")
        frames = mark.get_attribute("data-frames")
        assert tip.is_displayed() and f"frames: {frames}" in tip.text
    if capture in CAPTURES[:2]:
        screenshot_ok(browser, ARTIFACTS / (Path(capture).parent.name + ".png"))


def test_hostile_capture_runs_nothing_and_injects_nothing(browser, tmp_path):
    page = write_report(tmp_path, HOSTILE)
    logs = load(browser, page)
    # an injected inline script or handler would at least be reported as a CSP violation
    assert [e for e in logs if e["level"] in ("SEVERE", "WARNING")] == []
    title = browser.title
    assert title.startswith("pcapkit report") and "PWNED" not in title
    js = browser.execute_script
    assert js("return document.images.length") == 0
    assert js("return document.scripts.length") == 2
    assert (
        js(
            "return document.querySelectorAll('iframe,object,embed,form,base,meta[http-equiv=refresh]').length"
        )
        == 0
    )
    handlers = js(
        "return [...document.querySelectorAll('*')].flatMap(e => [...e.attributes]"
        ".filter(a => a.name.startsWith('on') || /^\\s*javascript:/i.test(a.value))"
        ".map(a => e.tagName + ' ' + a.name))"
    )
    assert handlers == []
    text = js("return document.body.innerText")
    assert "<script>alert(1)</script>.x" in text  # the SNI, shown as text
    assert '"><img src=x onerror=' in text  # the Host header
    # the SSE events' hover text is text too (the tooltip gets no child element)
    with pcapkit.open(HOSTILE) as t:
        ev = t.messages[t.messages.type == "event"]
        cid = js("return document.querySelector('figure[data-kind=token_timeline]').id")
        assert layer(browser, cid, "events") == len(ev) == 5
    from selenium.webdriver.common.action_chains import ActionChains

    marks = browser.find_elements("css selector", f'#{cid} g[data-layer="events"] .mark')
    for mark in reversed(marks):  # ends on the first event: data: <script>…
        ActionChains(browser).move_to_element(mark).perform()
        assert js("return document.getElementById('tip').children.length") == 0
    assert "<script>document.title='PWNED'" in browser.find_element("id", "tip").text
    assert "PWNED" not in browser.title and js("return document.images.length") == 0


def test_findings_past_max_findings_are_one_line_each():
    with pcapkit.open(FIX / "tls_sse_nagle/client.pcapng") as t:
        n = len(t.findings)
        page = analysis_html(t, max_findings=1)
    assert page.count('<section class="finding') == n >= 2
    assert page.count('<section class="finding brief') == n - 1
    assert f"{n - 1} more finding(s), one line each" in page
    assert page.count('class="filter"') == n  # every finding keeps its filter


def test_empty_and_cleartext_captures_give_a_page(tmp_path):
    from pcapkit.io.writer import write_pcap

    from synth import Conn

    empty = tmp_path / "empty.pcap"
    write_pcap(empty, [], 1)
    c = Conn(sport=80)
    c.handshake()
    c.c2s(30_000, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    c.s2c(31_000, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
    c.ack_c(31_100)
    plain = tmp_path / "plain.pcap"
    write_pcap(plain, c.frames, 1)
    for cap, cards in ((empty, 0), (plain, 1)):
        page = write_report(tmp_path, cap).read_text()
        assert page.count('<section class="conn"') == cards
        assert '<p class="none">No finding.</p>' in page
        assert page.rstrip().endswith("</html>")


def test_token_timelines_for_delayed_or_streamed_requests_only():
    for cap in ("h2_hol_drop/client.pcapng", "tls_sse_nagle/client.pcapng"):
        with pcapkit.open(FIX / cap) as t:
            page = analysis_html(t)
            want = set(t.findings.request.dropna().astype(int)) | set(
                t.requests[t.requests.events.fillna(0) > 0].request
            )
            assert page.count('data-kind="token_timeline"') == len(want) >= 1
            assert analysis_html(t, max_requests=0).count('data-kind="token_timeline"') == 0


def test_a_card_lists_at_most_max_request_rows():
    from pcapkit.report import html as report_html

    with pcapkit.open(FIX / "h2_hol_drop/client.pcapng") as t:
        q = t.requests
        part = report_html.requests_html(q, limit=3)
        assert part.count("<tr>") == 1 + 3
        assert f"{len(q) - 3} more request(s) on this connection" in part
        assert "more request(s)" not in report_html.requests_html(q)


def test_zoom_reset_and_copy_in_chromium(browser, tmp_path):
    page = write_report(tmp_path, FIX / "h2_hol_drop/client.pcapng")
    load(browser, page)
    js = browser.execute_script
    get_x = "return document.querySelector('figure[data-kind=time_sequence] g[data-layer=segments] .mark').getAttribute('x1')"
    before = float(js(get_x))
    js(
        "const s = document.querySelector('figure[data-kind=time_sequence] svg');"
        "const r = s.getBoundingClientRect();"
        "s.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: r.left + r.width * 0.9,"
        " clientY: r.top + r.height / 2, bubbles: true, cancelable: true}));"
    )
    zoomed = float(js(get_x))
    assert zoomed < before  # zoomed in around the right: the first segment moves left
    js(
        "document.querySelector('figure[data-kind=time_sequence] svg')"
        ".dispatchEvent(new MouseEvent('dblclick', {bubbles: true}))"
    )
    assert float(js(get_x)) == before
    # the marks are still one per row after redrawing
    seg = js(
        "return document.querySelectorAll('figure[data-kind=time_sequence] g[data-layer=segments] .mark').length"
    )
    with pcapkit.open(FIX / "h2_hol_drop/client.pcapng") as t:
        s = t.segments
        assert seg == int(((s.flow == 0) & (s.dir == "s2c") & (s.kind == "new")).sum())
    button = browser.find_element("css selector", "section.finding button.copy")
    button.click()
    # the label changes when the clipboard write settles (a promise where the page is a
    # secure context, as file:// is) and goes back 1.2 s later: poll for it, never a
    # single read right after the click (it raced on a loaded machine)
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 10, poll_frequency=0.05).until(lambda _: button.text == "copied")
